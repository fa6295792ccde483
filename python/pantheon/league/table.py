"""The league's table: one row per environment × scheme × seed, with the environment's parameters
and the metrics (docs/league.md lists the columns), as Parquet.

Per row, of the scheme's own flows (both of a pair, the first of a `vs:` cell):
    throughput_mbps     the sum of their throughputs (each over its delivery span, docs/analysis.md)
    delay_p95_ms        the worse of their 95th-percentile one-way delays
    loss_rate           1 − their datagrams delivered / sent
    share               their throughput over every flow's
and of the cell: utilization (every flow's throughput over the link's mean rate over the run),
jain (Jain's index of the flows' throughputs, two-flow cells), competitor_throughput_mbps and
harm_throughput / harm_delay (a `vs:NAME` cell: the harm the scheme does to NAME, against NAME's
own `vs:NAME` cell of the same environment and seed: Ware et al., HotNets 2019; analysis/harm.py).

The score (ranking.py compares it): the scheme's throughput over the link's rate, times the base
one-way delay over its p95 one-way delay. 1 is the ideal (the whole link, no queue); it falls as the
scheme leaves the link idle or builds a queue, in proportion. With windows, each window's score is
the same of the window's throughput (bits delivered in it over its length) and p95.

A topology has no one link rate: there each flow of the scheme is held to its max-min fair share
(pantheon.topology) and its route's propagation delay, and the score is the mean over the scheme's
flows of min(1, throughput / fair share) × base one-way delay / p95 one-way delay. On one link it
would be the same as above for a flow alone; in a parking lot a scheme that starves the long flow
for its cross flows loses on the long flow what the cross flows cannot make up (they are capped at
their share). Jain's index there is of throughputs over fair shares (Jain, Chiu and Hawe, DEC-TR-301,
1984, §3: the index of normalised allocations), and utilization is left empty (no one link).

A workload cell's score is how fast its transfers completed against the empty path, and it has
the transfers' columns (workloads.py).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pantheon import files, presets
from pantheon import topology as topologies
from pantheon.analysis.harm import harm
from pantheon.analysis.metrics import jain_index
from pantheon.league import workloads
from pantheon.league.entrants import Entrant
from pantheon.league.matrix import Environment, Matrix
from pantheon.sim.batch import FlowMetrics, Result

TABLE_FILE = "league.parquet"
SCHEMA = pa.schema([
    ("environment", pa.string()), ("rate_mbps", pa.float64()), ("rtt_ms", pa.float64()),
    ("buffer_bdp", pa.float64()), ("buffer_bytes", pa.int64()), ("queue", pa.string()), ("loss", pa.float64()),
    ("step_factor", pa.float64()), ("preset", pa.string()), ("topology", pa.string()), ("flows", pa.string()),
    ("duration_s", pa.float64()),
    ("scheme", pa.string()), ("simulated_as", pa.string()), ("stand_in", pa.string()), ("seed", pa.int64()),
    ("ok", pa.bool_()), ("error", pa.string()),
    ("throughput_mbps", pa.float64()), ("delay_p95_ms", pa.float64()), ("delay_mean_ms", pa.float64()),
    ("loss_rate", pa.float64()), ("utilization", pa.float64()), ("share", pa.float64()), ("jain", pa.float64()),
    ("competitor_throughput_mbps", pa.float64()), ("competitor_delay_p95_ms", pa.float64()),
    ("harm_throughput", pa.float64()), ("harm_delay", pa.float64()), ("transfers", pa.int64()),
    ("completed", pa.float64()), ("slowdown_p50", pa.float64()), ("slowdown_p99", pa.float64()), ("score", pa.float64()),
    ("window_score", pa.list_(pa.float64())), ("window_throughput_mbps", pa.list_(pa.float64())),
    ("window_delay_p95_ms", pa.list_(pa.float64())), ("flow_throughput_mbps", pa.list_(pa.float64())),
    ("flow_delay_p95_ms", pa.list_(pa.float64())), ("wall_s", pa.float64()),
])


def key(row: dict) -> tuple[str, str, int]:
    """A row's cell: (environment, scheme, seed)."""
    return row["environment"], row["scheme"], row["seed"]


def capacity_mbps(env: Environment, matrix: Matrix, start_s: float = 0.0, end_s: float | None = None) -> float | None:
    """The link's mean rate over [start_s, end_s) of the run (Environment.capacity_mbps)."""
    return env.capacity_mbps(matrix.duration_s, start_s, end_s)


