"""Pantheon's metrics, as pure functions: LinkEvents in, numbers out (Yan et al., ATC 2018, §3.2,
and the original's analysis code, whose definitions these follow; docs/analysis.md states them).

Per flow, and for all flows of a run taken together:
  throughput_mbps   bits delivered / (last delivery − first delivery); 0 with fewer than two
                    deliveries (the original's convention)
  ingress_mbps      the sending rate, likewise from the sends
  delay_p95_ms      95th percentile of the per-packet one-way delays (nearest rank: the
                    ceil(0.95·n)-th smallest); also the mean and the median (50th, nearest rank)
  loss_rate         1 − bytes delivered / bytes sent; a packet still queued when the run ended
                    never arrived and counts as lost
  ce_rate           data packets delivered marked Congestion Experienced / data packets delivered
                    (RFC 3168: an AQM's mark instead of a drop); None unless the flow sent
                    ECN-capable packets (or delivered none)
Per run: capacity_mbps (delivery-opportunity bits over the span of the opportunities, where the
path was emulated), utilization (all flows' throughput / capacity), Jain's fairness index of the
flows' throughputs (Jain, Chiu, Hawe, DEC-TR-301, 1984), and Kleinrock's power
ln(throughput_mbps / delay_p95_ms) (Kleinrock, ICC 1979; the form the original archive ranked
schemes by). The metrics of workloads (finite transfers, probes, per-flow RTTs) are computed by
analysis/transfers.py and probes.py and stored here, on the flow and the run they describe.

Per scheme, over its valid runs: mean and sample standard deviation of each metric.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction

import numpy as np

from pantheon.analysis.events import LinkEvents

SHORT_RUN_FRACTION = 0.8
"""A run (or flow) that lasted less than this fraction of its configured time is flagged."""
LATE_START_SLACK_S = 0.5
"""A flow whose first packet left more than this after its planned start and the data dir's head
start (a flow's second side starts that long after its first: metadata.json's `head_start_s`) did
not start on time."""
SHORT_FLOWS_NAMED = 3
"""Short flows named one by one in a run's flags; more are summed up in one flag."""


def nearest_rank(sorted_values: Sequence[float] | np.ndarray, percent: float) -> float:
    """The ceil(percent/100 · n)-th smallest of n sorted values (at least the first): the one
    percentile definition of the analysis, the tests and the benchmarks."""
    n = len(sorted_values)
    rank = max(1, math.ceil(Fraction(str(percent)) * n / 100))
    return float(sorted_values[rank - 1])


@dataclass
class FlowMetrics:
    flow: str
    """"1", "2", ... or "all"."""
    scheme: str | None
    sent_packets: int
    sent_bytes: int
    delivered_packets: int
    delivered_bytes: int
    first_send_s: float | None
    last_send_s: float | None
    first_delivery_s: float | None
    last_delivery_s: float | None
    duration_s: float
    """From the first send to the last delivery: how long the flow moved data."""
    throughput_mbps: float
    ingress_mbps: float
    delay_p95_ms: float | None
    delay_mean_ms: float | None
    delay_median_ms: float | None
    loss_rate: float | None
    ce_rate: float | None = None
    """Delivered packets that arrived CE-marked / delivered packets; None where the flow used no
    ECN (it sent no ECN-capable packet) or delivered nothing."""
    fct_ms: float | None = None
    """A finite flow's (one transfer's) completion time, ms: its receiver's last byte − its
    sender's start (analysis/transfers.py); None for other flows, or where it did not complete."""
    slowdown: float | None = None
    """A finite flow's FCT / the ideal FCT of its size on the empty path (analysis/transfers.py)."""
    transfers: dict | None = None
    """A flow of many transfers (Poisson arrivals): count, completed, FCT and slowdown p50/p99,
    slowdown by size bucket (analysis/transfers.py: transfer_summary)."""
    start_lateness_ms: dict | None = None
    """A flow of many transfers: p50, p99 and max of each transfer's began − planned start, ms."""
    probe_rtt_ms: dict | None = None
    """A probes flow: p50 and p99 of its probes' round-trip times, ms (analysis/probes.py)."""
    probe_rtt_idle_ms: dict | None = None
    """A probes flow: the same of the probes sent while no other flow was active (the reference)."""


