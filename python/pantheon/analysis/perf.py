"""The numbers, written for programs: perf.json (scheme → run → flow → metrics, as the original
Pantheon's pantheon_perf.json, with per-scheme summaries beside the runs) and one flat table of
the same per-flow metrics, one row per (scheme, run, flow), as perf.csv and perf.parquet for
pandas or polars users. Runs over a real path (remote mode) carry delay_bound_ms, the clock
bound on each of their one-way delays; it is null where one clock timed both ends. Flows are numbered from 1; flow "all" is every flow of the run together.

The workload metrics (analysis/transfers.py, probes.py) are on their flow in perf.json, null on the
flows they do not apply to; the table, being flat, holds the scalar ones as they are (fct_ms,
slowdown, the run's rtt_fairness) and the nested ones as one column per number (NESTED_COLUMNS:
transfers_slowdown_p99 is perf.json's transfers.slowdown.p99). The slowdown by size bucket is in
perf.json only.
"""
from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from pantheon import files
from pantheon.analysis import PERF_FORMAT_VERSION
from pantheon.analysis.datadir import format_version, read_json
from pantheon.analysis.metrics import RunMetrics, as_dict

TABLE_COLUMNS = ("scheme", "display", "run", "flow", "flow_scheme", "valid", "flags", "capacity_mbps", "utilization",
                 "jain_index", "power", "delay_bound_ms", "host_steal_pct")
NESTED_COLUMNS: dict[str, tuple[tuple[str, ...], ...]] = {
    "transfers": (("count",), ("completed",), ("fct_ms", "p50"), ("fct_ms", "p99"), ("slowdown", "p50"), ("slowdown", "p99")),
    "start_lateness_ms": (("p50",), ("p99",), ("max",)),
    "probe_rtt_ms": (("p50",), ("p99",)),
    "probe_rtt_idle_ms": (("p50",), ("p99",)),
}
"""A flow's nested workload metrics as the table's columns: key path within it -> the column
KEY_PATH joined by "_" (the same columns in every table, null where the flow has none)."""


def _flattened(flow: dict) -> dict:
    """A flow's metrics with the nested ones (NESTED_COLUMNS) replaced by their columns."""
    for key, paths in NESTED_COLUMNS.items():
        nested = flow.pop(key, None)
        for path in paths:
            value = nested
            for step in path:
                value = value.get(step) if isinstance(value, dict) else None
            flow["_".join((key, *path))] = value
    return flow


def _clean(value):
    """JSON has no NaN or infinity: those become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def perf_document(results: dict[str, dict[int, RunMetrics]], summaries: dict[str, dict], displays: dict[str, str],
                  warnings: dict[tuple[str, int], list[str]], acks: dict[tuple[str, int], dict | None], meta: dict) -> dict:
    schemes = {}
    for label, runs in results.items():
        schemes[label] = {
            "display": displays[label],
            "summary": summaries[label],
            "runs": {str(n): {**as_dict(run), "warnings": warnings.get((label, n), []),
                              "acks": acks.get((label, n))} for n, run in runs.items()},
        }
    return _clean({**meta, "schemes": schemes})


def write_perf_json(document: dict, path: Path) -> Path:
    files.write_atomic(path, files.json_text(document))
    return path


def read_perf_json(path: Path) -> dict:
    """perf.json of this version or an older one (version 1 had no `format_version`: the same keys
    otherwise); a DataDirError in one line when it is not a perf.json, or a newer one."""
    document = read_json(path)
    format_version(document, path, PERF_FORMAT_VERSION)
    return document


def flat_table(results: dict[str, dict[int, RunMetrics]], displays: dict[str, str]) -> pa.Table:
    rows = []
    for label, runs in results.items():
        for number, run in runs.items():
            for m in [run.all, *run.flows]:
                flow = _flattened(asdict(m))
                rows.append({
                    "scheme": label, "display": displays[label], "run": number, "flow": flow.pop("flow"),
                    "flow_scheme": flow.pop("scheme"), "valid": run.valid, "flags": "; ".join(run.flags),
                    "capacity_mbps": run.capacity_mbps, "utilization": run.utilization,
                    "jain_index": run.jain_index, "power": run.power, "delay_bound_ms": run.delay_bound_ms,
                    "host_steal_pct": run.host_steal_pct, "rtt_fairness": run.rtt_fairness, **flow,
                })
    if not rows:
        return pa.table({name: pa.array([], pa.string()) for name in TABLE_COLUMNS})
    return pa.Table.from_pylist(rows)


def write_table(table: pa.Table, directory: Path) -> list[Path]:
    csv_path, parquet_path = directory / "perf.csv", directory / "perf.parquet"
    with files.atomic_path(csv_path) as tmp:
        pcsv.write_csv(table, tmp)
    with files.atomic_path(parquet_path) as tmp:
        pq.write_table(table, tmp)
    return [csv_path, parquet_path]
