"""How far to trust a league's simulated cells: `--confirm N` runs N of its cells again over the
emulator, in real time (`pantheon test local`, then `pantheon analyze`), and sets the emulated
throughput, p95 delay and score beside the simulated ones (issue 36 §2).

Which cells: environments chosen to cover the matrix, by farthest-point sampling (Gonzalez, "Clustering
to minimize the maximum intercluster distance", TCS 1985) over each environment's coordinates,
each scaled to [0, 1] over the matrix: log rate, log RTT, log buffer (an infinite one beyond the
largest), log step factor, queue, flows (and a preset or a topology as a coordinate of its own).
The first is the matrix's first environment; each next is the farthest from those chosen. The
schemes take turns in the league's order, so N ≥ the number of schemes gives every scheme a cell.
Each cell runs on the matrix's first seed (with `seeds` > 1, on its first that many, and the means
over them are compared: a two-flow cell's difference is then less that of one race), the seed of
the emulator's randomness as of the simulator's. A topology cell is a candidate only where the
emulator can run it: a chain of at most two links (chain.py); a three-hop parking lot is not.

The emulated cell is the simulated one: the same controller (a scheme that plays through a stand-in
is emulated as its stand-in: what is compared is the simulator against the emulator, not a twin
against the kernel, which docs/sim.md's fidelity matrix measures), the same path (a preset file of
the cell's rate, delay, queue and loss; a rate step as the same trace; a preset cell as the preset),
the same flows (a scenario file), the same length; a topology cell over a chain of emulators
(chain.py), each flow's crates/cc spec run by pantheon-udp as the simulator ran it. Its data dir is
kept in DIR/confirm/ENV.SCHEME/ (and ENV.SCHEME.seedS for the further seeds); a cell whose data dir
has its measurements is not run again.

A difference is relative, (emulated − simulated) / simulated; confirm.json holds each cell's and the
medians of their magnitudes.
"""
from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pantheon import files
from pantheon import topology as topologies
from pantheon.calibrate.trace import LINK_LEAD_MS
from pantheon.league import chain, table
from pantheon.league.campaign import Cell, flows
from pantheon.league.entrants import Entrant
from pantheon.league.matrix import Environment, Matrix
from pantheon.league.path import TRACE_TAIL_MS, step_trace
from pantheon.presets import Direction, Preset
from pantheon.sim.batch import FlowMetrics, Job, Result

CONFIRM_DIR = "confirm"
CONFIRM_FILE = "confirm.json"
CHAIN_FLOWS_FILE = "flows.json"
"""A topology cell's emulated flows, in its data dir: what a resumed --confirm reads instead of running it again."""
METRICS = ("throughput_mbps", "delay_p95_ms", "score")
INFINITE_BUFFER_BDP = 64.0
"""Where an infinite buffer sits on the buffer axis: beyond any matrix's largest."""
TIMEOUT_MARGIN_S = 120.0
"""How much longer than the run an emulated cell may take (set-up, the analysis)."""


@dataclass(frozen=True)
class Confirmed:
    cell: Cell
    emulated_as: str
    simulated: dict
    """The simulated rows' numbers, each the mean over `seeds`."""
    emulated: dict | None
    """The emulated rows' numbers, each the mean over `seeds`; None when an emulated run failed
    (`error` says why)."""
    error: str | None = None
    seeds: tuple[int, ...] = ()

    def difference(self, metric: str) -> float | None:
        a = self.simulated.get(metric)
        b = None if self.emulated is None else self.emulated.get(metric)
        return None if a is None or b is None or a == 0 else (b - a) / a


def _coordinates(env: Environment, order: dict[str, list]) -> list[float]:
    flows = float(order["flows"].index(env.flows))
    if env.preset is not None:
        return [float(order["preset"].index(env.preset) + 1), 0, 0, 0, 0, 0, 0, flows]
    if env.topology is not None:
        return [0, float(order["topology"].index(env.topology) + 1), 0, 0, 0, 0, 0, flows]
    assert env.rate_mbps is not None and env.rtt_ms is not None
    return [0.0, 0.0, math.log2(env.rate_mbps), math.log2(env.rtt_ms),
            math.log2(env.buffer_bdp or INFINITE_BUFFER_BDP), math.log2(env.step_factor or 1.0),
            float(order["queue"].index(env.queue)), flows]


def emulable(env: Environment) -> bool:
    """Whether the emulator can run the cell: every one-link cell; a topology a chain can run."""
    return env.topology is None or chain.supported(topologies.load(env.topology)) is None


