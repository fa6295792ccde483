"""`pantheon calibrate DATA_DIR`: fits an emulated path to a data dir's results (the paper's five
parameters, a delivery trace inferred from the data, or both, keeping the better: --model) and
writes it as a preset file that `pantheon test local --emulator FILE` and `pantheon sim --emulator
FILE` take (docs/calibration.md).

Writes, by default under DATA_DIR/calibration/:
    study.db          the Optuna study (SQLite); the same command again resumes it
    calibrated.toml   the best candidate as a preset (--out FILE puts it elsewhere)
    calibrated.json   the summary: the path, the errors overall and per scheme with the noise
                      floor, each scheme's real and simulated figures, the stand-ins, the bounds,
                      each model's best and the inferred trace
    calibrated.uplink.trace   a trace path's uplink as a Mahimahi trace file
    calibrated.png, calibrated.convergence.png   the paper's Fig. 3 and the search's convergence
                      (and .emulated.png with --confirm, .ablation.png with --ablation)
    calibrated.html   the report page: the path, those figures, the per-scheme tables
and prints the models' table (with both) and the per-scheme table on stdout.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from pantheon import presets
from pantheon.calibrate import space
from pantheon.calibrate.calibration import DEFAULT_SIM_RUNS, DEFAULT_TRIALS, STUDY_DIR, calibrate

BOUNDS = ("rate_mbps", "delay_ms", "buffer_bytes", "loss")
"""The parameters whose search bounds an option may give (--rate-mbps LOW:HIGH, ...)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate", help="fit an emulator preset to a data dir's results (pantheon calibrate --help)",
        description="Fit an emulated path (the paper's five parameters: rate, delay, DropTail buffer, loss, constant "
        "or Poisson delivery; or a delivery trace inferred from the data, with delay, buffer, loss and a rate scale) so "
        "that the simulator replicates each scheme's mean throughput and p95 one-way delay in DATA_DIR; write the "
        "result as a preset file for --emulator (docs/calibration.md).",
        epilog="example:\n  pantheon calibrate data/nepal --trials 100 --minutes 30")
    p.add_argument("data_dir", type=Path, metavar="DATA_DIR", help="a data dir of pantheon test, sim or remote, "
                   "or an original Pantheon one")
    p.add_argument("--schemes", help="comma-separated labels to fit (default: every one the simulator can stand in for)")
    p.add_argument("--trials", type=int, default=DEFAULT_TRIALS, help=f"trials in the study (default {DEFAULT_TRIALS}; "
                   "a resumed study counts those it has)")
    p.add_argument("--minutes", type=float, help="stop asking for trials after this many minutes")
    p.add_argument("--seed", type=int, default=0, help="the sampler's seed (default 0)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler (tcp://HOST:8786) whose workers run the "
                   "trials (default: a local cluster, a thread per core)")
    p.add_argument("--out", type=Path, help=f"the preset file written (default DATA_DIR/{STUDY_DIR}/calibrated.toml); "
                   "the summary goes beside it as .json")
    p.add_argument("--sim-runs", type=int, default=DEFAULT_SIM_RUNS,
                   help=f"simulated runs per flow setting and trial (default {DEFAULT_SIM_RUNS})")
    for flag, unit in (("--rate-mbps", "Mbit/s"), ("--delay-ms", "ms"), ("--buffer-bytes", "bytes"), ("--loss", "")):
        p.add_argument(flag, metavar="LOW:HIGH", help=f"bounds of the search {unit} (default: from the data)".replace("  ", " "))
    p.add_argument("--delivery", choices=("constant", "poisson", "both"), default="both",
                   help="the five-parameter model's delivery kinds searched (default both)")
    p.add_argument("--model", default="both", metavar="five|trace|both",
                   help="the path model: five (the paper's rate, delay, buffer, loss, delivery), trace (a delivery "
                   "trace inferred from the runs' arrivals, each half second from the run that kept the bottleneck "
                   "busiest then, with delay, buffer, loss and a rate scale fitted over it), or both (default: each "
                   "searched with --trials trials; the trace kept when its replication error is lower by more than "
                   "half the noise floor; --confirm then confirms the kept model's best)")
    p.add_argument("--confirm", type=int, default=0, metavar="K",
                   help="run the K best candidates over the emulator with the real schemes (pantheon test local: "
                   "real time) and choose on the emulator's error (default 0: the simulator's best)")
    p.add_argument("--hold-out", metavar="SCHEME", help="leave-one-out: calibrate without this scheme's runs, then "
                   "predict them over the calibrated path (its replication error says how well the path generalises)")
    p.add_argument("--ablation", action="store_true", help="also calibrate with fewer parameters free (rate only, "
                   "+ delay, + buffer, + loss; the paper's Fig. 5), each with --trials trials")
    p.add_argument("--cross-traffic", metavar="SCHEMES", help="comma-separated schemes whose flows in the runs are "
                   "cross traffic: left out of the targets and the simulation (docs/calibration.md)")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    given = {name: space.parse_range(value, f"--{name.replace('_', '-')}")
             for name in BOUNDS if (value := getattr(args, name))}
    found = calibrate(
        args.data_dir, labels=[s for s in (args.schemes or "").split(",") if s],
        cross_traffic=[s for s in (args.cross_traffic or "").split(",") if s], trials=args.trials,
        minutes=args.minutes, seed=args.seed, scheduler=args.scheduler, out=args.out, sim_runs=args.sim_runs,
        bounds=given, deliveries=presets.DELIVERIES if args.delivery == "both" else (args.delivery,),
        confirm_best=args.confirm, hold_out=args.hold_out, ablate=args.ablation, quiet=args.quiet, model=args.model)
    if found.models:
        print("models (simulated):")
        print(table(found.models, left=(0, 3)))
    print(f"path: {found.candidate.describe()}")
    print(table(found.simulated))
    if found.emulated:
        title, emulated = found.emulated
        print(title + ":")
        print(table(emulated))
    if found.ablation_steps:
        print("ablation (paper Fig. 5): parameters free, replication error, path")
        for step in found.ablation_steps:
            print(f"  {step.name:<10} {step.error_pct:7.2f}%  {step.candidate.describe()}")
    if found.held_out:
        print(found.held_out)
    print(f"preset: {found.preset} (summary {found.summary}, report {found.page})")
    return 0


def table(found: list[tuple[str, ...]], left: tuple[int, ...] = (0,)) -> str:
    """Rows of text (calibration.rows) as columns, those in `left` aligned left, numbers right."""
    widths = [max(len(r[i]) for r in found) for i in range(len(found[0]))]
    return "\n".join("  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
                     for r in found)