def base_delay_ms(env: Environment) -> float:
    """The path's one-way propagation delay."""
    if env.preset is not None:
        return presets.lookup(env.preset).delay_ms
    assert env.rtt_ms is not None
    return env.rtt_ms / 2


def own_flows(env: Environment) -> int:
    """How many of a cell's flows are the scheme's (the rest: the competitor's)."""
    if env.topology is not None and env.competitor is None:
        return len(topologies.load(env.topology).routes)
    return 2 if env.flows in ("pair", "staggered") else 1


def score(throughput_mbps: float | None, delay_p95_ms: float | None, capacity: float | None, base_ms: float) -> float | None:
    """The table's score (module header); 0 for a scheme that delivered nothing, None where the
    link's rate is unknown."""
    if not capacity:
        return None
    if not throughput_mbps or not delay_p95_ms:
        return 0.0
    return throughput_mbps / capacity * base_ms / delay_p95_ms


def topology_score(throughputs_mbps: Sequence[float], delays_p95_ms: Sequence[float | None], env: Environment,
                   start_s: float, end_s: float) -> float | None:
    """A topology cell's score of the scheme's flows (module header), their fair shares over
    [start_s, end_s); None where a flow's share is unbounded (no link limits it)."""
    network = topologies.load(env.topology or "")
    shares = network.fair_shares_mbps(start_s, end_s)
    terms = []
    for flow, (throughput, p95) in enumerate(zip(throughputs_mbps, delays_p95_ms)):
        if math.isinf(shares[flow]):
            return None
        value = score(min(throughput, shares[flow]), p95, shares[flow], network.base_delay_ms(flow))
        terms.append(0.0 if value is None else value)
    return sum(terms) / len(terms) if terms else None


def _cell_score(throughputs_mbps: Sequence[float], delays_p95_ms: Sequence[float | None], env: Environment,
                matrix: Matrix, start_s: float = 0.0, end_s: float | None = None) -> float | None:
    """The score of the scheme's flows over [start_s, end_s) of the run."""
    end_s = matrix.duration_s if end_s is None else end_s
    if env.topology is not None:
        return topology_score(throughputs_mbps, delays_p95_ms, env, start_s, end_s)
    p95s = [d for d in delays_p95_ms if d is not None]
    return score(sum(throughputs_mbps), max(p95s) if p95s else None, capacity_mbps(env, matrix, start_s, end_s),
                 base_delay_ms(env))


def _windows(flows: Sequence[FlowMetrics], env: Environment, matrix: Matrix) -> dict[str, list[float] | None]:
    """The scheme's flows window by window: throughput (summed), p95 delay (the worse; NaN where
    none was delivered) and score."""
    per_flow = [f.windows for f in flows]
    if matrix.window_s is None or any(w is None for w in per_flow):
        return {"window_score": None, "window_throughput_mbps": None, "window_delay_p95_ms": None}
    scores, throughputs, delays = [], [], []
    for k, windows in enumerate(zip(*per_flow)):
        start = k * matrix.window_s
        end = min(matrix.duration_s, start + matrix.window_s)
        p95s = [w.delay_p95_ms for w in windows if w.delay_p95_ms is not None]
        throughput = sum(w.throughput_mbps for w in windows)
        value = _cell_score([w.throughput_mbps for w in windows], [w.delay_p95_ms for w in windows], env, matrix,
                            start, end)
        scores.append(0.0 if value is None else value)
        throughputs.append(throughput)
        delays.append(max(p95s) if p95s else math.nan)
    return {"window_score": scores, "window_throughput_mbps": throughputs, "window_delay_p95_ms": delays}


