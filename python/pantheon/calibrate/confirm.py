"""The emulator's confirmation (issue 17 §1): the best few candidates of the simulated search run
over the real emulator with the real schemes (`pantheon test local`: the kernel's cubic where the
simulator ran cubic-user), and the final choice is made on the emulator's replication error.

Why: the simulator leaves out what real time adds (docs/sim.md, "What differs from the emulator")
and runs twins for the schemes it cannot run; a candidate the simulator ranks first may not be the
emulator's best. Each candidate is written as a preset and run as the data was (its schemes, runs,
flows, interval and run length), into DATA_DIR/calibration/confirm-N/, and its targets are read as
the data's were (targets.py), so the two errors are computed alike.

Only data dirs of `--flows N --interval S` runs can be re-run (a scenario's mixed flows cannot be
asked of `pantheon test local` by scheme); the emulated runs take real time, the schemes' run time
times runs times candidates, and need root, as `pantheon test local` does.
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pantheon.calibrate import replication, space
from pantheon.calibrate.targets import CalibrationError, Target, read
from pantheon.harness import plan as plans


@dataclass(frozen=True)
class Confirmation:
    candidate: space.Candidate
    simulated_pct: float
    emulated: replication.Errors
    data_dir: Path
    figures: list[replication.Figures]
    """The emulated figures, aligned with the targets."""


def _groups(targets: list[Target]) -> dict[tuple[int, float, float], list[str]]:
    """(flows, interval, runtime) -> the labels run that way; a CalibrationError for a setting
    `pantheon test local --flows N --interval S` does not make."""
    groups: dict[tuple[int, float, float], list[str]] = {}
    for target in targets:
        flows = target.setting.flows
        interval = flows[1].start_s - flows[0].start_s if len(flows) > 1 else 0.0
        key = (len(flows), interval, target.setting.runtime_s)
        if plans.uniform(target.setting.label, *key) != target.setting:
            raise CalibrationError(f"--confirm re-runs --flows N --interval S runs only; {target.setting.label}'s are "
                                   "a scenario's")
        groups.setdefault(key, []).append(target.setting.label)
    return groups


def run(targets: list[Target], candidates: list[tuple[space.Candidate, float]], study_dir: Path,
        quiet: bool) -> list[Confirmation]:
    """Each (candidate, its simulated error) over the emulator; the confirmations, best first."""
    groups = _groups(targets)
    runs = max(max(t.run_numbers) for t in targets)
    real = [t.means() for t in targets]
    found = []
    for n, (candidate, simulated_pct) in enumerate(candidates, start=1):
        data_dir = study_dir / f"confirm-{n}"
        preset = data_dir.with_suffix(".toml")
        preset.write_text(candidate.preset(preset.stem).toml(f"Candidate {n} of the emulator's confirmation."))
        if not (data_dir / "metadata.json").exists():
            for flows, interval, runtime in groups:
                if not quiet:
                    print(f"pantheon calibrate: confirming candidate {n} over the emulator: {candidate.describe()}",
                          file=sys.stderr, flush=True)
                done = subprocess.run([sys.executable, "-m", "pantheon.cli", "test", "local",
                                       "--schemes", ",".join(groups[(flows, interval, runtime)]),
                                       "--run-times", str(runs), "--runtime", repr(runtime), "--flows", str(flows),
                                       "--interval", repr(interval), "--emulator", str(preset),
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
