"""A calibration, from a data dir to a preset: the targets read, the stand-ins chosen, the search
run, the best candidates confirmed over the emulator where asked, a scheme held out or the
parameters ablated where asked; then the files written (the preset, its JSON summary, the figures
and the report page). `pantheon calibrate` (cli.py) turns its options into one call of `calibrate`
and prints the result.
"""
from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pantheon import files, presets, schemes
from pantheon.calibrate import ablation, confirm, evaluate, replication, search, space, standins, targets, trace
from pantheon.calibrate.targets import CalibrationError

STUDY_DIR = "calibration"
"""Where a calibration keeps its study and, by default, writes its files: DATA_DIR/calibration/."""
DEFAULT_TRIALS = 200
DEFAULT_SIM_RUNS = 3
MODELS = {"five": "five parameters", "trace": "inferred trace"}
"""The path models (`--model`): the paper's five parameters (space.py), and a delivery trace
inferred from the data with delay, buffer, loss and a rate scale fitted over it (trace.py)."""
MODEL_CHOICES = ("five", "trace", "both")
"""`both` (the default) searches each model with --trials trials and keeps the five parameters
unless the trace's replication error is lower by more than TRACE_MARGIN of the noise floor."""
TRACE_MARGIN = 0.5
"""How much of the noise floor the trace model must win by to be kept over the five parameters:
it takes its rate's course from the data, so on a path that five parameters describe it can still
come out ahead by the data's noise, and the paper's model, whose parameters a reader can check,
is then the one to keep. On a wired path made over the emulator (docs/calibration.md) the trace
was 0.86 points lower (2.47% against 3.33%) with a floor of 5.62%: five kept; on the T-Mobile trace
path 1.59 points lower with a floor of 2.34%: the trace kept."""


@dataclass(frozen=True)
class Calibration:
    """What a calibration found and where it wrote it."""
    candidate: space.Candidate
    """The calibrated path."""
    preset: Path
    summary: Path
    """The JSON summary, beside the preset."""
    page: Path
    """The report page (HTML, its figures embedded)."""
    simulated: list[tuple[str, ...]]
    """Per scheme (and flow), the real figures and the simulated ones over the path (`rows`)."""
    emulated: tuple[str, list[tuple[str, ...]]] | None
    """With confirmation: a title, and the real figures against the emulated ones."""
    ablation_steps: list[ablation.Step]
    """With ablation: the error with fewer parameters free, step by step, the full calibration last."""
    held_out: str | None
    """With a scheme held out: a line on how well the path predicts its runs."""
    models: list[tuple[str, ...]]
    """With both models: each model's best in the simulator (a header first), the one kept marked."""


