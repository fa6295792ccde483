"""`pantheon calibrate DATA_DIR`: fits the five-parameter emulator to a data dir's results and
writes it as a preset file that `pantheon test local --emulator FILE` and `pantheon sim --emulator
FILE` take (docs/calibration.md).

Writes, by default under DATA_DIR/calibration/:
    study.db          the Optuna study (SQLite); the same command again resumes it
    calibrated.toml   the best candidate as a preset (--out FILE puts it elsewhere)
    calibrated.json   the summary: the path, the errors overall and per scheme with the noise
                      floor, each scheme's real and simulated figures, the stand-ins, the bounds
    calibrated.png, calibrated.convergence.png   the paper's Fig. 3 and the search's convergence
                      (and .emulated.png with --confirm, .ablation.png with --ablation)
    calibrated.html   the report page: the path, those figures, the per-scheme tables
and prints the per-scheme table on stdout.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from pantheon import presets, schemes
from pantheon.calibrate import ablation, confirm, evaluate, replication, search, space, standins, targets
from pantheon.calibrate.targets import CalibrationError

STUDY_DIR = "calibration"
DEFAULT_TRIALS = 200
DEFAULT_SIM_RUNS = 3


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate", help="fit an emulator preset to a data dir's results (pantheon calibrate --help)",
        description="Fit the five emulator parameters (rate, delay, DropTail buffer, loss, constant or Poisson "
        "delivery) so that the simulator replicates each scheme's mean throughput and p95 one-way delay in DATA_DIR; "
        "write the result as a preset file for --emulator (docs/calibration.md).")
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
                   help="delivery kinds searched (default both)")
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


def _stand_ins(data: targets.Data, asked: bool, quiet: bool) -> dict[str, standins.StandIn]:
    """Each scheme's simulated controller; a scheme without one is an error when asked for by
    name, and its settings are left out (with a line) otherwise. Which twin stands in for which
    scheme is said unless `quiet`."""
    known = schemes.registry()
    found: dict[str, standins.StandIn] = {}
    for scheme in dict.fromkeys(f.scheme for t in data.targets for f in t.setting.flows):
        stand_in = standins.stand_in(known, scheme)
        if isinstance(stand_in, str):
            if asked:
                raise CalibrationError(stand_in)
            print(f"pantheon calibrate: leaving out {scheme}: {stand_in}", file=sys.stderr)
            continue
        found[scheme] = stand_in
        if stand_in.scheme != scheme and not quiet:
            print(f"pantheon calibrate: {scheme} is simulated as its userspace twin {stand_in.scheme}", file=sys.stderr)
    data.targets = [t for t in data.targets if all(f.scheme in found for f in t.setting.flows)]
    if len({t.setting.label for t in data.targets}) < 2:
        raise CalibrationError(f"{data.path}: fewer than two schemes left that the simulator can stand in for")
    return found


def _bounds(args: argparse.Namespace, observed: targets.Observed) -> space.Bounds:
    given = {name: space.parse_range(value, f"--{name.replace('_', '-')}")
             for name in ("rate_mbps", "delay_ms", "buffer_bytes", "loss") if (value := getattr(args, name))}
    deliveries = presets.DELIVERIES if args.delivery == "both" else (args.delivery,)
    return space.bounds(observed, **given, deliveries=deliveries)


def _label(target: targets.Target, flow: str) -> str:
    name = target.setting.label
    if len(target.setting.flows) > 1:
        name += f" flow {flow} ({target.setting.flows[int(flow) - 1].scheme})"
    return name


def rows(problem: search.Problem, figures: list[replication.Figures], errors: replication.Errors,
         floor: replication.Errors | None, side: str = "sim") -> list[tuple[str, ...]]:
    """Per scheme (and flow): real and `side`'s (simulated or emulated) figures, the error and the
    noise floor; a header first and the means last."""
    found: list[tuple[str, ...]] = [("scheme", "runs", "real Mbit/s", f"{side} Mbit/s", "real p95 ms", f"{side} p95 ms", "error %", "floor %")]
    for target, (real_t, real_d), (sim_t, sim_d) in zip(problem.targets, problem.real, figures):
        label = target.setting.label
        for flow, throughput in real_t.items():
            found.append((_label(target, flow), str(len(target.runs)), _num(throughput), _num(sim_t.get(flow)),
                          _num(real_d.get(flow)), _num(sim_d.get(flow)), _num(errors.per_scheme_pct.get(label)),
                          _num(floor.per_scheme_pct.get(label) if floor else None)))
    found.append(("mean", "", "", "", "", "", _num(errors.overall_pct), _num(floor.overall_pct if floor else None)))
    return found


def table(found: list[tuple[str, ...]]) -> str:
    """`rows` as text columns."""
    widths = [max(len(r[i]) for r in found) for i in range(len(found[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in found)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def run(args: argparse.Namespace) -> int:
    if args.trials < 1 or args.sim_runs < 1 or args.confirm < 0:
        raise CalibrationError("--trials and --sim-runs must be at least 1, --confirm at least 0")
    if args.minutes is not None and not (math.isfinite(args.minutes) and args.minutes > 0):
        raise CalibrationError(f"--minutes must be positive and finite, got {args.minutes:g}")
    asked = [s for s in (args.schemes or "").split(",") if s]
    cross = tuple(s for s in (args.cross_traffic or "").split(",") if s)
    data = targets.read(args.data_dir, asked or None, cross)
    for run_name, why in data.left_out.items():
        print(f"pantheon calibrate: leaving out {run_name}: {why}", file=sys.stderr)
    found = _stand_ins(data, bool(asked), args.quiet)
    held = [t for t in data.targets if t.setting.label == args.hold_out]
    if args.hold_out and not held:
        raise CalibrationError(f"--hold-out {args.hold_out}: no valid runs of it to hold out")
    kept = [t for t in data.targets if t not in held]
    if len({t.setting.label for t in kept}) < 2:
        raise CalibrationError(f"--hold-out {args.hold_out} leaves fewer than two schemes to calibrate on")
    problem = search.Problem(kept, {s: i.cc for s, i in found.items()}, _bounds(args, data.observed), args.sim_runs)
    floor = replication.noise_floor(problem.targets)
    if not args.quiet:
        print(f"pantheon calibrate: {len(problem.targets)} settings of {len({t.setting.label for t in problem.targets})} "
              f"schemes; search {problem.bounds.describe()}", file=sys.stderr)
    study_dir = args.data_dir / STUDY_DIR
    progress = search.Progress(args.quiet, args.trials, args.minutes)
    phases = search.calibrate(problem, study_dir / "study.db", args.seed, args.trials, args.minutes, args.scheduler,
                              progress)
    ranked = search.top(phases, max(1, args.confirm))
    confirmations = []
    if args.confirm:
        confirmations = confirm.run(problem.targets, [(c, t.value) for t, c, _ in ranked], study_dir, args.quiet)
    chosen = confirmations[0].candidate if confirmations else ranked[0][1]
    best, candidate, best_study = next(r for r in ranked if r[1] == chosen)
    figures = [(dict(t), dict(d)) for t, d in best.user_attrs["figures"]]
    errors = replication.Errors(best.value, best.user_attrs["per_scheme_pct"])
    out = args.out or study_dir / "calibrated.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    preset = candidate.preset(out.stem, f"Calibrated by pantheon calibrate on {args.data_dir.resolve()}")
    out.write_text(preset.toml(
        f"Calibrated emulator: {candidate.describe()}.\nReplication error {errors.overall_pct:.2f}% in the simulator"
        + (f", {confirmations[0].emulated.overall_pct:.2f}% over the emulator" if confirmations else "") + " "
        f"(noise floor {_num(floor.overall_pct if floor else None)}%), trial {best.number} of study {best_study}.\n"
        f"Use it with: pantheon test local --emulator {out} (or pantheon sim --emulator {out})."))
    held_out = None
    if held:
        predicted = evaluate.simulate([t.setting for t in held], candidate, problem.cc, problem.sim_runs)
        if predicted.error:
            raise CalibrationError(f"--hold-out {args.hold_out}: the simulator refused the calibrated path: {predicted.error}")
        held_errors = replication.errors(held, [t.means() for t in held], predicted.figures)
        held_out = {"scheme": args.hold_out, "error_pct": held_errors.overall_pct,
                    "real": [t.means() for t in held], "predicted": predicted.figures}
    steps = []
    if args.ablation:
        steps = [*ablation.run(problem, study_dir / "study.db", args.seed, args.trials, args.scheduler, args.quiet),
                 ablation.Step("+ Poisson", candidate, errors.overall_pct)]
    summary = {
        "data_dir": str(args.data_dir.resolve()), "preset": str(out), "study": str(study_dir / "study.db"),
        "studies": [p.study.study_name for p in phases], "best_study": best_study, "best_trial": best.number,
        "complete_trials": sum(t.value is not None for p in phases for t in p.study.get_trials(deepcopy=False)),
        "path": candidate.params(), "emulator_options": preset.options(Path("/nonexistent")),
        "replication_error_pct": errors.overall_pct, "per_scheme_pct": errors.per_scheme_pct,
        "noise_floor_pct": floor.overall_pct if floor else None,
        "noise_floor_per_scheme_pct": floor.per_scheme_pct if floor else None,
        "stand_ins": {s: {"scheme": i.scheme, "cc": i.cc} for s, i in found.items()},
        "bounds": {k: str(v) if isinstance(v, space.Range) else list(v) for k, v in vars(problem.bounds).items()},
        "sim_runs": problem.sim_runs, "held_out": held_out,
        "ablation": [{"parameters": step.name, "error_pct": step.error_pct, "path": step.candidate.params()}
                     for step in steps],
        "confirmation": [{"path": c.candidate.params(), "simulated_error_pct": c.simulated_pct,
                          "emulated_error_pct": c.emulated.overall_pct, "emulated_per_scheme_pct": c.emulated.per_scheme_pct,
                          "data_dir": str(c.data_dir)} for c in confirmations],
        "settings": [{"label": t.setting.label, "runtime_s": t.setting.runtime_s, "runs": t.run_numbers,
                      "flows": [vars(f) for f in t.setting.flows], "real": {"throughput_mbps": r[0], "delay_p95_ms": r[1]},
                      "simulated": {"throughput_mbps": f[0], "delay_p95_ms": f[1]}}
                     for t, r, f in zip(problem.targets, problem.real, figures)],
    }
    out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
    floor_pct = floor.overall_pct if floor else None
    simulated = rows(problem, figures, errors, floor)
    emulated = rows(problem, confirmations[0].figures, confirmations[0].emulated, floor, "emu") if confirmations else None
    ablation_rows: list[tuple[str, ...]] = [("parameters free", "replication error %", "path")]
    ablation_rows += [(step.name, _num(step.error_pct), step.candidate.describe()) for step in steps]
    held_line = None
    if held_out:
        (real_t, real_d), (sim_t, sim_d) = held_out["real"][0], held_out["predicted"][0]
        held_line = (f"held out {args.hold_out}: replication error {held_out['error_pct']:.2f}% (real "
                     f"{_num(real_t.get('1'))} Mbit/s, {_num(real_d.get('1'))} ms; predicted {_num(sim_t.get('1'))} "
                     f"Mbit/s, {_num(sim_d.get('1'))} ms)")
    emulated_line = (f"Over the emulator (chosen of {len(confirmations)} candidates; "
                     + ", ".join(f"{c.emulated.overall_pct:.2f}%" for c in confirmations) + ")")
    from pantheon.calibrate import report  # matplotlib, imported where drawn (see analysis/analyze.py)
    replication_pngs = [("Simulated over the calibrated path",
                         report.replication_figure(problem.targets, problem.real, figures, errors, out.with_suffix(".png")))]
    if confirmations:
        replication_pngs.append((emulated_line,
                                 report.replication_figure(problem.targets, problem.real, confirmations[0].figures,
                                                           confirmations[0].emulated, out.with_name(f"{out.stem}.emulated.png"),
                                                           "emulated")))
    convergence = report.convergence_figure(phases, floor_pct, out.with_name(f"{out.stem}.convergence.png"))
    ablation_png = None
    if steps:
        ablation_png = report.ablation_figure([(s.name, s.error_pct) for s in steps], floor_pct,
                                              out.with_name(f"{out.stem}.ablation.png"))
    facts = [("Path", candidate.describe()), ("Preset", str(out)),
             ("Replication error", f"{errors.overall_pct:.2f}% in the simulator"
              + (f", {confirmations[0].emulated.overall_pct:.2f}% over the emulator" if confirmations else "")),
             ("Noise floor", f"{_num(floor_pct)}% (run halves against each other)"),
             ("Search", f"{summary['complete_trials']} trials; best: trial {best.number} of {best_study}"),
             ("Stand-ins", ", ".join(f"{s} as {i.scheme}" for s, i in found.items() if i.scheme != s) or "none"),
             ("Bounds", problem.bounds.describe()),
             ("Use", f"pantheon test local --emulator {out}; pantheon sim --emulator {out}")]
    page = report.write_page(report.Page(
        args.data_dir.resolve(), facts, replication_pngs,
        [("Simulated over the calibrated path", simulated)] + ([(emulated_line, emulated)] if emulated else []),
        convergence, (ablation_rows, ablation_png) if ablation_png else None, held_line), out.with_suffix(".html"))
    print(f"path: {candidate.describe()}")
    print(table(simulated))
    if emulated:
        print(emulated_line + ":")
        print(table(emulated))
    if steps:
        print("ablation (paper Fig. 5): parameters free, replication error, path")
        for step in steps:
            print(f"  {step.name:<10} {step.error_pct:7.2f}%  {step.candidate.describe()}")
    if held_line:
        print(held_line)
    print(f"preset: {out} (summary {out.with_suffix('.json')}, report {page})")
    return 0
