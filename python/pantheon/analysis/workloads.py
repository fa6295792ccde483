"""A run's workload metrics, onto its RunMetrics: the I/O edge of transfers.py and probes.py.

Reads run.json's plan of each flow (role, transfers, extra delay: datadir.FlowPlan),
transfers.parquet and, for probes flows, their data and acknowledgement records, then sets
- on a flow of one transfer: fct_ms and slowdown (None, with a warning, where it did not complete);
- on a flow of many transfers: transfers (count, completed, FCT and slowdown p50/p99, by size) and
  start_lateness_ms (a warning where its p99 exceeds transfers.LATE_START_MS);
- on a probes flow: probe_rtt_ms and, where some probes saw no other flow active, probe_rtt_idle_ms;
- on the run: rtt_fairness, where its bulk flows had different extra delays.
The path's one-way delay comes from the data dir's path options (metadata.json's emulator_options,
`--delay`, 0 by default, for an emulated or simulated path); over a real path it is unknown and
each flow's least one-way delay stands in (transfers.py). Which transport a flow used comes from
metadata.json (a kernel TCP scheme's entry names the kernel) or, for a scheme it lacks, the scheme's
manifest; a flow with its own crates/cc spec ran pantheon-udp.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pantheon import queues
from pantheon import schemes as registry
from pantheon.analysis import probes, transfers
from pantheon.analysis.datadir import DataDir, FlowPlan, RunSource
from pantheon.analysis.events import LinkEvents
from pantheon.analysis.metrics import RunMetrics


@dataclass
class RunWorkloads:
    """What the report draws of a run's workloads."""
    size_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Every transfer of the run that completed: its size, FCT (ms) and slowdown (NaN: no capacity)."""
    fct_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    slowdown: np.ndarray = field(default_factory=lambda: np.zeros(0))
    probe_rtts: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """Probes flow (numbered from 1) -> (each answered probe's send time s, its RTT ms)."""


def has_workloads(source: RunSource) -> bool:
    """Whether a run had anything but bulk flows on one base RTT."""
    return source.transfers is not None or any(f.role != "bulk" or f.transfers or f.extra_delay_ms for f in source.flows)


def path_delay_ms(data: DataDir) -> float | None:
    """The emulated or simulated path's one-way delay, ms (`--delay`, 0 when not given); None for a
    real path or the original Pantheon's data dirs, whose delay no option states."""
    if data.layout != "harness" or "remote" in data.metadata:
        return None
    try:
        delay = float(queues.options_dict(data.metadata.get("emulator_options") or []).get("--delay", 0))
    except ValueError:
        return None
    return delay if np.isfinite(delay) and delay >= 0 else None


def transport_of(data: DataDir, flow: FlowPlan) -> transfers.Transport:
    """Kernel TCP where the scheme runs the kernel's TCP (metadata.json's entry of a kernel TCP
    scheme names the kernel; the manifest's needs_kernel_cc for a scheme the metadata lacks);
    pantheon-udp's datagrams otherwise, and for every flow with its own crates/cc spec."""
    if flow.cc is not None:
        return transfers.DATAGRAMS
    entry = data.metadata.get("schemes", {}).get(flow.scheme)
    if isinstance(entry, dict):
        return transfers.KERNEL_TCP if "kernel" in entry else transfers.DATAGRAMS
    with contextlib.suppress(registry.SchemeError):
        scheme = registry.all_schemes().get(flow.scheme)
        if scheme is not None and scheme.needs_kernel_cc:
            return transfers.KERNEL_TCP
    return transfers.DATAGRAMS


def _one_way_ms(path_ms: float | None, flow: FlowPlan, events: LinkEvents, number: int) -> float | None:
    if path_ms is not None:
        return path_ms + flow.extra_delay_ms
    delays = events.delay_us[(events.recv_flow == number) & (events.delay_us >= 0)]
    return float(delays.min()) / 1000 if delays.size else None


def _as_float(column: pa.ChunkedArray) -> np.ndarray:
    """A nullable integer column as float64, NaN for null."""
    return np.array([np.nan if v is None else v for v in column.to_pylist()], dtype=np.float64)


def _probe_records(path, flows: list[int]) -> dict[int, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """records flow (from 0) -> direction -> (send_us, recv_us NaN where lost) of the given flows."""
    table = pq.read_table(path, columns=["flow", "direction", "send_us", "recv_us"])
    table = table.filter(pc.is_in(table["flow"], pa.array(flows, table["flow"].type)))
    found: dict[int, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for flow in flows:
        for direction in ("data", "ack"):
            rows = table.filter(pc.and_(pc.equal(table["flow"], flow), pc.equal(table["direction"], direction)))
            found.setdefault(flow, {})[direction] = (_as_float(rows["send_us"]), _as_float(rows["recv_us"]))
    return found


def _activity_us(source: RunSource, events: LinkEvents, done: dict[int, transfers.Transfers],
                 end_us: float) -> dict[int, list[tuple[float, float]]]:
    """Records flow (from 0) -> when it was active (probes.py's rule)."""
    active: dict[int, list[tuple[float, float]]] = {}
    for i, flow in enumerate(source.flows):
        if flow.role == "probes":
            continue
        if i in done:
            t = done[i]
            active[i] = [(b, e if np.isfinite(e) else end_us) for b, e in zip(t.began_us, t.end_us) if np.isfinite(b)]
            continue
        sends = events.send_t_us[events.send_flow == i + 1]
        recvs = events.recv_t_us[events.recv_flow == i + 1]
        if sends.size:
            active[i] = [(float(sends.min()), float(max(sends.max(), recvs.max() if recvs.size else sends.max())))]
    return active


def apply(data: DataDir, source: RunSource, events: LinkEvents, metrics: RunMetrics) -> tuple[list[str], RunWorkloads]:
    """Sets the workload metrics of a run's flows and of the run (module header); returns the
    warnings they give and what the report draws of them."""
    warnings: list[str] = []
    drawn = RunWorkloads()
    by_number = {int(m.flow): m for m in metrics.flows}
    path_ms = path_delay_ms(data)
    planned = {i: f for i, f in enumerate(source.flows) if f.transfers}
    done = transfers.read_transfers(source.transfers) if source.transfers is not None else {}
    if planned and not done:
        warnings.append("the run planned transfers but left no transfers.parquet: no FCT or slowdown")
    sizes, fcts, slows = [], [], []
    for i, t in done.items():
        m = by_number.get(i + 1)
        flow = source.flows[i] if i < len(source.flows) else FlowPlan(m.scheme or "" if m else "", 0.0, 0.0)
        one_way = _one_way_ms(path_ms, flow, events, i + 1)
        slowdown = (transfers.slowdowns(t, transport_of(data, flow), metrics.capacity_mbps, one_way)
                    if metrics.capacity_mbps and one_way is not None else np.full(t.size_bytes.size, np.nan))
        ok = t.completed
        sizes.append(t.size_bytes[ok])
        fcts.append(t.fct_ms[ok])
        slows.append(slowdown[ok])
        if m is None:
            continue
        if t.size_bytes.size == 1:
            m.fct_ms = float(t.fct_ms[0]) if ok[0] else None
            m.slowdown = float(slowdown[0]) if ok[0] and np.isfinite(slowdown[0]) else None
            if not ok[0]:
                warnings.append(f"flow {i + 1}'s transfer did not complete")
            continue
        m.transfers = transfers.transfer_summary(t, slowdown)
        m.start_lateness_ms = transfers.start_lateness_ms(t)
        if not ok.all():
            warnings.append(f"flow {i + 1}: {int((~ok).sum())} of {ok.size} transfers did not complete by the run's end")
        late = m.start_lateness_ms
        if late is not None and late["p99"] is not None and late["p99"] > transfers.LATE_START_MS:
            warnings.append(f"transfers started late: flow {i + 1}'s p99 start lateness {late['p99']:.1f} ms "
                            f"(max {late['max']:.1f} ms) exceeds {transfers.LATE_START_MS:g} ms")
    if sizes:
        drawn.size_bytes, drawn.fct_ms, drawn.slowdown = np.concatenate(sizes), np.concatenate(fcts), np.concatenate(slows)
    probing = [i for i, f in enumerate(source.flows) if f.role == "probes" and i + 1 in by_number]
    if probing and source.records is not None:
        end_us = float(max(events.send_t_us.max(initial=0), events.recv_t_us.max(initial=0)))
        active = _activity_us(source, events, done, end_us)
        for i, rows in _probe_records(source.records, probing).items():
            sent_us, rtt_us = probes.probe_rtts_us(*rows["data"], *rows["ack"])
            m = by_number[i + 1]
            m.probe_rtt_ms = transfers.percentiles(rtt_us / 1000)
            quiet = probes.idle(sent_us, [span for j, spans in active.items() if j != i for span in spans])
            m.probe_rtt_idle_ms = transfers.percentiles(rtt_us[quiet] / 1000) if quiet.any() else None
            drawn.probe_rtts[i + 1] = (sent_us / 1e6, rtt_us / 1000)
    bulk = [(f.extra_delay_ms, by_number[i + 1].throughput_mbps) for i, f in enumerate(source.flows)
            if f.role == "bulk" and not f.transfers and i + 1 in by_number]
    metrics.rtt_fairness = transfers.rtt_fairness([d for d, _ in bulk], [x for _, x in bulk])
    return warnings, drawn