def calibrate(data_dir: Path, *, labels: Sequence[str] = (), cross_traffic: Sequence[str] = (),
              trials: int = DEFAULT_TRIALS, minutes: float | None = None, seed: int = 0, scheduler: str | None = None,
              out: Path | None = None, sim_runs: int = DEFAULT_SIM_RUNS, bounds: Mapping[str, space.Range] | None = None,
              deliveries: tuple[str, ...] = presets.DELIVERIES, confirm_best: int = 0, hold_out: str | None = None,
              ablate: bool = False, quiet: bool = False, model: str = "both") -> Calibration:
    """Fits the emulator to `data_dir`'s runs of `labels` (default: every one the simulator can
    stand in for), `cross_traffic`'s flows left out, with `trials` trials (fewer after `minutes`)
    of `sim_runs` simulated runs each, searching `bounds` (rate_mbps, delay_ms, buffer_bytes, loss:
    the user's, the rest from the data) and `deliveries`; confirms the `confirm_best` best over the
    emulator; predicts `hold_out`'s runs with the path fitted without them; ablates when `ablate`.
    `model`: five, trace or both (MODEL_CHOICES; each model searched with `trials` trials).
    Writes the preset to `out` (default DATA_DIR/calibration/calibrated.toml), its summary (.json)
    and report (.html, .png) beside it."""
    if model not in MODEL_CHOICES:
        raise CalibrationError(f"--model must be one of {', '.join(MODEL_CHOICES)}, got '{model}'")
    if trials < 1 or sim_runs < 1 or confirm_best < 0:
        raise CalibrationError("--trials and --sim-runs must be at least 1, --confirm at least 0")
    if minutes is not None and not (math.isfinite(minutes) and minutes > 0):
        raise CalibrationError(f"--minutes must be positive and finite, got {minutes:g}")
    if not 0 <= seed < 2**32:
        raise CalibrationError(f"--seed must be from 0 to {2**32 - 1} (the sampler's seed), got {seed}")
    data = targets.read(data_dir, list(labels) or None, tuple(cross_traffic))
    study_dir = data_dir / STUDY_DIR
    out = out or study_dir / "calibrated.toml"
    # Before the search, not after it: its minutes must not end in a file that cannot be written.
    files.writable_dir(study_dir, "the study's directory")
    files.writable_dir(out.parent, "--out's directory")
    if out.is_dir():
        raise CalibrationError(f"--out {out} is a directory: give the preset file's name, e.g. {out / 'calibrated.toml'}")
    for run_name, why in data.left_out.items():
        print(f"pantheon calibrate: leaving out {run_name}: {why}", file=sys.stderr)
    found = _stand_ins(data, bool(labels), quiet)
    held = [t for t in data.targets if t.setting.label == hold_out]
    if hold_out and not held:
        raise CalibrationError(f"--hold-out {hold_out}: no valid runs of it to hold out")
    kept = [t for t in data.targets if t not in held]
    if len({t.setting.label for t in kept}) < 2:
        raise CalibrationError(f"--hold-out {hold_out} leaves fewer than two schemes to calibrate on")
    searched = space.bounds(data.observed, **(bounds or {}), deliveries=deliveries)
    problem = search.Problem(kept, {s: i.cc for s, i in found.items()}, searched, sim_runs)
    problems = {"five": problem} if model != "trace" else {}
    inferred = None
    if model != "five":
        # From the runs fitted only: a held-out scheme's runs must not shape the path that predicts them.
        inferred = trace.infer(data_dir, kept)
        problems["trace"] = replace(problem, bounds=replace(searched, deliveries=(space.TRACE,)), trace=inferred)
    floor = replication.noise_floor(problem.targets)
    if not quiet:
        print(f"pantheon calibrate: {len(problem.targets)} settings of {len({t.setting.label for t in problem.targets})} "
              f"schemes; search " + "; ".join(f"{MODELS[m]}: {p.bounds.describe()}" for m, p in problems.items())
              + (f"; trace from {inferred.source} ({inferred.mean_mbps:.3g} Mbit/s, busy {100 * inferred.busy_share:.0f}%)"
                 if inferred else ""), file=sys.stderr)
    share = None if minutes is None else minutes / len(problems)
    searched_phases = {m: search.calibrate(p, study_dir / "study.db", seed, trials, share, scheduler,
                                           search.Progress(quiet, trials, share, MODELS[m] if len(problems) > 1 else ""))
                       for m, p in problems.items()}
    phases = [phase for found_phases in searched_phases.values() for phase in found_phases]
    best_of = {m: search.best(found_phases) for m, found_phases in searched_phases.items()}
    kept_model = _kept(best_of, floor)
    ranked = search.top(searched_phases[kept_model], max(1, confirm_best))
    confirmations = []
    if confirm_best:
        confirmations = confirm.run(problem.targets, [(c, t.value) for t, c, _ in ranked], study_dir, quiet)
    chosen = confirmations[0].candidate if confirmations else ranked[0][1]
    best, candidate, best_study = next(r for r in ranked if r[1] == chosen)
    figures = [(dict(t), dict(d)) for t, d in best.user_attrs["figures"]]
    errors = replication.Errors(best.value, best.user_attrs["per_scheme_pct"])
    preset = candidate.preset(out.stem, f"Calibrated by pantheon calibrate on {data_dir.resolve()}")
    out.write_text(preset.toml(
        f"Calibrated emulator: {candidate.describe()}.\nReplication error {errors.overall_pct:.2f}% in the simulator"
        + (f", {confirmations[0].emulated.overall_pct:.2f}% over the emulator" if confirmations else "") + " "
        f"(noise floor {_num(floor.overall_pct if floor else None)}%), trial {best.number} of study {best_study}.\n"
        f"Use it with: pantheon test local --emulator {out} (or pantheon sim --emulator {out})."))
    held_out: dict[str, object] | None = None
    held_line = None
    if held:
        predicted = evaluate.simulate([t.setting for t in held], candidate, problem.cc, problem.sim_runs)
        if predicted.error:
            raise CalibrationError(f"--hold-out {hold_out}: the simulator refused the calibrated path: {predicted.error}")
        real = [t.means() for t in held]
        held_errors = replication.errors(held, real, predicted.figures)
        held_out = {"scheme": hold_out, "error_pct": held_errors.overall_pct, "real": real, "predicted": predicted.figures}
        (real_t, real_d), (sim_t, sim_d) = real[0], predicted.figures[0]
        held_line = (f"held out {hold_out}: replication error {held_errors.overall_pct:.2f}% (real "
                     f"{_num(real_t.get('1'))} Mbit/s, {_num(real_d.get('1'))} ms; predicted {_num(sim_t.get('1'))} "
                     f"Mbit/s, {_num(sim_d.get('1'))} ms)")
    model_rows: list[tuple[str, ...]] = []
    if len(best_of) > 1:
        model_rows = [("model", "error %", "kept", "path")]
        model_rows += [(MODELS[m], _num(t.value), "kept" if m == kept_model else "", c.describe())
                       for m, (t, c, _) in best_of.items()]
    steps = []
    if ablate:
        five_trial, five_candidate, _ = best_of["five"] if "five" in best_of else search.best(
            search.calibrate(problem, study_dir / "study.db", seed, trials, None, scheduler,
                             search.Progress(quiet, trials, None)))
        steps = [*ablation.run(problem, study_dir / "study.db", seed, trials, scheduler, quiet),
                 ablation.Step("+ Poisson", five_candidate, five_trial.value)]
        if "trace" in best_of:
            steps.append(ablation.Step("trace", best_of["trace"][1], best_of["trace"][0].value))
    summary = {
        "data_dir": str(data_dir.resolve()), "preset": str(out), "study": str(study_dir / "study.db"),
        "studies": [p.study.study_name for p in phases], "best_study": best_study, "best_trial": best.number,
        "complete_trials": sum(t.value is not None for p in phases for t in p.study.get_trials(deepcopy=False)),
        "path": candidate.params(), "model": kept_model, "emulator_options": preset.options(out.parent),
        "models": {m: {"replication_error_pct": t.value, "per_scheme_pct": t.user_attrs["per_scheme_pct"],
                       "path": c.params(), "study": study, "trial": t.number} for m, (t, c, study) in best_of.items()},
        "trace": inferred.summary() if inferred else None,
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
             ("Model", MODELS[kept_model] + (f" (of both: the trace is kept when its simulated error is lower by "
                                             f"more than {TRACE_MARGIN:g} of the noise floor)" if len(best_of) > 1 else "")),
             ("Search", f"{summary['complete_trials']} trials; best: trial {best.number} of {best_study}"),
             ("Stand-ins", ", ".join(f"{s} as {i.scheme}" for s, i in found.items() if i.scheme != s) or "none"),
             ("Bounds", problem.bounds.describe()),
             ("Use", f"pantheon test local --emulator {out}; pantheon sim --emulator {out}")]
    page = report.write_page(report.Page(
        data_dir.resolve(), facts, replication_pngs,
        [("Simulated over the calibrated path", simulated)] + ([(emulated_line, emulated)] if emulated else []),
        convergence, (ablation_rows, ablation_png) if ablation_png else None, held_line, model_rows), out.with_suffix(".html"))
    return Calibration(candidate, out, out.with_suffix(".json"), page, simulated,
                       (emulated_line, emulated) if emulated else None, steps, held_line, model_rows)


def _kept(best_of: dict[str, tuple], floor: replication.Errors | None) -> str:
    """The model kept of those searched (each with its best trial first): the five parameters
    unless the trace's simulated error is lower by more than TRACE_MARGIN of the noise floor (any
    lower, without a floor)."""
    if len(best_of) == 1:
        return next(iter(best_of))
    margin = TRACE_MARGIN * floor.overall_pct if floor else 0.0
    return "trace" if best_of["trace"][0].value < best_of["five"][0].value - margin else "five"


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


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
