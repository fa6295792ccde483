"""`pantheon test local`: its options, declared with `pantheon sim`'s in experiment.py."""
from __future__ import annotations

import argparse

from pantheon import experiment
from pantheon.harness.local import run_local


def add_parser(sub: argparse._SubParsersAction) -> None:
    test = sub.add_parser("test", help="run schemes and record every packet (pantheon test local --help)")
    modes = test.add_subparsers(dest="mode", metavar="MODE", required=True)
    local = modes.add_parser(
        "local",
        help="over an emulated path on this machine",
        description="Run schemes over an emulated path on this machine, each flow through an instrumented tunnel.",
    )
    experiment.add_scheme_options(local, "comma-separated scheme names (pantheon schemes are under schemes/)",
                                  "every scheme available on this machine")
    experiment.add_run_options(local, clock="", run_times_help="runs of each scheme (default 1)",
                               seed_help="seed for --random-order and the emulator; run K uses seed + K - 1 (default 0)")
    local.add_argument("--random-order", action="store_true", help="a random permutation of the schemes, round-robin")
    experiment.add_output_options(local, "local")
    experiment.add_path_options(local)


def run(args: argparse.Namespace) -> int:
    asked = experiment.Experiment.from_args(args, "local")
    return run_local(asked, random_order=args.random_order, analyze=not args.no_analyze,
                     arguments=asked.arguments(command="test", mode="local", random_order=args.random_order,
                                               no_analyze=args.no_analyze))
