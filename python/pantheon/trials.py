"""An experiment's trials and its data dir's metadata.json: what every driver of an experiment
(`test local`, `test remote`, `sim`) writes alike, so that one analysis reads them all.

Trial order (paper §3.2): the plans in the order given, or with `--random-order` a random
permutation of them (seeded by `--seed`), round-robin until each has run `--run-times` times.
Trial K of plan LABEL, repetition R, lives in `DATA_DIR/LABEL/runR/`; a run directory that already
exists is never overwritten.

metadata.json says what was asked and on what: the arguments, the path's options, the schemes and
their versions, the trials, the machine, and `head_start_s` (how long after a flow's first side
its second side started: the harness's head start, none in the simulator). It carries
`format_version`; the analysis (analysis/datadir.py) reads this version and every older one.
"""
from __future__ import annotations

import os
import platform
import random
import subprocess
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from pantheon import __version__, files
from pantheon.analysis.datadir import METADATA_FORMAT_VERSION
from pantheon.errors import PantheonError
from pantheon.plan import Plan
from pantheon.repository import ROOT
from pantheon.schemes import Scheme

SYSCTLS = [
    "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_available_congestion_control", "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem", "net.core.default_qdisc", "net.core.rmem_max", "net.core.wmem_max",
]
"""The host's settings that change what a kernel scheme does, recorded beside its results."""


class DataDirTaken(PantheonError):
    """A run's directory already exists: finished runs are never overwritten."""


@dataclass(frozen=True)
class Trial:
    number: int
    """1-based position in the campaign."""
    plan: Plan
    repetition: int
    """1-based: which run of this plan."""

    def run_dir(self, data_dir: Path) -> Path:
        return data_dir / self.plan.label / f"run{self.repetition}"

    def run_keys(self, seed: int) -> dict:
        """run.json's keys that the trial fixes, whoever ran it (`seed`: the run's own)."""
        return {"label": self.plan.label, "repetition": self.repetition, "runtime_s": self.plan.runtime_s, "seed": seed,
                "flows": [asdict(f) for f in self.plan.flows]}


def trial_order(plans: list[Plan], run_times: int, random_order: bool, seed: int) -> list[Trial]:
    order = list(plans)
    if random_order:
        random.Random(seed).shuffle(order)
    trials: list[Trial] = []
    for repetition in range(1, run_times + 1):
        for plan in order:
            trials.append(Trial(len(trials) + 1, plan, repetition))
    return trials


def refuse_taken(data_dir: Path, trials: list[Trial]) -> None:
    """DataDirTaken if any trial's run directory exists already."""
    if taken := [d for t in trials if (d := t.run_dir(data_dir)).exists()]:
        raise DataDirTaken(f"{taken[0]} already exists: pick a new --data-dir (finished runs are never overwritten)")


def git_commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--abbrev=40"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def _sysctl(name: str) -> str:
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return "unavailable"


def metadata(arguments: dict, emulator_options: list[str], schemes: list[Scheme], trials: list[Trial],
             skipped: dict[str, str], *, head_start_s: float) -> dict:
    return {
        "format_version": METADATA_FORMAT_VERSION,
        "pantheon_version": __version__,
        "git_commit": git_commit(),
        "start_time": datetime.now(UTC).isoformat(timespec="seconds"),
        "arguments": arguments,
        "emulator_options": emulator_options,
        "head_start_s": head_start_s,
        "schemes": {s.name: {"display": s.display, "description": s.description, "run_first": s.run_first,
                             "color": s.color, "versions": s.versions or f"pantheon {__version__}",
                             **({"kernel": platform.release()} if s.needs_kernel_cc else {})} for s in schemes},
        "skipped_schemes": skipped,
        "trials": [{"number": t.number, "label": t.plan.label, "repetition": t.repetition} for t in trials],
        "machine": machine(),
        "sysctls": sysctls(),
    }


def write_metadata(data_dir: Path, meta: dict) -> None:
    """metadata.json, atomically; a PantheonError in one line when it cannot be written."""
    try:
        files.write_atomic(data_dir / "metadata.json", files.json_text(meta))
    except OSError as e:
        raise PantheonError(f"cannot write {data_dir / 'metadata.json'}: {e.strerror or e}") from None


def machine() -> dict:
    return {"hostname": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(), "python": platform.python_version()}


def sysctls() -> dict[str, str]:
    return {name: _sysctl(name) for name in SYSCTLS}
