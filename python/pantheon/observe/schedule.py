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

    [[pair]]                                      # a real path between two hosts (remote mode)
    name = "lab-node2"                            # experiment ids start with it
    remote = "root@node2.example.org"             # `pantheon test remote`'s [USER@]HOST[:PANTHEON_DIR]
    local = "lab"                                 # the pair's local end: the worker with resource host:lab
    senders = ["local", "remote"]                 # which side sends; each direction its own experiments
    tunnel_server = "remote"                      # optional, as --tunnel-server (default remote)
    ssh_config = "/etc/pantheon/ssh_config"       # optional, as --ssh-config
    schemes = ["cubic"]                           # flows, runs and runtime_s as in a matrix

A pair's experiments run on the worker started with the resource `host:LOCAL` (and one unit of
`emulation`, the host's real-time slot), which is the host `pantheon test remote` runs from: Dask
pins them there (docs/observatory.md).

Every mistake is a one-line ScheduleError naming the file and the key.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from pantheon import files, presets, schemes
from pantheon.errors import PantheonError
from pantheon.toml_config import top_table

TOP_KEYS = {"period", "runtime_s", "runs", "stagger_s", "matrix", "pair"}
MATRIX_KEYS = {"presets", "schemes", "flows", "runs", "runtime_s"}
PAIR_KEYS = {"name", "remote", "local", "senders", "tunnel_server", "ssh_config", "schemes", "flows", "runs",
             "runtime_s"}
SIDES = ("local", "remote")
RESOURCE = "emulation"
"""The worker resource of one real-time experiment: a worker with `emulation=1` runs one at a time."""
HOST_RESOURCE = "host:"
"""Prefix of the worker resource naming a measurement host (host:lab), which a pair's experiments need."""
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
MAX_SCHEDULE_BYTES = 1 << 20
"""A schedule of many experiments is a few kB; a bigger file is not one (it is read whole)."""
MAX_FLOWS = 16
"""Flows one experiment may start: more is not a setting Pantheon's analysis was built for."""
MAX_RUNTIME_S = 3600.0
PERIOD_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class ScheduleError(PantheonError):
    """A schedule that cannot be run; the message names the file and what to change."""


@dataclass(frozen=True)
class Pair:
    """A real path between two hosts, measured by `pantheon test remote` from its local end."""

    name: str
    remote: str
    """`pantheon test remote`'s destination: [USER@]HOST[:PANTHEON_DIR]."""
    local: str
    """The local end's host name as the workers' resources give it (host:NAME)."""
    sender: str
    """Which side's scheme sends: "local" or "remote"."""
    tunnel_server: str
    """Which side's tunnel endpoint listens: "local" or "remote"."""
    ssh_config: str | None
    """An ssh configuration file for the control connection (ssh -F), or None."""


@dataclass(frozen=True)
class Experiment:
    """One cell of the matrix, run by one `pantheon test local` (or `test remote` for a pair)."""

    preset: str | None
    """The emulator preset's name (pantheon emulators) or a preset file's path; None for a pair."""
    scheme: str
    flows: int
    """Flows per run; more than one start `stagger_s` apart."""
    stagger_s: float
    """Seconds between flow starts (0 with one flow)."""
    runs: int
    runtime_s: float
    """Seconds each run lasts."""
    pair: Pair | None = None
    """The real path this experiment measures, or None for an emulated one."""

    @property
    def id(self) -> str:
        """A name unique in its round, usable as a directory name."""
        if self.pair is not None:
            path = f"{self.pair.name}.{self.pair.sender}-sends"
        else:
            assert self.preset is not None
            path = Path(self.preset).stem if presets.is_file(self.preset) else self.preset
        return f"{path}.{self.scheme}.{self.flows}flow{'s' if self.flows > 1 else ''}"

    def command(self) -> list[str]:
        """`pantheon`'s arguments for this experiment (the data dir is the caller's)."""
        campaign = ["--schemes", self.scheme, "--runtime", f"{self.runtime_s:g}", "--run-times", str(self.runs),
                    "--flows", str(self.flows), "--interval", f"{self.stagger_s:g}"]
        if self.pair is None:
            assert self.preset is not None
            return ["test", "local", "--emulator", self.preset, *campaign]
        pair = self.pair
        return ["test", "remote", pair.remote, "--sender", pair.sender, "--tunnel-server", pair.tunnel_server,
                *(["--ssh-config", pair.ssh_config] if pair.ssh_config else []), *campaign]

    def resources(self) -> dict[str, float]:
        """The Dask worker resources its task asks for: a real-time slot, on the pair's local end."""
        return {RESOURCE: 1} if self.pair is None else {RESOURCE: 1, HOST_RESOURCE + self.pair.local: 1}


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
    top = top_table(text, str(source), TOP_KEYS, ScheduleError)
    period_s = parse_period(top["period"], str(source)) if "period" in top else None
    runtime_s = _number(top, "runtime_s", str(source), 30.0, 1.0, MAX_RUNTIME_S)
    runs = int(_number(top, "runs", str(source), 1, 1, 100, integer=True))
    stagger_s = _number(top, "stagger_s", str(source), 10.0, 0.0, MAX_RUNTIME_S)
    matrices = top.get("matrix", [])
    pairs = top.get("pair", [])
    if not isinstance(matrices, list) or not isinstance(pairs, list) or not matrices + pairs:
        raise ScheduleError(f"{source}: no [[matrix]] or [[pair]] table: declare at least one (presets or a pair, "
                            "schemes, flows)")
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
        for preset in preset_names:
            for experiment in _cells(matrix, where, runs, runtime_s, stagger_s, preset, None):
                experiments.setdefault(experiment.id, experiment)
    for i, table in enumerate(pairs, 1):
        where = f"{source}: pair {i}"
        for pair in _pairs(table, where):
            for experiment in _cells(table, where, runs, runtime_s, stagger_s, None, pair):
                experiments.setdefault(experiment.id, experiment)
    return Schedule(source, period_s, tuple(experiments.values()))


