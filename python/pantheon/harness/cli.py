"""`pantheon test local`: options, validation, and the campaign."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from pantheon import presets, schemes
from pantheon.analysis import cli as analysis_cli
from pantheon.binaries import binary
from pantheon.harness import plan as plans
from pantheon.harness.campaign import run_campaign
from pantheon.netns import require_root

EMULATOR_FLAGS = ("--delay", "--uplink-", "--downlink-")


def add_parser(sub: argparse._SubParsersAction) -> None:
    test = sub.add_parser("test", help="run schemes and record every packet (pantheon test local --help)")
    modes = test.add_subparsers(dest="mode", metavar="MODE", required=True)
    local = modes.add_parser(
        "local",
        help="over an emulated path on this machine",
        description="Run schemes over an emulated path on this machine, each flow through an instrumented "
        "tunnel. Emulator options (--delay MS, --uplink-rate MBPS, --uplink-queue-packets N, ...; see "
        "pantheon emulate --help) are passed to the emulator; --emulator NAME picks one of Pantheon's paths "
        "(pantheon emulators). Default path: 12 Mbit/s each way, no delay, infinite queue.",
    )
    which = local.add_mutually_exclusive_group(required=True)
    which.add_argument("--schemes", help="comma-separated scheme names (pantheon schemes are under schemes/)")
    which.add_argument("--all", action="store_true", help="every scheme available on this machine")
    which.add_argument("--scenario", type=Path, help="TOML file of flows {scheme, start_s, duration_s}, schemes mixed")
    local.add_argument("--run-times", type=int, default=1, help="runs of each scheme (default 1)")
    local.add_argument("--runtime", type=float, default=30.0, help="seconds each run lasts (default 30)")
    local.add_argument("--flows", type=int, default=1, help="flows per run (default 1)")
    local.add_argument("--interval", type=float, default=0.0, help="seconds between flow starts (default 0)")
    local.add_argument("--random-order", action="store_true", help="a random permutation of the schemes, round-robin")
    local.add_argument("--seed", type=int, default=0, help="seed for --random-order and the emulator (default 0)")
    local.add_argument("--data-dir", type=Path, help="where results go (default data/local-DATE-TIME)")
    local.add_argument("--emulator", help="one of Pantheon's emulated paths (pantheon emulators)")
    local.add_argument("--quiet", action="store_true", help="no progress display")
    local.add_argument("--no-analyze", action="store_true", help="skip the analysis at the end (pantheon analyze DATA_DIR)")


def split_emulator_options(extras: list[str]) -> list[str]:
    """The emulator's options among the arguments the harness does not know; a ValueError for
    anything else."""
    for arg in extras:
        if arg.startswith("--") and not arg.startswith(EMULATOR_FLAGS):
            raise ValueError(f"unknown option {arg} (see pantheon test local --help)")
    if extras and not extras[0].startswith("--"):
        raise ValueError(f"unexpected argument {extras[0]!r} (see pantheon test local --help)")
    return extras


def check_emulator_options(options: list[str]) -> None:
    """Lets the emulator itself judge the options once, in a scratch namespace, so a bad value
    stops the campaign before it starts with the emulator's own one-line message."""
    name = f"pantheon-check-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        done = subprocess.run(["ip", "netns", "exec", name, str(binary("pantheon-emu")), *options, "--", "true"],
                              capture_output=True, text=True)
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
    if done.returncode != 0:
        raise ValueError(done.stderr.strip().removeprefix("pantheon emulate: ") or f"emulator exited {done.returncode}")


def run(args: argparse.Namespace, extras: list[str]) -> int:
    require_root("pantheon test local")
    data_dir = args.data_dir or Path("data") / datetime.now().strftime("local-%Y%m%d-%H%M%S")
    emulator_options = split_emulator_options(extras)
    if args.emulator:
        traces = data_dir / "traces"
        traces.mkdir(parents=True, exist_ok=True)
        emulator_options = presets.merge(presets.lookup(args.emulator).options(traces), emulator_options)
    emulator_options = [*emulator_options, "--seed", str(args.seed)]
    check_emulator_options(emulator_options)
    if args.run_times < 1:
        raise ValueError(f"--run-times must be at least 1, got {args.run_times}")

    known = schemes.registry()
    skipped: dict[str, str] = {}
    errors: list[str] = []
    if args.scenario:
        run_plans = [plans.scenario(args.scenario)]
        if problems := [f"{n}: {known.problem(n)}" for n in run_plans[0].schemes if known.problem(n)]:
            raise ValueError(f"scenario {args.scenario} cannot run: {'; '.join(problems)}")
        wanted = run_plans[0].schemes
    else:
        asked = known.names() if args.all else [s for s in args.schemes.split(",") if s]
        skipped = {name: problem for name in asked if (problem := known.problem(name))}
        # Under --all a scheme this machine cannot run is expected; any other skip is an error.
        errors = [n for n in skipped if not (args.all and n in known.schemes and known.schemes[n].unavailable_reason())]
        for name, problem in skipped.items():
            print(f"pantheon: skipping {name}: {problem}", file=sys.stderr)
        wanted = [name for name in asked if name not in skipped]
        if not wanted:
            raise ValueError("no scheme can run (see the lines above; pantheon schemes list)")
        run_plans = [plans.uniform(name, args.flows, args.interval, args.runtime) for name in wanted]
    registry = {name: known.schemes[name] for name in wanted}

    arguments = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    failed = run_campaign(plans=run_plans, schemes=registry, emulator_options=emulator_options, data_dir=data_dir,
                          run_times=args.run_times, random_order=args.random_order, seed=args.seed,
                          quiet=args.quiet, arguments=arguments, skipped=skipped)
    if not args.no_analyze:
        analysis_cli.after_campaign(data_dir, args.quiet)
    if errors:
        print(f"pantheon: not run: {', '.join(errors)} (see the lines at the start)", file=sys.stderr)
    return 1 if failed or errors else 0
