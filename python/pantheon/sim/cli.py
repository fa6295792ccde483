"""`pantheon sim`: `pantheon test local`'s experiment, simulated (pantheon-sim, docs/sim.md).

The same options as the harness (schemes, runs, flows, scenario, an --emulator preset or the
emulator's own options, seed, data dir) and the same data dir, so the analysis, plots and report
read it unchanged; runs are simulated in parallel on every core (--jobs) and need no root, no
namespaces and no wall-clock time beyond the simulation's own. Only schemes whose sender is
pantheon-udp with a crates/cc controller can be simulated (simulable.py); others are skipped with
a line saying why, and the exit status is then 1, as the harness does for a scheme it cannot run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime
from pathlib import Path

from pantheon import presets, schemes
from pantheon.analysis import cli as analysis_cli
from pantheon.harness import plan as plans
from pantheon.harness.campaign import metadata, trial_order
from pantheon.harness.cli import split_emulator_options
from pantheon.sim import campaign, simulable, simulator


def add_parser(sub: argparse._SubParsersAction) -> None:
    sim = sub.add_parser(
        "sim", help="simulate schemes over an emulated path, thousands of times faster than real time (pantheon sim --help)",
        description="Simulate pantheon test local's experiment with pantheon-sim: the emulator's link model and the "
        "schemes' own crates/cc controllers under a discrete-event clock, runs in parallel on every core. Emulator "
        "options (--delay MS, --uplink-rate MBPS, --uplink-queue-bytes N, ...; see pantheon emulate --help) set "
        "the path; --emulator NAME picks one of Pantheon's paths (pantheon emulators). Default path: 12 Mbit/s "
        "each way, no delay, infinite queue. The data dir is pantheon test local's (docs/harness.md).",
    )
    which = sim.add_mutually_exclusive_group(required=True)
    which.add_argument("--schemes", help="comma-separated scheme names; only those whose sender is pantheon-udp "
                       "with a crates/cc controller can be simulated (copa, cubic-user, ...)")
    which.add_argument("--all", action="store_true", help="every scheme that can be simulated")
    which.add_argument("--scenario", type=Path, help="TOML file of flows {scheme, start_s, duration_s}, schemes mixed")
    sim.add_argument("--run-times", type=int, default=1, help="runs of each scheme (default 1); run K uses seed --seed + K - 1")
    sim.add_argument("--runtime", type=float, default=30.0, help="simulated seconds each run lasts (default 30)")
    sim.add_argument("--flows", type=int, default=1, help="flows per run (default 1)")
    sim.add_argument("--interval", type=float, default=0.0, help="simulated seconds between flow starts (default 0)")
    sim.add_argument("--seed", type=int, default=0, help="seed of the path's randomness (loss, Poisson deliveries; default 0)")
    sim.add_argument("--data-dir", type=Path, help="where results go (default data/sim-DATE-TIME)")
    sim.add_argument("--emulator", help="one of Pantheon's emulated paths (pantheon emulators)")
    sim.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                     help=f"runs simulated at once (default: all {len(os.sched_getaffinity(0))} cores this process may use)")
    sim.add_argument("--text-logs", action="store_true", help="also keep each run's text logs of the real experiment "
                     "(tunnel logs flowI.*.log, link logs uplink.log and downlink.log: ~220 bytes a data packet); "
                     "records.parquet, datalink.log and acklink.log are always written")
    sim.add_argument("--quiet", action="store_true", help="no progress lines")
    sim.add_argument("--no-analyze", action="store_true", help="skip the analysis at the end (pantheon analyze DATA_DIR)")


def _plans(args: argparse.Namespace, known: schemes.Registry) -> tuple[list[plans.Plan], dict[str, str], list[str]]:
    """The runs' plans, the schemes skipped (name -> why) and those whose skip is an error."""
    if args.scenario:
        plan = plans.scenario(args.scenario)
        if problems := [f"{n}: {p}" for n in plan.schemes if (p := simulable.problem(known, n))]:
            raise ValueError(f"scenario {args.scenario} cannot be simulated: {'; '.join(problems)}")
        return [plan], {}, []
    asked = list(simulable.simulable(known)) if args.all else list(dict.fromkeys(s for s in args.schemes.split(",") if s))
    skipped = {name: problem for name in asked if (problem := simulable.problem(known, name))}
    for name, problem in skipped.items():
        print(f"pantheon: {name}: {problem}", file=sys.stderr)
    wanted = [name for name in asked if name not in skipped]
    if not wanted:
        raise ValueError("no scheme can be simulated (see the lines above)")
    return [plans.uniform(name, args.flows, args.interval, args.runtime) for name in wanted], skipped, list(skipped)


def run(args: argparse.Namespace, extras: list[str]) -> int:
    data_dir = args.data_dir or Path("data") / datetime.now().strftime("sim-%Y%m%d-%H%M%S")
    path_options = split_emulator_options(extras)
    if args.run_times < 1:
        raise ValueError(f"--run-times must be at least 1, got {args.run_times}")
    if args.jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {args.jobs}")
    known = schemes.registry()
    run_plans, skipped, errors = _plans(args, known)
    trials = trial_order(run_plans, args.run_times, random_order=False, seed=args.seed)
    taken = [d for t in trials if (d := data_dir / t.plan.label / f"run{t.repetition}").exists()]
    if taken:
        raise FileExistsError(f"{taken[0]} already exists: pick a new --data-dir (finished runs are never overwritten)")
    if args.emulator:
        preset = presets.lookup(args.emulator)
        traces = data_dir / "traces"
        traces.mkdir(parents=True, exist_ok=True)
        path_options = presets.merge(preset.options(traces), path_options)
    simulator.check_path_options(path_options, args.seed)

    cc = simulable.simulable(known)
    used = sorted({s for p in run_plans for s in p.schemes})
    arguments = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    data_dir.mkdir(parents=True, exist_ok=True)
    meta = metadata(arguments, [*path_options, "--seed", str(args.seed)], [known.schemes[s] for s in used], trials, skipped)
    meta.update(simulated=True, simulator={"program": simulator.PROGRAM, **simulator.version(),
                                           "cc": {s: cc[s] for s in used}, "jobs": args.jobs})
    (data_dir / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")

    runs = [campaign.SimRun(t, data_dir / t.plan.label / f"run{t.repetition}", cc, path_options,
                            campaign.seed_of(args.seed, t.repetition), args.text_logs) for t in trials]
    failed = campaign.run_all(runs, args.jobs, campaign.Progress(args.quiet, len(runs), args.run_times))
    if failed == 130:
        print(f"pantheon: interrupted; finished runs are in {data_dir}", file=sys.stderr)
        return 130
    if not args.quiet:
        print(f"pantheon: {len(runs) - failed} of {len(runs)} runs ok; data in {data_dir}", file=sys.stderr)
    if not args.no_analyze:
        analysis_cli.after_campaign(data_dir, args.quiet)
    if errors:
        print(f"pantheon: not simulated: {', '.join(errors)} (see the lines at the start)", file=sys.stderr)
    return 1 if failed or errors else 0