@dataclass
class RunMetrics:
    all: FlowMetrics
    flows: list[FlowMetrics]
    capacity_mbps: float | None
    utilization: float | None
    jain_index: float | None
    power: float | None
    flags: list[str] = field(default_factory=list)
    """Why the run is not valid for comparisons (failed, short, clocks); empty when it is."""
    delay_bound_ms: float | None = None
    """Remote mode: how far each one-way delay may be off, the two hosts' clocks being measured to
    within this (harness/clock.py); None where one clock timed both ends."""
    host_steal_pct: float | None = None
    """The share of the harness host's CPU time a hypervisor stole while the flows ran (run.json's,
    harness/steal.py); None where it was not measured (simulated runs, the original's logs)."""
    rtt_fairness: float | None = None
    """Where the run's bulk flows had different base RTTs (extra delays): the shortest-RTT flows'
    mean throughput / the longest-RTT flows' (analysis/transfers.py: rtt_fairness); else None."""

    @property
    def valid(self) -> bool:
        return not self.flags


def _rate_mbps(t_us: np.ndarray, size_bytes: np.ndarray) -> float:
    """Bits over the span of the events, in bits/µs = Mbit/s; 0 for a span of zero."""
    if t_us.size < 2:
        return 0.0
    span_us = int(t_us.max() - t_us.min())
    return float(size_bytes.sum()) * 8 / span_us if span_us > 0 else 0.0


def ce_rate(send_ecn: np.ndarray | None, recv_ce: np.ndarray | None) -> float | None:
    """The share of deliveries marked CE, where some send was ECN-capable (codepoint not 0)."""
    if send_ecn is None or recv_ce is None or not recv_ce.size or not send_ecn.any():
        return None
    return float(np.count_nonzero(recv_ce)) / recv_ce.size


def flow_metrics(flow: str, scheme: str | None, send_t_us: np.ndarray, send_bytes: np.ndarray,
                 recv_t_us: np.ndarray, recv_bytes: np.ndarray, delay_us: np.ndarray,
                 send_ecn: np.ndarray | None = None, recv_ce: np.ndarray | None = None) -> FlowMetrics:
    delays_ms = np.sort(delay_us[delay_us >= 0]) / 1000.0
    sent, delivered = int(send_bytes.sum()), int(recv_bytes.sum())
    first = lambda t: float(t.min()) / 1e6 if t.size else None  # noqa: E731
    last = lambda t: float(t.max()) / 1e6 if t.size else None  # noqa: E731
    starts = [t for t in (first(send_t_us), first(recv_t_us)) if t is not None]
    ends = [t for t in (last(send_t_us), last(recv_t_us)) if t is not None]
    return FlowMetrics(
        flow=flow, scheme=scheme,
        sent_packets=int(send_t_us.size), sent_bytes=sent,
        delivered_packets=int(recv_t_us.size), delivered_bytes=delivered,
        first_send_s=first(send_t_us), last_send_s=last(send_t_us),
        first_delivery_s=first(recv_t_us), last_delivery_s=last(recv_t_us),
        duration_s=(max(ends) - min(starts)) if starts else 0.0,
        throughput_mbps=_rate_mbps(recv_t_us, recv_bytes),
        ingress_mbps=_rate_mbps(send_t_us, send_bytes),
        delay_p95_ms=nearest_rank(delays_ms, 95) if delays_ms.size else None,
        delay_mean_ms=float(delays_ms.mean()) if delays_ms.size else None,
        delay_median_ms=nearest_rank(delays_ms, 50) if delays_ms.size else None,
        loss_rate=(1 - delivered / sent) if sent else None,
        ce_rate=ce_rate(send_ecn, recv_ce),
    )


def capacity_mbps(events: LinkEvents) -> float | None:
    """Delivery-opportunity bits over the span from the first opportunity to the last."""
    if events.opportunity_t_us is None or events.opportunity_bytes is None or events.opportunity_t_us.size < 2:
        return None
    rate = _rate_mbps(events.opportunity_t_us, events.opportunity_bytes)
    return rate or None


