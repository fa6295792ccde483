"""A league's matrix: the environments every scheme is run in, declared in TOML (docs/league.md).

    name = "ccbench-single"
    description = "one line"
    duration_s = 30.0               # every run's length
    seeds = 1                       # seeds 0..N-1, or a list of seeds
    window_s = 5.0                  # optional: the league's time windows (default: the whole run)

    [[grid]]                        # one cross product; the matrix is the union of its grids
    rate_mbps = [12, 24, 48]        # the bottleneck's rate (the acknowledgements' link runs at it too)
    rtt_ms = [10, 40, 160]          # the base round trip: half of it is each direction's delay
    buffer_bdp = [0.5, 2, 16]       # the buffer, in bandwidth-delay products (rate × rtt) ...
    # buffer_bytes = [15000]        # ... or in bytes; either may hold "infinite"
    queue = ["droptail", "codel"]   # the discipline (an AQM takes the buffer as its limit)
    loss = [0.0, 0.01]              # i.i.d. loss of the data direction
    step_factor = [0.5, 2]          # optional: the rate becomes rate × factor at step_at_s ...
    step_at_s = 15.0                # ... (default: half the run)
    flows = ["single", "pair", "staggered", "vs:cubic-user"]

    [[grid]]
    preset = ["tmobile-lte"]        # an emulator preset as it is (pantheon emulators: traces, calibrated paths)
    flows = ["single"]

    [[grid]]
    topology = ["parking-lot"]      # a topology (data/topologies/NAME.toml, or a file NAME.toml beside the matrix)
    flows = ["all", "vs:cubic-user"]

Flows: `single`, one flow of the scheme for the whole run; `pair`, two of it from the start;
`workload:SIZES@LOAD`, the scheme carrying Poisson transfers offering LOAD of the link (workloads.py);
`staggered`, two of it, the second joining at `stagger_at_s` (default half the run); `vs:NAME`, one
of the scheme and one of the simulable scheme NAME from the start (the league runs NAME too, for
the harm baseline). In a topology, a flow per route: `all`, every one the scheme's; `vs:NAME`, the
first route's the scheme's and the others NAME's.

Every mistake is one line naming the file and the key (MatrixError, exit 2), before anything runs.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path

from pantheon import files, presets, queues
from pantheon import topology as topologies
from pantheon.errors import PantheonError
from pantheon.league import workloads
from pantheon.toml_config import top_table

MAX_MATRIX_BYTES = 1 << 20
TOP_KEYS = {"name", "description", "duration_s", "seeds", "window_s", "grid", "stagger_at_s"}
RATE_KEYS = {"rate_mbps", "rtt_ms", "buffer_bdp", "buffer_bytes", "queue", "loss", "step_factor", "step_at_s"}
GRID_KEYS = RATE_KEYS | {"preset", "topology", "flows"}
FLOW_KINDS = ("single", "pair", "staggered")
TOPOLOGY_FLOWS = ("all",)
VERSUS = "vs:"
MAX_RATE_MBPS = 10_000.0
MAX_RTT_MS = 10_000.0
MAX_DURATION_S = 3_600.0
MAX_SEEDS = 1_000
MAX_ENVIRONMENTS = 100_000
PACKET_BYTES = 1500
"""The link's unit (an IP packet at the tunnel's MTU): the least buffer that holds one."""
INFINITE = "infinite"


class MatrixError(PantheonError):
    """A matrix file that cannot be run: one line naming the file and the key."""


@dataclass(frozen=True)
class Environment:
    """One cell of the matrix: a path and the flows that share it (the scheme's, and a competitor's)."""
    flows: str
    """single, pair, staggered or vs:NAME."""
    rate_mbps: float | None = None
    """The link's rate before any step; None for a preset's path."""
    rtt_ms: float | None = None
    buffer_bdp: float | None = None
    buffer_bytes: int | None = None
    """The queue's limit; both None: infinite (or the preset's own)."""
    queue: str = "droptail"
    loss: float = 0.0
    step_factor: float | None = None
    step_at_s: float | None = None
    preset: str | None = None
    topology: str | None = None
    """A shipped topology's name, or a topology file's path (pantheon.topology); None: one link."""

    @property
    def name(self) -> str:
        """A stable, readable key of the cell: `12mbps-40ms-2bdp-droptail-single`."""
        if self.preset:
            parts = [f"preset-{self.preset}"]
        elif self.topology:
            parts = [f"topology-{Path(self.topology).stem}"]
        else:
            queue = [self.queue] if self.queue == INFINITE else [self.buffer_words(), self.queue]
            parts = [f"{self.rate_mbps:g}mbps", f"{self.rtt_ms:g}ms", *queue]
            if self.loss:
                parts.append(f"loss{self.loss:g}")
            if self.step_factor is not None:
                parts.append(f"step{self.step_factor:g}x@{self.step_at_s:g}s")
        return "-".join([*parts, self.flows.replace(":", "-")])

    def buffer_words(self) -> str:
        if self.buffer_bdp is not None:
            return f"{self.buffer_bdp:g}bdp"
        return f"{self.buffer_bytes}b" if self.buffer_bytes is not None else INFINITE

    def limit_bytes(self) -> int | None:
        """The queue's limit in bytes (a BDP multiple of the rate before any step), None: infinite."""
        if self.buffer_bdp is not None:
            assert self.rate_mbps is not None and self.rtt_ms is not None
            bdp_bytes = self.rate_mbps * 1e6 / 8 * self.rtt_ms / 1e3
            return max(PACKET_BYTES, round(self.buffer_bdp * bdp_bytes))
        return self.buffer_bytes

    def capacity_mbps(self, duration_s: float, start_s: float = 0.0, end_s: float | None = None) -> float | None:
        """The link's mean rate over [start_s, end_s) of a run of `duration_s`: the cell's rate (and
        step), or the preset's (its trace's mean: opportunities of 1500 bytes over the trace's
        period); None for a topology (no one link)."""
        if self.preset is not None:
            return presets.lookup(self.preset).uplink.mean_rate_mbps()
        if self.rate_mbps is None:
            return None
        end_s = duration_s if end_s is None else end_s
        if self.step_factor is None or self.step_at_s is None or end_s <= start_s:
            return self.rate_mbps
        after = self.rate_mbps * self.step_factor
        before_s = min(max(self.step_at_s - start_s, 0.0), end_s - start_s)
        return (self.rate_mbps * before_s + after * (end_s - start_s - before_s)) / (end_s - start_s)

    @property
    def workload(self) -> workloads.Workload | None:
        return workloads.parse(self.flows)

    @property
    def competitor(self) -> str | None:
        return self.flows[len(VERSUS):] if self.flows.startswith(VERSUS) else None


