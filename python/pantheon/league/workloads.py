"""Workload cells of a league: the scheme carrying a stream of finite transfers instead of a bulk
flow (the flows kind `workload:SIZES@LOAD`, docs/league.md), and their score.

The transfers arrive as a Poisson process offering LOAD of the link's mean rate in transfer bytes,
their sizes drawn from the shipped size distribution SIZES (`websearch`, `datamining`:
pantheon.workload, as the scenarios' `[[workload]]` tables draw them), all run by the scheme, each
a sender of its own from its arrival (a new connection's slow start every time). The draw is the
workload's, the link rate's, the run length's and the seed's alone (a generator seeded with them),
so every scheme of a league meets the same transfers in a cell, and so do the cells that differ
only in their buffer, queue or loss.

The score of a workload run is how fast its transfers completed against the empty path: the mean
over its transfers of ideal FCT / FCT (analysis/transfers.py: the transfer alone on the empty path,
no handshake, as pantheon-udp has none), 1 if every one took its ideal time, 0 for one that did
not complete. Only the transfers that could have completed are counted: those whose ideal FCT ends
before the run does. A mean of 1/slowdown rather than a slowdown's percentile: it is bounded like
every other score (1 the ideal), and one transfer that never completes costs its share, where a
percentile would hide it. The table also has the completed transfers' slowdown p50 and p99
(nearest rank, as the analysis reports them by size: HPCC, SIGCOMM 2019, §5) and the share that
completed.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pantheon import workload
from pantheon.analysis.metrics import nearest_rank
from pantheon.analysis.transfers import DATAGRAMS, ideal_fct_ms
from pantheon.sim.batch import TransferResult, TransferSpec

KIND = "workload:"
MAX_LOAD = 0.99
MIN_EXPECTED_ARRIVALS = 10.0
"""A cell must expect at least this many transfers in a run: fewer say little, and a draw of none
(e^-10 at ten) would leave nothing to score."""


@dataclass(frozen=True)
class Workload:
    sizes: str
    load: float

    def arrivals(self, key: str, rate_mbps: float, duration_s: float) -> tuple[TransferSpec, ...]:
        """The transfers of a run over the run: the first non-empty draw of the generator seeded
        with `key` (a Python `random.Random` seeded with a string is the same on every machine and
        version)."""
        rng = random.Random(key)
        sizes = workload.load_sizes(self.sizes, workload.SIZES_DIR)
        while not (drawn := workload.poisson_arrivals(rng, sizes, self.load, rate_mbps, 0.0, duration_s)):
            pass
        return tuple(TransferSpec(start_s, size) for start_s, size in drawn)


def parse(kind: str) -> Workload | None:
    """The workload a flows kind names (`workload:websearch@0.5`), None for another kind; a
    ValueError saying what is wrong with a `workload:` kind."""
    if not kind.startswith(KIND):
        return None
    sizes, _, load_text = kind[len(KIND):].partition("@")
    if sizes not in workload.shipped_sizes():
        raise ValueError(f"{kind!r}: sizes {sizes!r} is not one of {', '.join(workload.shipped_sizes())} "
                         "(workload:SIZES@LOAD)")
    try:
        load = float(load_text)
    except ValueError:
        raise ValueError(f"{kind!r}: the load must be a number, e.g. workload:{sizes}@0.5") from None
    if not 0 < load <= MAX_LOAD:
        raise ValueError(f"{kind!r}: the load must be above 0 and at most {MAX_LOAD:g} of the link's rate")
    return Workload(sizes, load)


def expected_arrivals(w: Workload, rate_mbps: float, duration_s: float) -> float:
    return workload.expected_arrivals(workload.load_sizes(w.sizes, workload.SIZES_DIR), w.load, rate_mbps, duration_s)


def metrics(transfers: Sequence[TransferResult], rate_mbps: float, one_way_delay_ms: float,
            duration_s: float) -> dict[str, float | int | None]:
    """A workload run's score and transfer columns (module header)."""
    ideal = np.array([ideal_fct_ms(t.size_bytes, DATAGRAMS, rate_mbps, one_way_delay_ms) for t in transfers])
    fct = np.array([np.nan if t.fct_ms is None else t.fct_ms for t in transfers])
    starts_ms = np.array([t.start_us / 1000 for t in transfers])
    counted = starts_ms + ideal <= duration_s * 1000
    done = counted & np.isfinite(fct)
    speed = np.where(done, ideal / np.where(done, fct, 1.0), 0.0)
    slowdown = np.sort(fct[done] / ideal[done])
    return {
        "transfers": int(counted.sum()),
        "completed": float(done.sum() / counted.sum()) if counted.any() else None,
        "slowdown_p50": nearest_rank(slowdown, 50) if slowdown.size else None,
        "slowdown_p99": nearest_rank(slowdown, 99) if slowdown.size else None,
        "score": float(speed[counted].mean()) if counted.any() else None,
    }