def jain_index(throughputs_mbps: list[float]) -> float | None:
    """(Σx)² / (n·Σx²): 1 when all flows get the same, 1/n when one gets everything."""
    x = np.asarray(throughputs_mbps, dtype=np.float64)
    if x.size < 2 or not (x ** 2).sum():
        return None
    return float(x.sum() ** 2 / (x.size * (x ** 2).sum()))


def power(throughput_mbps: float | None, delay_p95_ms: float | None) -> float | None:
    """Kleinrock's power as the original Pantheon ranked schemes: ln(Mbit/s / ms)."""
    if not throughput_mbps or not delay_p95_ms or delay_p95_ms <= 0:
        return None
    return math.log(throughput_mbps / delay_p95_ms)


def run_metrics(events: LinkEvents, flow_schemes: dict[int, str] | None = None) -> RunMetrics:
    """Every metric of one run; flow_schemes names each flow's scheme where it is known."""
    flow_schemes = flow_schemes or {}
    flows = []
    send_ecn, recv_ce = events.send_ecn, events.recv_ce
    for flow in events.flows:
        sent = events.send_flow == flow
        recv = events.recv_flow == flow
        flows.append(flow_metrics(str(flow), flow_schemes.get(flow), events.send_t_us[sent], events.send_bytes[sent],
                                  events.recv_t_us[recv], events.recv_bytes[recv], events.delay_us[recv],
                                  None if send_ecn is None else send_ecn[sent], None if recv_ce is None else recv_ce[recv]))
    schemes = {m.scheme for m in flows}
    total = flow_metrics("all", schemes.pop() if len(schemes) == 1 else None, events.send_t_us, events.send_bytes,
                         events.recv_t_us, events.recv_bytes, events.delay_us, events.send_ecn, events.recv_ce)
    capacity = capacity_mbps(events)
    return RunMetrics(
        all=total, flows=flows, capacity_mbps=capacity,
        utilization=total.throughput_mbps / capacity if capacity else None,
        jain_index=jain_index([m.throughput_mbps for m in flows]),
        power=power(total.throughput_mbps, total.delay_p95_ms),
    )


def _span(values: list[float], style: str = ".1f") -> str:
    """"2.4–2.7 s", or "2.5 s" where the values print alike."""
    low, high = format(min(values), style), format(max(values), style)
    return f"{low} s" if low == high else f"{low}–{high} s"


def length_flags(run: RunMetrics, runtime_s: float | None, flow_durations_s: dict[str, float], head_start_s: float,
                 flow_starts_s: dict[str, float] | None = None, cpus: int | None = None) -> list[str]:
    """Why a run is too short to compare: it, or one of its flows, moved data for less than
    SHORT_RUN_FRACTION of its configured time. Where the short flows sent their first packet more
    than `head_start_s` + LATE_START_SLACK_S after their planned start, the flag says so: they
    could not start on time (so many flows on this many CPUs, where the metadata says how many). Up to
    SHORT_FLOWS_NAMED flows are named one by one; more share one line."""
    flags = []
    if runtime_s and run.all.duration_s < SHORT_RUN_FRACTION * runtime_s:
        flags.append(f"short: data moved for {run.all.duration_s:.1f} s of {runtime_s:g} s")
    short = [(m, wanted) for m in run.flows
             if (wanted := flow_durations_s.get(m.flow)) and m.duration_s < SHORT_RUN_FRACTION * wanted]
    starts = flow_starts_s or {}
    late = {m.flow: m.first_send_s - starts[m.flow] for m, _ in short
            if m.flow in starts and m.first_send_s is not None and m.first_send_s - starts[m.flow] > head_start_s + LATE_START_SLACK_S}
    if len(short) <= SHORT_FLOWS_NAMED:
        for m, wanted in short:
            why = f": its first packet left {late[m.flow]:.1f} s after its planned start" if m.flow in late else ""
            flags.append(f"short: flow {m.flow} moved data for {m.duration_s:.1f} s of {wanted:g} s{why}")
        return flags
    line = (f"short: {len(short)} of {len(run.flows)} flows moved data for {_span([m.duration_s for m, _ in short])} "
            f"of {_span([w for _, w in short], 'g')}")
    if late:
        machine = f" on {cpus} CPUs" if cpus else ""
        line += (f": {len(late)} sent their first packet {_span(list(late.values()))} after their planned start "
                 f"(the machine could not start {len(run.flows)} flows{machine} on time)")
    return [*flags, line]


