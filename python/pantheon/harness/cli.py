"""`pantheon test local` and `pantheon test remote`: their options, declared with `pantheon sim`'s
in experiment.py (remote mode takes every campaign option but the emulated path's)."""
from __future__ import annotations

import argparse
from pathlib import Path

from pantheon import experiment
from pantheon.harness.local import run_local
from pantheon.harness.remote import run_remote, setup_of


def _campaign_options(parser: argparse.ArgumentParser, mode: str, schemes_help: str, all_help: str, seed_help: str) -> None:
    """What both modes take: the schemes, the runs, the trial order, the output."""
    experiment.add_scheme_options(parser, schemes_help, all_help)
    experiment.add_run_options(parser, clock="", run_times_help="runs of each scheme (default 1)", seed_help=seed_help)
    parser.add_argument("--random-order", action="store_true", help="a random permutation of the schemes, round-robin")
    experiment.add_output_options(parser, mode)


def add_parser(sub: argparse._SubParsersAction) -> None:
    test = sub.add_parser("test", help="run schemes and record every packet (pantheon test local --help)",
                          description="Run schemes and record every packet: over an emulated path on this machine "
                          "(local), or over the real path between this host and another (remote); docs/harness.md.",
                          epilog="example:\n  pantheon test local --schemes cubic,bbr --runtime 30 --emulator nepal-wifi")
    modes = test.add_subparsers(dest="mode", metavar="MODE", required=True)
    local = modes.add_parser(
        "local",
        help="over an emulated path on this machine",
        description="Run schemes over an emulated path on this machine, each flow through an instrumented tunnel.",
        epilog="example:\n  pantheon test local --schemes cubic,bbr --runtime 30 --emulator nepal-wifi",
    )
    _campaign_options(local, "local", "comma-separated scheme names (pantheon schemes are under schemes/)",
                      "every scheme available on this machine",
                      "seed for --random-order and the emulator; run K uses seed + K - 1 (default 0)")
    experiment.add_path_options(local, host=True)
    local.set_defaults(run=_run_local, makes_namespaces=local.prog)

    remote = modes.add_parser(
        "remote",
        help="over a real path between this host and another, reached over ssh",
        description="Run schemes over the real path between this host and HOST, each flow through an instrumented "
        "tunnel whose far endpoint the Pantheon set up on HOST runs (started over your own ssh and its configuration). "
        "One-way delays are corrected by the two hosts' clock offset and drift, measured by the tunnels over the path.",
        epilog="example:\n  pantheon test remote root@node2.example.org --schemes cubic,bbr --run-times 3 --runtime 30",
    )
    remote.add_argument("host", metavar="[USER@]HOST[:PANTHEON_DIR]",
                        help="the remote host as ssh takes it, and where Pantheon is set up there (default: this checkout's path)")
    _campaign_options(remote, "remote", "comma-separated scheme names, set up on both hosts",
                      "every scheme available on both hosts", "seed for --random-order (default 0)")
    ends = remote.add_argument_group("the two hosts")
    ends.add_argument("--sender", choices=["local", "remote"], default="local",
                      help="which host sends the data; each direction of a path is a result of its own (default local, as "
                      "the original Pantheon)")
    ends.add_argument("--tunnel-server", choices=["local", "remote"], default="remote",
                      help="which host's tunnel endpoint listens; the other connects out, so it may be behind a NAT "
                      "(default remote, as the original Pantheon)")
    ends.add_argument("--local-addr", metavar="IP", help="where HOST reaches this host, with --tunnel-server local "
                      "(default: the address HOST sees the ssh connection come from)")
    ends.add_argument("--remote-addr", metavar="IP", help="where this host reaches HOST, with --tunnel-server remote "
                      "(default: the HostName ssh connects to, resolved)")
    ends.add_argument("--local-desc", metavar="TEXT", default="", help="a description of this host, for the report")
    ends.add_argument("--remote-desc", metavar="TEXT", default="", help="a description of HOST, for the report")
    ends.add_argument("--ssh-config", metavar="FILE", type=Path, help="ssh configuration file (ssh -F FILE)")
    remote.set_defaults(emulator=None, path_options=[], run=_run_remote)


def _run_local(args: argparse.Namespace) -> int:
    asked = experiment.Experiment.from_args(args, "local")
    return run_local(asked, random_order=args.random_order, analyze=not args.no_analyze,
                     arguments=asked.arguments(command="test", mode="local", random_order=args.random_order,
                                               no_analyze=args.no_analyze))


def _run_remote(args: argparse.Namespace) -> int:
    asked = experiment.Experiment.from_args(args, "remote")
    setup = setup_of(args.host, sender=args.sender, tunnel_server=args.tunnel_server, local_addr=args.local_addr,
                     remote_addr=args.remote_addr, local_desc=args.local_desc, remote_desc=args.remote_desc,
                     ssh_config=args.ssh_config)
    arguments = asked.arguments(command="test", mode="remote", random_order=args.random_order, no_analyze=args.no_analyze,
                                host=args.host, sender=args.sender, tunnel_server=args.tunnel_server,
                                local_addr=args.local_addr, remote_addr=args.remote_addr, local_desc=args.local_desc,
                                remote_desc=args.remote_desc, ssh_config=str(args.ssh_config) if args.ssh_config else None)
    return run_remote(asked, setup, ssh_config=args.ssh_config, random_order=args.random_order,
                      analyze=not args.no_analyze, arguments=arguments)