@dataclass(frozen=True)
class Matrix:
    name: str
    description: str
    duration_s: float
    seeds: tuple[int, ...]
    environments: tuple[Environment, ...]
    window_s: float | None = None
    stagger_at_s: float | None = None
    source: str = "<matrix>"
    text: str = ""
    """The file as read: the data dir keeps a copy, by which a resumed league knows its matrix."""

    @property
    def competitors(self) -> list[str]:
        """The schemes `vs:NAME` cells run beside the league's, in the order they first appear."""
        return list(dict.fromkeys(c for e in self.environments if (c := e.competitor)))

    def stagger_s(self) -> float:
        return self.duration_s / 2 if self.stagger_at_s is None else self.stagger_at_s


def _number(value: object, where: str, low: float, high: float, strict_low: bool = True) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise MatrixError(f"{where} must be a number, got {value!r}")
    if value < low or (strict_low and value == low) or value > high:
        bound = f"above {low:g}" if strict_low else f"at least {low:g}"
        raise MatrixError(f"{where} must be {bound} and at most {high:g}, got {value:g}")
    return float(value)


def _list(grid: dict, key: str, where: str) -> list:
    value = grid[key]
    if not isinstance(value, list):
        raise MatrixError(f"{where}.{key} must be a list, e.g. {key} = [{value!r}]")
    if not value:
        raise MatrixError(f"{where}.{key} is empty: the grid has no cell")
    if len(set(map(repr, value))) != len(value):
        raise MatrixError(f"{where}.{key} names a value twice")
    return value


def _buffers(grid: dict, where: str) -> list[tuple[float | None, int | None]]:
    given = [k for k in ("buffer_bdp", "buffer_bytes") if k in grid]
    if len(given) > 1:
        raise MatrixError(f"{where}: give buffer_bdp or buffer_bytes, not both")
    if not given:
        raise MatrixError(f"{where}: buffer_bdp (or buffer_bytes) is missing: a list of sizes, or [\"infinite\"]")
    key = given[0]
    found: list[tuple[float | None, int | None]] = []
    for value in _list(grid, key, where):
        if value == INFINITE:
            found.append((None, None))
        elif key == "buffer_bdp":
            found.append((_number(value, f"{where}.buffer_bdp", 0.0, 1e4), None))
        else:
            size = _number(value, f"{where}.buffer_bytes", PACKET_BYTES, 1e12, strict_low=False)
            if not size.is_integer():
                raise MatrixError(f"{where}.buffer_bytes must be whole bytes, got {value!r}")
            found.append((None, int(size)))
    return found