def delivery_flags(run: RunMetrics) -> list[str]:
    """Why a run has no numbers to compare: a flow that sent and received nothing (no throughput,
    no delay), or deliveries whose one-way delays were all negative (no delay statistic)."""
    if run.all.sent_packets and not run.all.delivered_packets:
        return [f"no delivery: nothing of the {run.all.sent_packets:,} packets sent was received"]
    flags = [f"no delivery: flow {m.flow} received nothing of its {m.sent_packets:,} packets sent"
             for m in run.flows if m.sent_packets and not m.delivered_packets]
    if run.all.delivered_packets and run.all.delay_p95_ms is None:
        flags.append("clocks: every one-way delay was negative (the two ends' clocks out of step), so no delay statistic")
    return flags


SCHEME_METRICS = ("throughput_mbps", "ingress_mbps", "delay_p95_ms", "delay_mean_ms", "delay_median_ms", "loss_rate",
                  "ce_rate")
RUN_METRICS = ("capacity_mbps", "utilization", "jain_index", "power", "rtt_fairness")


def _mean_sd(values: list[float | None]) -> dict[str, float | None]:
    x = np.array([v for v in values if v is not None], dtype=np.float64)
    return {"mean": float(x.mean()) if x.size else None, "sd": float(x.std(ddof=1)) if x.size > 1 else None, "n": int(x.size)}


def scheme_summary(runs: list[RunMetrics]) -> dict:
    """Mean and sample standard deviation over the valid runs: of each all-flows metric, of each
    run metric, and of each flow's metrics by flow number; power of the means as the original;
    the largest clock bound of the runs (remote mode), which bounds the error of every mean delay."""
    valid = [r for r in runs if r.valid]
    summary: dict = {"valid_runs": len(valid), "runs": len(runs)}
    summary["all"] = {name: _mean_sd([getattr(r.all, name) for r in valid]) for name in SCHEME_METRICS}
    summary["run"] = {name: _mean_sd([getattr(r, name) for r in valid]) for name in RUN_METRICS}
    flows = sorted({m.flow for r in valid for m in r.flows}, key=int)
    summary["flows"] = {
        flow: {name: _mean_sd([getattr(m, name) for r in valid for m in r.flows if m.flow == flow]) for name in SCHEME_METRICS}
        for flow in flows
    }
    summary["power_of_means"] = power(summary["all"]["throughput_mbps"]["mean"], summary["all"]["delay_p95_ms"]["mean"])
    bounds = [r.delay_bound_ms for r in valid if r.delay_bound_ms is not None]
    summary["delay_bound_ms"] = max(bounds) if bounds else None
    return summary


def bound_text(bound_ms: float) -> str:
    """A clock bound as printed beside a delay: two significant digits, rounded up, so that the
    printed bound is never tighter than the measured one (0.2134 → "0.22", 15.08 → "16")."""
    if bound_ms <= 0:
        return "0"
    digits = max(0, 1 - math.floor(math.log10(bound_ms)))
    return f"{math.ceil(round(bound_ms * 10 ** digits, 9)) / 10 ** digits:.{digits}f}"


def as_dict(run: RunMetrics) -> dict:
    return {"valid": run.valid, "flags": run.flags, "capacity_mbps": run.capacity_mbps, "utilization": run.utilization,
            "jain_index": run.jain_index, "power": run.power, "delay_bound_ms": run.delay_bound_ms,
            "host_steal_pct": run.host_steal_pct, "rtt_fairness": run.rtt_fairness, "flows": {m.flow: asdict(m) for m in [run.all, *run.flows]}}
