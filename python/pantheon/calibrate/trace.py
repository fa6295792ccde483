"""The time-varying model (`pantheon calibrate --model trace`): a delivery trace inferred from the
data's own arrivals, the way Mahimahi's cellular traces were recorded — a saturating sender, and at
the receiver the arrival time of every packet, each one a delivery opportunity of the link
(Winstein et al., "Stochastic forecasts achieve high throughput and low delay over cellular
networks", NSDI 2013, §4.1's saturator; Netravali et al., "Mahimahi", USENIX ATC 2015, §3.2).

The five parameters (space.py) give the bottleneck one rate, constant or Poisson; a cellular path's
rate varies from one second to the next, which neither describes. Here the rate's course comes from
the data, and the Bayesian search fits only what the arrivals do not show: the propagation delay,
the buffer, the loss and a scale on the trace's rate (search.py, space.py).

Which opportunities the data shows. Our links (crates/link/src/path.rs), Mahimahi's and a cellular
base station's alike put the propagation delay before the queue, so a packet leaves the queue at an
opportunity and reaches the receiver then (plus the hosts' microseconds). A packet sent at s and
received at r, on a path whose propagation delay is D, reached the queue at s + D and waited there
until r: over [s + D, r] the queue held it, so every opportunity of that stretch carried a packet
(FIFO: this one or one ahead of it). Over the union of those stretches (the busy periods) the
arrivals are therefore the opportunities themselves, counted in bytes as the link sends them
(1500 bytes an opportunity; our datagrams are 1464 bytes, so 61 of them fill 60 opportunities). D
is taken as the smallest one-way delay of the run: a packet that found the queue empty waited at
most one opportunity's gap, which is what this overstates D by. Between busy periods (the queue
empty) the opportunities went unused and unseen; they are filled evenly at the rate of the busy
time within FILL_WINDOW_S either side (the flow's measured rate, there: a period of n
opportunities is n - 1 gaps between them long), carrying the fraction
from one gap to the next so that many short gaps do not round their opportunities away.

Which runs. Each PIECE_S of the trace comes from the run whose bottleneck was busiest in it (a
loss-based scheme's, usually: it keeps the queue full; but on a shallow buffer its queue drains
after each loss, when another scheme's may be full), among the runs being fitted (a held-out
scheme's runs are not used, so its prediction stays a prediction). Times are the runs' own, from
the start of their flows to the run's length, and the trace loops with that period, as a Mahimahi
trace loops. A preset's trace runs on the link's clock, which both drivers start before the flows
(the emulator when it starts, the simulator by a draw of the same lead: crates/sim/src/link_clock.rs),
so the trace is written rotated by the lead's median, LINK_LEAD_MS: the flows meet the course the
data showed at their own start, within the lead's spread (±55 ms), in either driver.

What it cannot know: the capacity of the stretches no run kept busy (filled, above, at the
neighbouring rate), and, over a real path, how the capacity of one run's time differs from
another's: the trace is one course of the rate, replayed for every scheme. On our emulator's
trace paths every run starts the same trace at the same point (within the emulator's start-up,
±40 ms here), so the pieces agree; over a real path each piece is a different run's sample.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pantheon.analysis import logs
from pantheon.analysis.datadir import open_data_dir
from pantheon.calibrate.targets import CalibrationError, Target

OPPORTUNITY_BYTES = 1500
"""What one delivery opportunity carries (Mahimahi's MTU; crates/link/src/schedule.rs)."""
FILL_WINDOW_S = 1.0
"""How far either side of an idle stretch the busy time is that gives its rate: a cellular rate
changes over about a second (the T-Mobile trace's first 10 s: 3.5-8.3 Mbit/s a second)."""
MIN_BUSY_SHARE = 0.25
"""Below this share of the time busy, no run saturated the path: the arrivals say too little of
its capacity to make a trace of (a one-line error)."""
LINK_LEAD_MS = 1185
"""The median lead of the link's clock over the flows (crates/sim/src/link_clock.rs:
EMULATOR_LEAD_MIN_US + EMULATOR_LEAD_SPAN_US / 2; tests/test_calibrate_trace.py checks the two agree)."""
PIECE_S = 0.5
"""The trace is pieced together from the runs, each piece of this length from the run whose
bottleneck was busiest in it (a loss-based scheme's queue drains after each loss on a shallow
buffer; another run's may be full then)."""


@dataclass(frozen=True)
class DeliveryTrace:
    """Delivery opportunities in whole milliseconds of the link's clock, looping every `period_ms`."""
    opportunities_ms: tuple[int, ...] = field(repr=False)
    """Non-decreasing, each in [0, period_ms)."""
    period_ms: int
    source: str
    """The runs it was pieced from ("18 runs, pieces of cubic-user run 2 (14), ...")."""
    busy_share: float
    """The share of the time the pieces' bottleneck was seen busy (the rest was filled)."""

    @property
    def mean_mbps(self) -> float:
        return len(self.opportunities_ms) * OPPORTUNITY_BYTES * 8 / (self.period_ms * 1000)

    def scaled(self, scale: float) -> tuple[int, ...]:
        """A preset's `trace_ms`: the opportunities thinned or repeated to `scale` times as many,
        each kept where the rate's course puts it (the k-th of the scaled trace at the time of the
        original's ceil(k / scale)-th), then the period as the last entry (a Mahimahi trace loops
        at its last timestamp; that entry is one opportunity more a period)."""
        times = np.asarray(self.opportunities_ms, dtype=np.int64)
        count = max(1, round(times.size * scale))
        index = np.minimum(times.size, np.ceil(np.arange(1, count + 1) / scale).astype(np.int64)) - 1
        return (*times[index].tolist(), self.period_ms)

    def digest(self) -> str:
        """Names the trace in a study's name (search.Problem.name)."""
        return hashlib.sha256(np.asarray(self.opportunities_ms, dtype=np.int64).tobytes()
                              + str(self.period_ms).encode()).hexdigest()[:12]

    def summary(self) -> dict:
        return {"source": self.source, "opportunities": len(self.opportunities_ms), "period_ms": self.period_ms,
                "mean_mbps": round(self.mean_mbps, 4), "busy_share": round(self.busy_share, 4)}


@dataclass(frozen=True)
class Busy:
    """One run's bottleneck as its arrivals show it, in µs from the run's start."""
    starts_us: np.ndarray
    ends_us: np.ndarray
    """The busy periods, disjoint and in order."""
    opportunities_us: np.ndarray
    """The opportunities seen, all inside busy periods."""

    def share(self, period_us: float) -> float:
        return float(np.sum(np.minimum(self.ends_us, period_us) - np.minimum(self.starts_us, period_us))) / period_us


def busy(send_us: np.ndarray, recv_us: np.ndarray, size_bytes: np.ndarray) -> Busy:
    """The busy periods and their opportunities of one direction's deliveries (send and receive
    times, sizes; any order), the propagation delay taken as the smallest one-way delay."""
    order = np.argsort(recv_us, kind="stable")
    send_us, recv_us, size_bytes = send_us[order], recv_us[order], size_bytes[order]
    delay_us = recv_us - send_us
    present = delay_us >= 0  # a negative delay is a clock's, not the path's
    send_us, recv_us, size_bytes = send_us[present], recv_us[present], size_bytes[present]
    if not recv_us.size:
        empty = np.zeros(0, dtype=np.int64)
        return Busy(empty, empty, empty)
    enter_us = send_us + int(np.min(recv_us - send_us))
    # Union of [enter, recv]: a new period starts where a packet reached the queue after every
    # packet before it (in arrival order at the queue) had left.
    by_enter = np.argsort(enter_us, kind="stable")
    starts, ends = enter_us[by_enter], np.maximum.accumulate(recv_us[by_enter])
    new = np.concatenate(([True], starts[1:] > ends[:-1]))
    period_of = np.cumsum(new) - 1
    period_starts = starts[new]
    period_ends = np.maximum.reduceat(ends, np.flatnonzero(new))
    # Each period's bytes, counted out in opportunities: opportunity k of a period leaves with the
    # first packet whose last byte is in it or later.
    period_of_recv = np.empty_like(period_of)
    period_of_recv[by_enter] = period_of
    opportunities = []
    for p in range(period_starts.size):
        mine = period_of_recv == p
        cum = np.cumsum(size_bytes[mine])
        last = np.ceil(cum / OPPORTUNITY_BYTES).astype(np.int64) - 1
        k = np.arange(int(last[-1]) + 1)
        opportunities.append(recv_us[mine][np.searchsorted(last, k, side="left")])
    return Busy(period_starts, period_ends, np.sort(np.concatenate(opportunities)))


def filled(seen: Busy, period_us: int) -> np.ndarray:
    """The opportunities of [0, period_us): those seen, and in each idle stretch as many as the busy
    time within FILL_WINDOW_S either side delivered at its rate, evenly spaced."""
    inside = np.sort(seen.opportunities_us[(seen.opportunities_us >= 0) & (seen.opportunities_us < period_us)])
    starts = np.clip(seen.starts_us, 0, period_us)
    ends = np.clip(seen.ends_us, 0, period_us)
    gaps_start = np.concatenate(([0], ends))
    gaps_end = np.concatenate((starts, [period_us]))
    busy_us = float(np.sum(ends - starts))
    overall = max(0, inside.size - starts.size) / busy_us if busy_us else 0.0
    window = FILL_WINDOW_S * 1e6
    fills = []
    carried = 0.0
    for a, b in zip(gaps_start, gaps_end):
        if b <= a:
            continue
        low, high = max(0.0, a - window), min(float(period_us), b + window)
        busy_in = float(np.sum(np.clip(ends, low, high) - np.clip(starts, low, high)))
        # A period of n opportunities spans n - 1 gaps between them (a lone packet's, none).
        gaps_in = int(np.searchsorted(inside, high) - np.searchsorted(inside, low)) \
            - int(np.searchsorted(starts, high) - np.searchsorted(starts, low))
        rate = max(0, gaps_in) / busy_in if busy_in > 0 else overall
        carried += rate * (b - a)
        count = math.floor(carried)
        carried -= count
        if count:
            fills.append(a + (np.arange(count) + 0.5) * (b - a) / count)
    return np.sort(np.concatenate([inside.astype(np.float64), *fills]))


def composite(runs: list[tuple[str, Busy]], period_us: int) -> tuple[Busy, dict[str, int]]:
    """Each PIECE_S of [0, period_us) from the run whose bottleneck was busiest in it: its busy
    periods (cut at the piece's edges) and their opportunities. Also how many pieces each run gave."""
    piece_us = round(PIECE_S * 1e6)
    starts, ends, opportunities = [], [], []
    taken: dict[str, int] = {}
    for a in range(0, period_us, piece_us):
        b = min(period_us, a + piece_us)
        name, seen = max(runs, key=lambda run: float(np.sum(np.clip(run[1].ends_us, a, b) - np.clip(run[1].starts_us, a, b))))
        mine = (seen.ends_us >= a) & (seen.starts_us < b)
        starts.append(np.clip(seen.starts_us[mine], a, b))
        ends.append(np.clip(seen.ends_us[mine], a, b))
        opportunities.append(seen.opportunities_us[(seen.opportunities_us >= a) & (seen.opportunities_us < b)])
        taken[name] = taken.get(name, 0) + 1
    return Busy(*(np.concatenate(parts) for parts in (starts, ends, opportunities))), taken


def infer(data_dir: Path, targets: list[Target], head_start_s: float | None = None) -> DeliveryTrace:
    """The trace of `targets`' runs in `data_dir` (each PIECE_S from the run busiest in it); a
    CalibrationError when they kept the bottleneck too little busy to show its capacity."""
    data = open_data_dir(data_dir)
    origin_us = round((data.head_start_s if head_start_s is None else head_start_s) * 1e6)
    sources = {(s.label, s.number): s for s in data.runs}
    period_us = round(max(t.setting.runtime_s for t in targets) * 1e6)
    runs: list[tuple[str, Busy]] = []
    for target in targets:
        for number in target.run_numbers:
            run = sources[(target.setting.label, number)]
            if run.records is not None:
                events, _ = logs.read_records(run.records)
            elif run.datalink is not None:
                events, _ = logs.read_text_log(run.datalink)
            else:
                continue
            recv_us = events.recv_t_us - origin_us
            runs.append((f"{run.label} run {number}", busy(recv_us - events.delay_us, recv_us, events.recv_bytes)))
    if not runs:
        raise CalibrationError("--model trace: no run has records of its packets to infer a trace from")
    seen, taken = composite(runs, period_us)
    share = seen.share(period_us)
    if share < MIN_BUSY_SHARE:
        raise CalibrationError(f"--model trace: the runs kept the bottleneck busy {100 * share:.0f}% of the time "
                               f"(under {100 * MIN_BUSY_SHARE:.0f}%), so their arrivals do not show the path's "
                               "capacity; use --model five")
    period_ms = max(1, round(period_us / 1000))
    flows_ms = np.minimum(np.floor(filled(seen, period_us) / 1000).astype(np.int64), period_ms - 1)
    ms = np.sort((flows_ms + LINK_LEAD_MS) % period_ms)
    if not ms.size:
        raise CalibrationError("--model trace: the runs delivered nothing to infer a trace from")
    pieces = sorted(taken.items(), key=lambda item: -item[1])
    source = ", ".join(f"{name} ({count})" for name, count in pieces[:3]) + (", ..." if len(pieces) > 3 else "")
    return DeliveryTrace(tuple(ms.tolist()), period_ms, f"{len(runs)} runs, pieces of {source}", share)
