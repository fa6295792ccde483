"""The observatory's schedule: a TOML file declaring the experiments of a round and how often a round
starts (docs/observatory.md). An experiment is one scheme over one emulator preset with one flow
setting, run `runs` times: the cell of the matrix, as the QUIC interop runner's cells and as the
original Pantheon's per-path benchmarks were split (paper §3.2: single-flow runs and three staggered
flows, 30/20/10 s, i.e. started 10 s apart and ending together).

    period = "8h"            # a round starts every 8 hours; absent: one round (as --once)
    runtime_s = 30           # each run's length
    runs = 1                 # runs of each experiment
    stagger_s = 10           # seconds between flow starts where flows > 1

    [[matrix]]
    presets = ["nepal-wifi", "mexico-cellular"]   # or "all": Pantheon's 18 paths
    schemes = ["cubic", "copa"]                   # or "all": every scheme ready on this machine
    flows = [1, 3]                                # 1 flow; 3 staggered flows
    runs = 3                                      # optional: this matrix's own (cellular paths: 3)

Every mistake is a one-line ScheduleError naming the file and the key.
"""
from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pantheon import presets, schemes
from pantheon.errors import PantheonError

TOP_KEYS = {"period", "runtime_s", "runs", "stagger_s", "matrix"}
MATRIX_KEYS = {"presets", "schemes", "flows", "runs", "runtime_s"}
MAX_FLOWS = 16
"""Flows one experiment may start: more is not a setting Pantheon's analysis was built for."""
MAX_RUNTIME_S = 3600.0
PERIOD_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class ScheduleError(PantheonError):
    """A schedule that cannot be run; the message names the file and what to change."""


@dataclass(frozen=True)
class Experiment:
    """One cell of the matrix, run by one `pantheon test local`."""

    preset: str
    """The emulator preset's name (pantheon emulators) or a preset file's path."""
    scheme: str
    flows: int
    """Flows per run; more than one start `stagger_s` apart."""
    stagger_s: float
    """Seconds between flow starts (0 with one flow)."""
    runs: int
    runtime_s: float
    """Seconds each run lasts."""

    @property
    def id(self) -> str:
        """A name unique in its round, usable as a directory name."""
        preset = Path(self.preset).stem if presets.is_file(self.preset) else self.preset
        return f"{preset}.{self.scheme}.{self.flows}flow{'s' if self.flows > 1 else ''}"

    def arguments(self) -> list[str]:
        """`pantheon test local`'s options for this experiment (the data dir is the caller's)."""
        return ["--emulator", self.preset, "--schemes", self.scheme, "--runtime", f"{self.runtime_s:g}",
                "--run-times", str(self.runs), "--flows", str(self.flows), "--interval", f"{self.stagger_s:g}"]


@dataclass(frozen=True)
class Schedule:
    source: Path
    period_s: float | None
    """Seconds from one round's start to the next; None: one round."""
    experiments: tuple[Experiment, ...]


def _number(table: dict, key: str, where: str, default: float, low: float, high: float, integer: bool = False) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise ScheduleError(f"{where}: {key} must be {'an integer' if integer else 'a number'}, not {value!r}")
    if not math.isfinite(value) or not low <= value <= high:
        raise ScheduleError(f"{where}: {key} = {value!r} is out of range ({low:g} to {high:g})")
    return value


def parse_period(text: object, where: str) -> float:
    """"8h", "30m", "1d", "90s" in seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text) if isinstance(text, str) else None
    if not match:
        raise ScheduleError(f"{where}: period {text!r} is not a duration such as \"8h\", \"30m\", \"1d\"")
    seconds = float(match[1]) * PERIOD_UNITS_S[match[2]]
    if seconds < 60:
        raise ScheduleError(f"{where}: period {text!r} is shorter than a minute")
    return seconds


def _names(table: dict, key: str, where: str, known: list[str]) -> list[str]:
    value = table.get(key)
    if value == "all":
        return known
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ScheduleError(f"{where}: {key} must be \"all\" or a non-empty list of names")
    return value


def _ready_schemes() -> list[str]:
    registry = schemes.registry()
    return [name for name in registry.names() if name in registry.schemes and registry.problem(name) is None]


def parse(text: str, source: Path) -> Schedule:
    try:
        top = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScheduleError(f"{source}: not TOML ({e})") from None
    if unknown := sorted(set(top) - TOP_KEYS):
        raise ScheduleError(f"{source}: unknown key {unknown[0]!r} (known: {', '.join(sorted(TOP_KEYS))})")
    period_s = parse_period(top["period"], str(source)) if "period" in top else None
    runtime_s = _number(top, "runtime_s", str(source), 30.0, 1.0, MAX_RUNTIME_S)
    runs = int(_number(top, "runs", str(source), 1, 1, 100, integer=True))
    stagger_s = _number(top, "stagger_s", str(source), 10.0, 0.0, MAX_RUNTIME_S)
    matrices = top.get("matrix")
    if not isinstance(matrices, list) or not matrices:
        raise ScheduleError(f"{source}: no [[matrix]] table: declare at least one (presets, schemes, flows)")
    registry = schemes.registry()
    experiments: dict[str, Experiment] = {}
    for i, matrix in enumerate(matrices, 1):
        where = f"{source}: matrix {i}"
        if unknown := sorted(set(matrix) - MATRIX_KEYS):
            raise ScheduleError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(MATRIX_KEYS))})")
        preset_names = _names(matrix, "presets", where, list(presets.PRESETS))
        for name in preset_names:
            try:
                presets.lookup(name)
            except PantheonError as e:
                raise ScheduleError(f"{where}: {e}") from None
        scheme_names = _names(matrix, "schemes", where, _ready_schemes())
        for name in scheme_names:
            if name not in registry.schemes:
                raise ScheduleError(f"{where}: {name}: {registry.problem(name)}")
        flows = matrix.get("flows", [1])
        if not isinstance(flows, list) or not flows or not all(
                isinstance(f, int) and not isinstance(f, bool) and 1 <= f <= MAX_FLOWS for f in flows):
            raise ScheduleError(f"{where}: flows must be a list of flow counts from 1 to {MAX_FLOWS}, such as [1, 3]")
        matrix_runs = int(_number(matrix, "runs", where, runs, 1, 100, integer=True))
        matrix_runtime_s = _number(matrix, "runtime_s", where, runtime_s, 1.0, MAX_RUNTIME_S)
        for preset in preset_names:
            for flow_count in flows:
                if (flow_count - 1) * stagger_s >= matrix_runtime_s:
                    raise ScheduleError(f"{where}: {flow_count} flows {stagger_s:g} s apart do not all start "
                                        f"within runtime_s = {matrix_runtime_s:g}")
                for scheme in scheme_names:
                    experiment = Experiment(preset, scheme, flow_count, stagger_s if flow_count > 1 else 0.0,
                                            matrix_runs, matrix_runtime_s)
                    experiments.setdefault(experiment.id, experiment)
    return Schedule(source, period_s, tuple(experiments.values()))


def load(path: Path) -> Schedule:
    try:
        text = path.read_text()
    except OSError as e:
        raise ScheduleError(f"cannot read the schedule {path}: {e.strerror}") from None
    return parse(text, path)