def _flows(grid: dict, where: str, known: set[str] | None) -> list[str]:
    allowed = TOPOLOGY_FLOWS if "topology" in grid else FLOW_KINDS
    kinds = _list(grid, "flows", where) if "flows" in grid else [allowed[0]]
    for kind in kinds:
        if isinstance(kind, str) and kind.startswith(workloads.KIND) and "topology" not in grid:
            try:
                workloads.parse(kind)
            except ValueError as e:
                raise MatrixError(f"{where}.flows: {e}") from None
            continue
        if not isinstance(kind, str) or not (kind in allowed or kind.startswith(VERSUS)):
            others = "vs:SCHEME" if "topology" in grid else "vs:SCHEME or workload:SIZES@LOAD"
            raise MatrixError(f"{where}.flows: {kind!r} is not one of {', '.join(allowed)} or {others}"
                              + (" (in a topology, a flow per route)" if "topology" in grid else ""))
        name = kind[len(VERSUS):]
        if kind.startswith(VERSUS) and known is not None and name not in known:
            raise MatrixError(f"{where}.flows: {kind!r}: {name!r} is not a simulable scheme "
                              f"(simulable: {', '.join(sorted(known))})")
    return kinds


def _topologies(grid: dict, where: str, flows: list[str], folder: Path) -> list[Environment]:
    """A topology grid's cells: each topology (a shipped name, or a file relative to the matrix's
    folder) with each flows kind."""
    if mixed := sorted(set(grid) & (RATE_KEYS | {"preset"})):
        raise MatrixError(f"{where}: {mixed[0]} with topology: a topology's links are its own (drop one)")
    cells = []
    for value in _list(grid, "topology", where):
        name = str(folder / value) if isinstance(value, str) and value.endswith(".toml") else str(value)
        try:
            topology = topologies.load(name)
        except topologies.TopologyError as e:
            raise MatrixError(f"{where}.topology: {e}") from None
        for kind in flows:
            if kind.startswith(VERSUS) and len(topology.routes) < 2:
                raise MatrixError(f"{where}.flows: {kind!r} in topology {value!r}, which has one route: "
                                  "no flow to compete with")
            cells.append(Environment(flows=kind, topology=name))
    return cells


def _grid(grid: object, where: str, duration_s: float, known: set[str] | None, folder: Path) -> list[Environment]:
    if not isinstance(grid, dict):
        raise MatrixError(f"{where} must be a table ([[grid]])")
    if unknown := sorted(set(grid) - GRID_KEYS):
        raise MatrixError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(GRID_KEYS))})")
    flows = _flows(grid, where, known)
    if "topology" in grid:
        return _topologies(grid, where, flows, folder)
    if "preset" in grid:
        if mixed := sorted(set(grid) & RATE_KEYS):
            raise MatrixError(f"{where}: {mixed[0]} with preset: a preset's path is its own (drop one)")
        names = _list(grid, "preset", where)
        for name in names:
            try:
                presets.lookup(str(name))
            except presets.PresetError as e:
                raise MatrixError(f"{where}.preset: {e}") from None
        return [Environment(flows=kind, preset=str(name)) for name, kind in itertools.product(names, flows)]
    for key in ("rate_mbps", "rtt_ms"):
        if key not in grid:
            raise MatrixError(f"{where}: {key} is missing (a list of values)")
    rates = [_number(v, f"{where}.rate_mbps", 0.0, MAX_RATE_MBPS) for v in _list(grid, "rate_mbps", where)]
    rtts = [_number(v, f"{where}.rtt_ms", 0.0, MAX_RTT_MS) for v in _list(grid, "rtt_ms", where)]
    buffers = _buffers(grid, where)
    kinds = _list(grid, "queue", where) if "queue" in grid else ["droptail"]
    for kind in kinds:
        if kind not in queues.KINDS:
            raise MatrixError(f"{where}.queue: {kind!r} is not one of {', '.join(queues.KINDS)}")
    losses = [_number(v, f"{where}.loss", 0.0, 1.0, strict_low=False) for v in _list(grid, "loss", where)] \
        if "loss" in grid else [0.0]
    if any(loss >= 1 for loss in losses):
        raise MatrixError(f"{where}.loss must be below 1 (1 loses every packet)")
    steps: list[float | None] = [None]
    step_at_s = None
    if "step_factor" in grid:
        steps = [_number(v, f"{where}.step_factor", 0.0, 1e3) for v in _list(grid, "step_factor", where)]
        step_at_s = _number(grid.get("step_at_s", duration_s / 2), f"{where}.step_at_s", 0.0, duration_s)
        if step_at_s >= duration_s:
            raise MatrixError(f"{where}.step_at_s must be inside the run (below duration_s = {duration_s:g})")
    elif "step_at_s" in grid:
        raise MatrixError(f"{where}.step_at_s without step_factor: give the factors the rate steps by")
    cells = []
    for rate, rtt, (bdp, size), kind, loss, step, flow in itertools.product(rates, rtts, buffers, kinds, losses,
                                                                              steps, flows):
        if kind == "infinite" and (bdp is not None or size is not None):
            raise MatrixError(f"{where}.queue: 'infinite' with a buffer size: give buffer_bdp = [\"infinite\"] "
                              "for an infinite queue")
        if kind != "infinite" and bdp is None and size is None and kind == "droptail":
            kind = "infinite"
        cells.append(Environment(flows=flow, rate_mbps=rate, rtt_ms=rtt, buffer_bdp=bdp, buffer_bytes=size,
                                 queue=kind, loss=loss, step_factor=step, step_at_s=step_at_s if step else None))
    return cells