def _cells(table: dict, where: str, runs: int, runtime_s: float, stagger_s: float, preset: str | None,
           pair: Pair | None) -> list[Experiment]:
    """The experiments of one path (a preset or a pair's direction): flows × schemes."""
    registry = schemes.registry()
    scheme_names = _names(table, "schemes", where, _ready_schemes())
    for name in scheme_names:
        if name not in registry.schemes:
            raise ScheduleError(f"{where}: {name}: {registry.problem(name)}")
    flows = table.get("flows", [1])
    if not isinstance(flows, list) or not flows or not all(
            isinstance(f, int) and not isinstance(f, bool) and 1 <= f <= MAX_FLOWS for f in flows):
        raise ScheduleError(f"{where}: flows must be a list of flow counts from 1 to {MAX_FLOWS}, such as [1, 3]")
    table_runs = int(_number(table, "runs", where, runs, 1, 100, integer=True))
    table_runtime_s = _number(table, "runtime_s", where, runtime_s, 1.0, MAX_RUNTIME_S)
    cells = []
    for flow_count in flows:
        if (flow_count - 1) * stagger_s >= table_runtime_s:
            raise ScheduleError(f"{where}: {flow_count} flows {stagger_s:g} s apart do not all start "
                                f"within runtime_s = {table_runtime_s:g}")
        cells += [Experiment(preset, scheme, flow_count, stagger_s if flow_count > 1 else 0.0, table_runs,
                             table_runtime_s, pair) for scheme in scheme_names]
    return cells


def _pairs(table: dict, where: str) -> list[Pair]:
    """A [[pair]] table's directions, each a Pair."""
    if unknown := sorted(set(table) - PAIR_KEYS):
        raise ScheduleError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(PAIR_KEYS))})")
    fields = {}
    for key in ("name", "local"):
        value = table.get(key)
        if not isinstance(value, str) or not NAME.match(value):
            raise ScheduleError(f"{where}: {key} must be a name of letters, digits, - and _ (up to 64), not {value!r}")
        fields[key] = value
    remote = table.get("remote")
    if not isinstance(remote, str) or not remote or remote.startswith("-") or any(c.isspace() for c in remote):
        raise ScheduleError(f"{where}: remote must be an ssh destination, [USER@]HOST[:PANTHEON_DIR], not {remote!r}")
    senders = table.get("senders", ["local"])
    if not isinstance(senders, list) or not senders or not set(senders) <= set(SIDES) or len(set(senders)) < len(senders):
        raise ScheduleError(f"{where}: senders must be a list of \"local\" and/or \"remote\", not {senders!r}")
    tunnel_server = table.get("tunnel_server", "remote")
    if tunnel_server not in SIDES:
        raise ScheduleError(f"{where}: tunnel_server must be \"local\" or \"remote\", not {tunnel_server!r}")
    ssh_config = table.get("ssh_config")
    if ssh_config is not None and (not isinstance(ssh_config, str) or not ssh_config):
        raise ScheduleError(f"{where}: ssh_config must be a file's path")
    return [Pair(fields["name"], remote, fields["local"], sender, tunnel_server, ssh_config) for sender in senders]


def load(path: Path) -> Schedule:
    try:
        text = files.read_small_text(path, MAX_SCHEDULE_BYTES)
    except OSError as e:
        raise ScheduleError(f"cannot read the schedule {path}: {e.strerror}") from None
    except ValueError as e:
        raise ScheduleError(f"{path} is not a schedule: {e}") from None
    return parse(text, path)
