"""The throughput–delay plane of a comparison of schemes (bench/tao.py, tests/test_behaviour.py):
where a scheme sits against others on one path, by Remy's objective and by dominance.

- Remy's objective for one sender: log(throughput) − δ·log(delay) (Winstein & Balakrishnan,
  "TCP ex Machina", SIGCOMM 2013, §3.2), natural logarithms of Mbit/s and ms.
- Dominance: a scheme dominates another on a path when it gets at least as much throughput at no
  more delay; `dominators` asks for a margin on both axes, so that a few percent of run-to-run
  noise does not count as being dominated ("near the frontier").
- A sender of an on/off workload is several flows (one per on-period, pantheon.remy.networks):
  `sender_points` pools them as Remy does, throughput as the data delivered over the time on.

Pure: numbers in, numbers out.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DATAGRAM_BYTES = 1464
"""The simulator's datagram (pantheon.sim.batch), in which delivered packets are counted."""


@dataclass(frozen=True)
class Point:
    """One sender's (or one scheme's summary) place in the plane."""
    throughput_mbps: float
    delay_mean_ms: float
    delay_p95_ms: float


def objective(throughput_mbps: float, delay_ms: float, delta: float = 1.0) -> float:
    """Remy's utility of one sender: log(throughput) − δ·log(delay)."""
    return math.log(throughput_mbps) - delta * math.log(delay_ms)


def dominators(point: Point, others: Mapping[str, Point], margin: float = 0.0) -> list[str]:
    """The names in `others` with at least (1 + margin) times `point`'s throughput at no more than
    its mean delay divided by (1 + margin); with margin 0, also at least one of them strictly
    better (a point equal to `point` does not dominate it)."""
    found = []
    for name, other in others.items():
        more = other.throughput_mbps >= point.throughput_mbps * (1 + margin)
        less = other.delay_mean_ms <= point.delay_mean_ms / (1 + margin)
        strict = other.throughput_mbps > point.throughput_mbps or other.delay_mean_ms < point.delay_mean_ms
        if more and less and (margin > 0 or strict):
            found.append(name)
    return found


@dataclass(frozen=True)
class FlowPart:
    """One flow of a sender (one on-period): what the simulator reports of it."""
    sender: int
    on_s: float
    delivered_packets: int
    delay_mean_ms: float | None
    delay_p95_ms: float | None


def sender_points(flows: Sequence[FlowPart]) -> dict[int, Point]:
    """Each sender's point, for senders that got something delivered: throughput = datagrams
    delivered × 1464 bytes over its time on; mean delay the delivered-weighted mean of its flows';
    p95 the delivered-weighted mean of its flows' p95s (not the p95 of the pooled packets, which
    the simulator's summary does not keep)."""
    on_s: dict[int, float] = {}
    delivered: dict[int, int] = {}
    mean_sum: dict[int, float] = {}
    p95_sum: dict[int, float] = {}
    for f in flows:
        on_s[f.sender] = on_s.get(f.sender, 0.0) + f.on_s
        if f.delivered_packets and f.delay_mean_ms is not None and f.delay_p95_ms is not None:
            delivered[f.sender] = delivered.get(f.sender, 0) + f.delivered_packets
            mean_sum[f.sender] = mean_sum.get(f.sender, 0.0) + f.delay_mean_ms * f.delivered_packets
            p95_sum[f.sender] = p95_sum.get(f.sender, 0.0) + f.delay_p95_ms * f.delivered_packets
    return {s: Point(n * DATAGRAM_BYTES * 8 / on_s[s] / 1e6, mean_sum[s] / n, p95_sum[s] / n)
            for s, n in sorted(delivered.items()) if on_s[s] > 0}


def mean_point(points: Sequence[Point]) -> Point:
    """The means of each coordinate."""
    return Point(statistics.fmean(p.throughput_mbps for p in points), statistics.fmean(p.delay_mean_ms for p in points),
                 statistics.fmean(p.delay_p95_ms for p in points))


def median_point(points: Sequence[Point]) -> Point:
    """The medians of each coordinate (TCP ex Machina's Figure 4 plots the medians over senders)."""
    return Point(statistics.median(p.throughput_mbps for p in points), statistics.median(p.delay_mean_ms for p in points),
                 statistics.median(p.delay_p95_ms for p in points))