def _seeds(value: object, where: str) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= MAX_SEEDS:
            raise MatrixError(f"{where}: seeds must be a count in 1..{MAX_SEEDS} or a list of seeds, got {value}")
        return tuple(range(value))
    if (not isinstance(value, list) or not value
            or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2 ** 63 for s in value)):
        raise MatrixError(f"{where}: seeds must be a count or a non-empty list of seeds (whole numbers >= 0), "
                          f"got {value!r}")
    if len(set(value)) != len(value) or len(value) > MAX_SEEDS:
        raise MatrixError(f"{where}: seeds must be distinct, at most {MAX_SEEDS}")
    return tuple(value)


def parse(text: str, source: str, known: set[str] | None = None) -> Matrix:
    """The matrix a file's text declares; a MatrixError naming `source` and the key otherwise.
    `known`: the simulable schemes `vs:NAME` may name (None: not checked)."""
    top = top_table(text, source, TOP_KEYS, MatrixError)
    name = top.get("name", Path(source).stem)
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_." for c in name) or len(name) > 64:
        raise MatrixError(f"{source}: name must be letters, digits, '-', '_' or '.' (up to 64), got {name!r}")
    description = top.get("description", "")
    if not isinstance(description, str) or "\n" in description:
        raise MatrixError(f"{source}: description must be one line of text")
    duration_s = _number(top.get("duration_s", 30.0), f"{source}: duration_s", 0.0, MAX_DURATION_S)
    window_s = None
    if "window_s" in top:
        window_s = _number(top["window_s"], f"{source}: window_s", 0.0, duration_s)
    stagger = None
    if "stagger_at_s" in top:
        stagger = _number(top["stagger_at_s"], f"{source}: stagger_at_s", 0.0, duration_s)
        if stagger >= duration_s:
            raise MatrixError(f"{source}: stagger_at_s must be inside the run (below duration_s = {duration_s:g})")
    grids = top.get("grid")
    if not isinstance(grids, list) or not grids:
        raise MatrixError(f"{source}: no [[grid]]: the matrix has no cell")
    cells: list[Environment] = []
    for i, grid in enumerate(grids, 1):
        found = _grid(grid, f"{source}: grid {i}", duration_s, known, Path(source).parent)
        for cell in found:
            if (w := cell.workload) is not None and (rate := cell.capacity_mbps(duration_s)) is not None \
                    and (expected := workloads.expected_arrivals(w, rate, duration_s)) < workloads.MIN_EXPECTED_ARRIVALS:
                raise MatrixError(f"{source}: grid {i}.flows: {cell.flows!r} expects {expected:.1f} transfers in "
                                  f"{cell.name}, fewer than {workloads.MIN_EXPECTED_ARRIVALS:g}: raise the load or "
                                  "duration_s")
        cells += found
    unique = list(dict.fromkeys(cells))
    if len(unique) > MAX_ENVIRONMENTS:
        raise MatrixError(f"{source}: {len(unique)} environments; at most {MAX_ENVIRONMENTS}")
    return Matrix(name=name, description=description, duration_s=duration_s,
                  seeds=_seeds(top.get("seeds", 1), source), environments=tuple(unique), window_s=window_s,
                  stagger_at_s=stagger, source=source, text=text)


def load(path: Path, known: set[str] | None = None) -> Matrix:
    """The matrix file at `path`; a MatrixError when it cannot be read or used."""
    try:
        text = files.read_small_text(path, MAX_MATRIX_BYTES)
    except OSError as e:
        raise MatrixError(f"{path}: cannot read the matrix ({e.strerror or e})") from None
    except ValueError as e:
        raise MatrixError(f"{path}: {e}") from None
    return parse(text, str(path), known)
