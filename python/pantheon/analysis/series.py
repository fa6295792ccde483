"""Metrics over time, in bins (the original Pantheon's plots used 500 ms bins; Yan et al., ATC
2018, §3.2): bin k holds the events with k·bin ≤ t < (k+1)·bin, t in µs since the run's start.

Per flow: the ingress rate (bits sent in the bin / bin length), the throughput (bits delivered in
the bin / bin length), and the delay of the packets delivered in the bin (mean and 95th percentile
by nearest rank, NaN where none was delivered). For the link: capacity per bin from its delivery
opportunities. All series share one range of bins, from the first bin with any event to the last.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pantheon.analysis import DEFAULT_BIN_MS
from pantheon.analysis.events import LinkEvents


@dataclass
class Series:
    bin_ms: float
    start_s: np.ndarray
    """Start of each bin, s since the run's start."""
    ingress_mbps: dict[int, np.ndarray]
    throughput_mbps: dict[int, np.ndarray]
    delay_mean_ms: dict[int, np.ndarray]
    delay_p95_ms: dict[int, np.ndarray]
    capacity_mbps: np.ndarray | None


def _per_bin_p95(bins: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    """Nearest-rank 95th percentile of the values in each bin (NaN where a bin is empty)."""
    out = np.full(count, np.nan)
    if bins.size == 0:
        return out
    order = np.lexsort((values, bins))
    sorted_bins, sorted_values = bins[order], values[order]
    first = np.searchsorted(sorted_bins, np.arange(count), side="left")
    n = np.searchsorted(sorted_bins, np.arange(count), side="right") - first
    filled = n > 0
    rank = (95 * n[filled] + 99) // 100  # ceil(0.95·n) in integers
    out[filled] = sorted_values[first[filled] + rank - 1]
    return out


def binned(events: LinkEvents, bin_ms: float = DEFAULT_BIN_MS) -> Series:
    bin_us = bin_ms * 1000.0
    times = [events.send_t_us, events.recv_t_us]
    if events.opportunity_t_us is not None:
        times.append(events.opportunity_t_us)
    nonempty = [t for t in times if t.size]
    if not nonempty:
        return Series(bin_ms, np.zeros(0), {}, {}, {}, {}, None)
    first_bin = math.floor(min(t.min() for t in nonempty) / bin_us)
    last_bin = math.floor(max(t.max() for t in nonempty) / bin_us)
    count = last_bin - first_bin + 1
    index = lambda t_us: (np.floor(t_us / bin_us) - first_bin).astype(np.int64)  # noqa: E731
    per_bin_mbps = lambda t_us, size: np.bincount(index(t_us), weights=size * 8.0, minlength=count) / bin_us  # noqa: E731
    series = Series(bin_ms, (first_bin + np.arange(count)) * bin_ms / 1000.0, {}, {}, {}, {}, None)
    delay_ms = events.delay_us / 1000.0
    for flow in events.flows:
        sent, recv = events.send_flow == flow, events.recv_flow == flow
        series.ingress_mbps[flow] = per_bin_mbps(events.send_t_us[sent], events.send_bytes[sent])
        series.throughput_mbps[flow] = per_bin_mbps(events.recv_t_us[recv], events.recv_bytes[recv])
        sound = recv & (events.delay_us >= 0)
        bins = index(events.recv_t_us[sound])
        n = np.bincount(bins, minlength=count)
        with np.errstate(invalid="ignore", divide="ignore"):
            series.delay_mean_ms[flow] = np.bincount(bins, weights=delay_ms[sound], minlength=count) / np.where(n, n, np.nan)
        series.delay_p95_ms[flow] = _per_bin_p95(bins, delay_ms[sound], count)
    if events.opportunity_t_us is not None and events.opportunity_t_us.size:
        series.capacity_mbps = per_bin_mbps(events.opportunity_t_us, events.opportunity_bytes)
    return series