def choose(matrix: Matrix, entrants: Sequence[Entrant], n: int) -> list[Cell]:
    """N cells covering the matrix (module header)."""
    envs = [e for e in matrix.environments if emulable(e)]
    if not envs:
        return []
    order = {key: list(dict.fromkeys(getattr(e, key) for e in envs)) for key in ("preset", "topology", "queue", "flows")}
    points = [_coordinates(e, order) for e in envs]
    width = max(len(p) for p in points)
    points = [p + [0.0] * (width - len(p)) for p in points]
    spans = [max(p[k] for p in points) - min(p[k] for p in points) or 1.0 for k in range(width)]
    lows = [min(p[k] for p in points) for k in range(width)]
    scaled = [[(p[k] - lows[k]) / spans[k] for k in range(width)] for p in points]
    chosen = [0]
    nearest = [math.dist(scaled[0], q) for q in scaled]
    while len(chosen) < min(n, len(envs)):
        far = max(range(len(envs)), key=lambda i: (nearest[i], -i))
        if nearest[far] == 0:
            break
        chosen.append(far)
        nearest = [min(d, math.dist(scaled[far], q)) for d, q in zip(nearest, scaled)]
    cells = [Cell(envs[i], entrants[k % len(entrants)], matrix.seeds[0]) for k, i in enumerate(chosen)]
    # Fewer distinct environments than N: the rest go to the other schemes in the same environments.
    k = len(cells)
    while len(cells) < n and k < len(chosen) * len(entrants):
        cells.append(Cell(envs[chosen[k % len(chosen)]], entrants[k % len(entrants)], matrix.seeds[0]))
        k += 1
    return cells


def path_preset(env: Environment, matrix: Matrix) -> Preset | str:
    """The cell's path as an emulator preset (or the preset's name)."""
    if env.preset is not None:
        return env.preset
    assert env.rate_mbps is not None and env.rtt_ms is not None
    queue = None if env.queue in ("droptail", "infinite") else env.queue
    limit = env.limit_bytes()
    if env.step_factor is None:
        up = Direction(env.rate_mbps, queue_bytes=limit, queue=queue, loss=env.loss)
        down_mbps = env.rate_mbps
    else:
        after = env.rate_mbps * env.step_factor
        step_ms = round((env.step_at_s or 0.0) * 1e3) + LINK_LEAD_MS
        trace = step_trace(env.rate_mbps, after, step_ms, math.ceil(matrix.duration_s * 1e3) + TRACE_TAIL_MS)
        up = Direction(trace_ms=tuple(int(t) for t in trace.split()), queue_bytes=limit, queue=queue, loss=env.loss)
        down_mbps = max(env.rate_mbps, after)
    return Preset(env.name, "league cell", env.rtt_ms / 2, up, Direction(down_mbps), timing="us",
                  description=f"league cell {env.name}")


def scenario_text(cell: Cell, matrix: Matrix, names: list[str]) -> str:
    """The cell's flows as a scenario file: the scheme's (and the competitor's), as the simulator had them."""
    starts = [0.0, matrix.stagger_s() if cell.env.flows == "staggered" else 0.0]
    lines = [f'name = "{cell.entrant.name}"', f"runtime_s = {matrix.duration_s!r}"]
    for name, start in zip(names, starts):
        lines += ["[[flow]]", f'scheme = "{name}"', f"start_s = {start!r}", f"duration_s = {matrix.duration_s - start!r}"]
    return "\n".join(lines) + "\n"


def _emulate_topology(cell: Cell, matrix: Matrix, competitors: dict[str, Entrant], run_dir: Path) -> list[dict]:
    """A topology cell over a chain of emulators (chain.py): each flow's numbers."""
    done = run_dir / CHAIN_FLOWS_FILE
    if not done.exists():
        assert cell.env.topology is not None
        specs = [f.cc for f in flows(cell, matrix, competitors)]
        found = chain.emulate_topology(topologies.load(cell.env.topology), specs, matrix.duration_s,
                                       cell.seed, run_dir / "run")
        files.write_atomic(done, files.json_text(found))
    return json.loads(done.read_text())