def row(env: Environment, entrant: Entrant, seed: int, result: Result, matrix: Matrix) -> dict:
    """The table's row of one run (harm is filled in later, with_harm, once its baseline is known)."""
    values: dict = {
        "environment": env.name, "rate_mbps": env.rate_mbps, "rtt_ms": env.rtt_ms, "buffer_bdp": env.buffer_bdp,
        "buffer_bytes": env.limit_bytes(), "queue": env.queue if env.preset is None else None, "loss": env.loss,
        "step_factor": env.step_factor, "preset": env.preset,
        "topology": Path(env.topology).stem if env.topology else None, "flows": env.flows, "duration_s": matrix.duration_s,
        "scheme": entrant.name, "simulated_as": entrant.spec, "stand_in": entrant.stand_in, "seed": seed,
        "ok": result.ok, "error": result.error, "wall_s": result.wall_s,
    }
    if not result.ok:
        return values
    n = own_flows(env)
    own, others = result.flows[:n], result.flows[n:]
    throughput = sum(f.throughput_mbps for f in own)
    delays = [f.delay_p95_ms for f in own if f.delay_p95_ms is not None]
    means = [f.delay_mean_ms for f in own if f.delay_mean_ms is not None]
    sent = sum(f.sent_packets for f in own)
    total = sum(f.throughput_mbps for f in result.flows)
    capacity = None if env.topology is not None else capacity_mbps(env, matrix)
    other_delays = [f.delay_p95_ms for f in others if f.delay_p95_ms is not None]
    values.update({
        "throughput_mbps": throughput, "delay_p95_ms": max(delays) if delays else None,
        "delay_mean_ms": sum(means) / len(means) if means else None,
        "loss_rate": 1 - sum(f.delivered_packets for f in own) / sent if sent else None,
        "utilization": total / capacity if capacity else None,
        "share": throughput / total if total else None,
        "jain": _jain(result.flows, env, matrix) if len(result.flows) > 1 else None,
        "competitor_throughput_mbps": sum(f.throughput_mbps for f in others) if others else None,
        "competitor_delay_p95_ms": max(other_delays) if other_delays else None,
        "score": _cell_score([f.throughput_mbps for f in own], [f.delay_p95_ms for f in own], env, matrix),
        **_windows(own, env, matrix),
        "flow_throughput_mbps": [f.throughput_mbps for f in result.flows],
        "flow_delay_p95_ms": [math.nan if f.delay_p95_ms is None else f.delay_p95_ms for f in result.flows],
    })
    if env.workload is not None and capacity:
        # The transfers' speed against the empty path is the score (workloads.py), the run's alone.
        values.update(workloads.metrics(own[0].transfers or [], capacity, base_delay_ms(env), matrix.duration_s))
        values.update({"window_score": None, "window_throughput_mbps": None, "window_delay_p95_ms": None})
    return values


def _jain(flows: Sequence[FlowMetrics], env: Environment, matrix: Matrix) -> float | None:
    """Jain's index of the flows' throughputs; in a topology, of each over its fair share."""
    throughputs = [f.throughput_mbps for f in flows]
    if env.topology is None:
        return jain_index(throughputs)
    shares = topologies.load(env.topology).fair_shares_mbps(0.0, matrix.duration_s)
    if any(math.isinf(s) or s <= 0 for s in shares[:len(flows)]):
        return None
    return jain_index([t / s for t, s in zip(throughputs, shares)])


def with_harm(rows: list[dict]) -> list[dict]:
    """Each `vs:NAME` row's harm to NAME, against NAME's own row of that cell and seed (the
    competitor's numbers with itself); None where that row is missing or failed."""
    baseline = {(r["environment"], r["seed"]): r for r in rows
                if r["ok"] and r["flows"].startswith("vs:") and r["flows"] == f"vs:{r['scheme']}"}
    for r in rows:
        base = baseline.get((r["environment"], r["seed"]))
        if not r["ok"] or not r["flows"].startswith("vs:") or base is None:
            continue
        # NAME's numbers with NAME: its flows are both NAME's; the competitor's flow is the second.
        x_tput, x_delay = base["competitor_throughput_mbps"], base["competitor_delay_p95_ms"]
        y_tput, y_delay = r["competitor_throughput_mbps"], r["competitor_delay_p95_ms"]
        r["harm_throughput"] = harm(x_tput, y_tput, True) if x_tput is not None and y_tput is not None else None
        r["harm_delay"] = harm(x_delay, y_delay, False) if x_delay is not None and y_delay is not None else None
    return rows


def to_table(rows: Iterable[dict]) -> pa.Table:
    rows = list(rows)
    return pa.Table.from_pylist([{name: r.get(name) for name in SCHEMA.names} for r in rows], schema=SCHEMA)


def write(table: pa.Table, path: Path) -> None:
    """The table as Parquet, atomically (a reader never sees half a file)."""
    with files.atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()
