"""The emulator's confirmation (issue 17 §1): the best few candidates of the simulated search run
over the real emulator with the real schemes (`pantheon test local`: the kernel's cubic where the
simulator ran cubic-user), and the final choice is made on the emulator's replication error.

Why: the simulator leaves out what real time adds (docs/sim.md, "What differs from the emulator")
and runs twins for the schemes it cannot run; a candidate the simulator ranks first may not be the
emulator's best. Each candidate is written as a preset and run as the data was (its schemes, runs,
flows, interval and run length), into DATA_DIR/calibration/confirm-N/, and its targets are read as
the data's were (targets.py), so the two errors are computed alike.

Settings of `--flows N --interval S` runs are re-run so, grouped by flows, interval and run length;
any other (a scenario's, or one whose cross traffic calibration left out: targets.py) is re-run as
a scenario file of the setting's own flows, so the candidate path, not the cross traffic, is what
the measured flows meet. The emulated runs take real time, the schemes' run time times runs times
candidates, and need network namespaces, as `pantheon test local` does.
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pantheon import plan as plans
from pantheon.calibrate import replication, space
from pantheon.calibrate.targets import CalibrationError, Target, read


@dataclass(frozen=True)
class Confirmation:
    candidate: space.Candidate
    simulated_pct: float
    emulated: replication.Errors
    data_dir: Path
    figures: list[replication.Figures]
    """The emulated figures, aligned with the targets."""


def _uniform(setting: plans.Plan, key: tuple[int, float, float]) -> bool:
    """Whether `pantheon test local --flows N --interval S --runtime T` makes `setting`."""
    try:
        return plans.uniform(setting.label, *key) == setting
    except plans.PlanError:  # flows no --interval spaces so (uneven, or out of order)
        return False


def _batches(targets: list[Target], scenarios: Path) -> list[list[str]]:
    """`pantheon test local` options that re-run the targets' settings: one batch per (flows,
    interval, run length) of `--flows N --interval S` settings, one scenario file (written under
    `scenarios`) per other setting."""
    groups: dict[tuple[int, float, float], list[str]] = {}
    batches: list[list[str]] = []
    for target in targets:
        setting = target.setting
        interval = setting.flows[1].start_s - setting.flows[0].start_s if len(setting.flows) > 1 else 0.0
        key = (len(setting.flows), interval, setting.runtime_s)
        if _uniform(setting, key):
            groups.setdefault(key, []).append(setting.label)
            continue
        scenarios.mkdir(parents=True, exist_ok=True)
        scenario = scenarios / f"{len(batches) + 1}.toml"
        scenario.write_text(f"name = {json.dumps(setting.label)}\nruntime_s = {setting.runtime_s!r}\n" + "".join(
            f"[[flow]]\nscheme = {json.dumps(f.scheme)}\nstart_s = {f.start_s!r}\nduration_s = {f.duration_s!r}\n"
            for f in setting.flows))
        batches.append(["--scenario", str(scenario)])
    return [["--schemes", ",".join(labels), "--runtime", repr(runtime), "--flows", str(flows), "--interval", repr(interval)]
            for (flows, interval, runtime), labels in groups.items()] + batches


def run(targets: list[Target], candidates: list[tuple[space.Candidate, float]], study_dir: Path,
        quiet: bool) -> list[Confirmation]:
    """Each (candidate, its simulated error) over the emulator; the confirmations, best first."""
    runs = max(max(t.run_numbers) for t in targets)
    real = [t.means() for t in targets]
    found = []
    for n, (candidate, simulated_pct) in enumerate(candidates, start=1):
        data_dir = study_dir / f"confirm-{n}"
        preset = data_dir.with_suffix(".toml")
        preset.write_text(candidate.preset(preset.stem).toml(f"Candidate {n} of the emulator's confirmation."))
        if not (data_dir / "metadata.json").exists():
            if not quiet:
                print(f"pantheon calibrate: confirming candidate {n} over the emulator: {candidate.describe()}",
                      file=sys.stderr, flush=True)
            for batch in _batches(targets, study_dir / f"confirm-{n}.scenarios"):
                done = subprocess.run([sys.executable, "-m", "pantheon.cli", "test", "local", *batch,
                                       "--run-times", str(runs), "--emulator", str(preset),
                                       "--data-dir", str(data_dir), "--no-analyze", "--quiet"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                if done.returncode not in (0, 1):
                    why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"status {done.returncode}"
                    raise CalibrationError(f"--confirm: pantheon test local failed: {why}")
        emulated = read(data_dir)
        by_plan = {t.setting: t.means() for t in emulated.targets}
        figures = [by_plan.get(t.setting, ({}, {})) for t in targets]
        found.append(Confirmation(candidate, simulated_pct, replication.errors(targets, real, figures), data_dir, figures))
    return sorted(found, key=lambda c: c.emulated.overall_pct)