def _emulate(cell: Cell, matrix: Matrix, names: list[str], run_dir: Path) -> list[dict]:
    """The cell over the emulator: each flow's numbers from its perf.json."""
    perf = run_dir / "data" / "perf.json"
    if not perf.exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        path = path_preset(cell.env, matrix)
        emulator = path
        if isinstance(path, Preset):
            files.write_atomic(run_dir / "path.toml", path.toml(f"the league cell {cell.env.name}"))
            emulator = str(run_dir / "path.toml")
        files.write_atomic(run_dir / "scenario.toml", scenario_text(cell, matrix, names))
        data = run_dir / "data"
        pantheon = [sys.executable, "-m", "pantheon.cli"]
        for argv in ([*pantheon, "test", "local", "--scenario", str(run_dir / "scenario.toml"), "--emulator",
                      str(emulator), "--seed", str(cell.seed), "--data-dir", str(data), "--quiet", "--no-analyze"],
                     [*pantheon, "analyze", str(data), "--no-plots", "--quiet"]):
            done = subprocess.run(argv, capture_output=True, text=True, timeout=matrix.duration_s + TIMEOUT_MARGIN_S)
            if done.returncode != 0:
                lines = done.stderr.strip().splitlines()
                raise RuntimeError(f"`pantheon {argv[3]}` exited {done.returncode}: {lines[-1] if lines else ''}")
    schemes = json.loads(perf.read_text())["schemes"]
    [run] = [run for scheme in schemes.values() for run in scheme["runs"].values()]
    if not run["valid"]:
        raise RuntimeError(f"the emulated run is invalid: {', '.join(run.get('warnings') or []) or 'see its perf.json'}")
    return [run["flows"][k] for k in sorted((k for k in run["flows"] if k != "all"), key=int)]


def _emulated_row(cell: Cell, matrix: Matrix, names: list[str], competitors: dict[str, Entrant],
                  run_dir: Path) -> dict:
    """The table's row of the cell as the emulator ran it."""
    if cell.env.topology is not None:
        measured = _emulate_topology(cell, matrix, competitors, run_dir)
    else:
        measured = _emulate(cell, matrix, names, run_dir)
    # The analysis's numbers of each flow; what only a batch fills (windows, transfers, ...) keeps its default.
    metrics = [FlowMetrics(**{k: v for k, v in f.items()
                              if k in FlowMetrics.__dataclass_fields__ and not isinstance(v, (dict, list))})
               for f in measured]
    return table.row(cell.env, cell.entrant, cell.seed, Result(Job(()), metrics), matrix)


def confirm(cells: Sequence[Cell], matrix: Matrix, rows: Sequence[dict], competitors: dict[str, Entrant],
            data_dir: Path, on_done: Callable[[Confirmed], None] | None = None, seeds: int = 1) -> list[Confirmed]:
    """Each cell emulated on the matrix's first `seeds` seeds and set beside its simulated rows."""
    by_key = {(r["environment"], r["scheme"], r["seed"]): r for r in rows}
    found = []
    for cell in cells:
        played = cell.entrant.stand_in or cell.entrant.name
        names = [played] * table.own_flows(cell.env)
        if cell.env.competitor:
            names.append(competitors[cell.env.competitor].stand_in or cell.env.competitor)
        runs = [Cell(cell.env, cell.entrant, seed) for seed in matrix.seeds[:seeds]]
        simulated = _mean([_numbers(by_key[run.key]) for run in runs])
        try:
            emulated = []
            for k, run in enumerate(runs):
                name = f"{cell.env.name}.{cell.entrant.name}" + (f".seed{run.seed}" if k else "")
                run_dir = data_dir / CONFIRM_DIR / name
                emulated.append(_numbers(_emulated_row(run, matrix, names, competitors, run_dir)))
            result = Confirmed(cell, played, simulated, _mean(emulated), seeds=tuple(r.seed for r in runs))
        except (RuntimeError, subprocess.TimeoutExpired, OSError, KeyError, ValueError) as e:
            result = Confirmed(cell, played, simulated, None, error=str(e).splitlines()[0] if str(e) else repr(e),
                               seeds=tuple(r.seed for r in runs))
        found.append(result)
        if on_done:
            on_done(result)
    return found


def _numbers(row: dict) -> dict:
    return {k: row.get(k) for k in METRICS}


def _mean(numbers: Sequence[dict]) -> dict:
    """Each metric's mean over the runs that have it (None where none has)."""
    out = {}
    for metric in METRICS:
        values = [n[metric] for n in numbers if n.get(metric) is not None]
        out[metric] = statistics.fmean(values) if values else None
    return out


def median_differences(found: Sequence[Confirmed]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for metric in METRICS:
        values = [abs(d) for c in found if (d := c.difference(metric)) is not None]
        out[metric] = statistics.median(values) if values else None
    return out


def to_json(found: Sequence[Confirmed]) -> dict:
    return {
        "cells": [{"environment": c.cell.env.name, "scheme": c.cell.entrant.name, "emulated_as": c.emulated_as,
                   "seed": c.cell.seed, "seeds": list(c.seeds), "simulated": c.simulated, "emulated": c.emulated,
                   "error": c.error,
                   "difference": {m: c.difference(m) for m in METRICS}} for c in found],
        "median_abs_difference": median_differences(found),
    }


def write(data_dir: Path, found: Sequence[Confirmed]) -> dict:
    data = to_json(found)
    files.write_atomic(data_dir / CONFIRM_FILE, files.json_text(data))
    return data
