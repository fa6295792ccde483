"""`pantheon sim`: `pantheon test local`'s experiment, simulated (pantheon-sim, docs/sim.md).

The same options as the harness (declared once in experiment.py: schemes, runs, flows, scenario,
an --emulator preset or the emulator's own options, seed, data dir) and the same data dir, so the
analysis, plots and report read it unchanged; runs are simulated in parallel on every core (--jobs) and need no root, no
namespaces and no wall-clock time beyond the simulation's own. Only schemes whose sender is
pantheon-udp with a crates/cc controller can be simulated (simulable.py); others are skipped with
a line saying why, and the exit status is then 1, as the harness does for a scheme it cannot run.
"""
from __future__ import annotations

import argparse
import os
import sys

from pantheon import experiment, files, schemes
from pantheon.analysis import cli as analysis_cli
from pantheon.errors import PantheonError
from pantheon.progress import Progress
from pantheon.sim import campaign, simulable, simulator
from pantheon.trials import metadata, refuse_taken, trial_order, write_metadata


def add_parser(sub: argparse._SubParsersAction) -> None:
    sim = sub.add_parser(
        "sim", help="simulate schemes over an emulated path, thousands of times faster than real time (pantheon sim --help)",
        description="Simulate pantheon test local's experiment with pantheon-sim: the emulator's link model and the "
        "schemes' own crates/cc controllers under a discrete-event clock, runs in parallel on every core. "
        "The data dir is pantheon test local's (docs/harness.md).",
        epilog="example:\n  pantheon sim --schemes copa,cubic-user,vegas-user --emulator nepal-wifi --run-times 5 "
        "--data-dir data/nepal",
    )
    experiment.add_scheme_options(sim, "comma-separated scheme names; only those whose sender is pantheon-udp "
                                  "with a crates/cc controller can be simulated (copa, cubic-user, ...)",
                                  "every scheme that can be simulated")
    experiment.add_run_options(sim, clock="simulated ",
                               run_times_help="runs of each scheme (default 1); run K uses seed --seed + K - 1",
                               seed_help="seed of the path's randomness (loss, Poisson deliveries; default 0)")
    sim.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                     help=f"runs simulated at once (default: all {len(os.sched_getaffinity(0))} cores this process may use)")
    sim.add_argument("--text-logs", action="store_true", help="also keep each run's text logs of the real experiment "
                     "(tunnel logs flowI.*.log, link logs uplink.log and downlink.log: ~220 bytes a data packet); "
                     "records.parquet, datalink.log and acklink.log are always written")
    experiment.add_output_options(sim, "sim")
    experiment.add_path_options(sim)
    sim.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    asked = experiment.Experiment.from_args(args, "sim")
    return simulate(asked, jobs=args.jobs, text_logs=args.text_logs, analyze=not args.no_analyze,
                    arguments=asked.arguments(command="sim", jobs=args.jobs, no_analyze=args.no_analyze))


def simulate(asked: experiment.Experiment, *, jobs: int, text_logs: bool, analyze: bool, arguments: dict) -> int:
    """The experiment simulated into its data dir, then (`analyze`) its analysis; 0 when every run
    succeeded and every scheme asked for was simulated, else 1 (130: interrupted)."""
    data_dir = asked.data_dir
    if jobs < 1:
        raise PantheonError(f"--jobs must be at least 1, got {jobs}")
    known = schemes.registry()
    cc = simulable.simulable(known)
    path_options = asked.expanded_path_options()
    selection = asked.select(every=list(cc), problem=lambda name: simulable.problem(known, name), verb="be simulated",
                             skip_line="pantheon: {name}: {why}", expected_skip=lambda name: False,
                             rate_mbps=experiment.uplink_rate_mbps(path_options) if asked.scenario else None)
    trials = trial_order(selection.plans, asked.run_times, random_order=False, seed=asked.seed)
    refuse_taken(data_dir, trials)
    simulator.check_path_options(path_options, asked.seed)

    used = sorted({s for p in selection.plans for s in p.schemes})
    files.writable_dir(data_dir, "--data-dir")
    # A simulated flow's two sides start together: no head start.
    meta = metadata(arguments, [*path_options, "--seed", str(asked.seed)], [known.schemes[s] for s in used], trials,
                    selection.skipped, head_start_s=0.0)
    meta.update(simulated=True, simulator={"program": simulator.PROGRAM, **simulator.version(),
                                           "cc": {s: cc[s] for s in used}, "jobs": jobs})
    write_metadata(data_dir, meta)
    if not asked.quiet:  # once nothing can stop the campaign: a user's mistake stays one line
        print(f"pantheon: path: {experiment.describe_path(path_options, asked.emulator)}", file=sys.stderr)

    runs = [campaign.SimRun(t, t.run_dir(data_dir), cc, path_options,
                            experiment.seed_of(asked.seed, t.repetition), text_logs) for t in trials]
    failed = campaign.run_all(runs, jobs, Progress(len(runs), quiet=asked.quiet), asked.run_times)
    if failed == 130:
        print(f"pantheon: interrupted; finished runs are in {data_dir}", file=sys.stderr)
        return 130
    if not asked.quiet:
        print(analysis_cli.campaign_line(data_dir, len(runs), failed), file=sys.stderr)
    if analyze:
        analysis_cli.after_campaign(data_dir, asked.quiet)
    if selection.not_run:
        print(f"pantheon: not simulated: {', '.join(selection.not_run)} (see the lines at the start)", file=sys.stderr)
    return 1 if failed or selection.not_run else 0
