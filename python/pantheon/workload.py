"""Traffic models of a scenario's `[[workload]]` tables, drawn once with a seed so that the
emulator and the simulator run the same arrivals (docs/harness.md, "Workloads").

- **Flow sizes from an empirical CDF.** A CDF is a list of (size in bytes, cumulative
  probability) points, non-decreasing in both, its last probability 1; a size is drawn by
  inverting it with linear interpolation between points (as pFabric's and HPCC's simulations
  draw them: Alizadeh et al., "pFabric", SIGCOMM 2013, §5; Li et al., "HPCC", SIGCOMM 2019, §5).
  A first point with a probability above 0 is an atom: that share of flows has exactly that size.
  Two are shipped, in workloads/ beside this repository's presets:
  - `websearch`: the web search workload of Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM
    2010, Fig. 4 (query and background flows of a production search cluster), as pFabric
    tabulated it in 1460-byte packets; 8.8 kB to 29 MB, mean 1.7 MB.
  - `datamining`: the data-mining workload of Greenberg et al., "VL2: A Scalable and Flexible
    Data Center Network", SIGCOMM 2009, Fig. 2, as pFabric tabulated it; half the flows are one
    packet, the largest 1 GB, mean 7.4 MB.
  Both are datacenter workloads: over a 12 Mbit/s path their largest flows last minutes.
- **Poisson arrivals at a load.** Transfers arrive as a Poisson process of rate
  λ = load · rate / (8 · E[size]), so that on average they offer `load` of the bottleneck's
  rate in transfer bytes, the bytes a receiver gets. pantheon-udp delivers ⌈size / 1464⌉
  datagrams of 1464 bytes, the unit the analysis counts, so it carries half a datagram a transfer
  more on average: 3.7% more for 20 kB transfers, nothing to speak of for the shipped CDFs'
  megabytes. Gaps are exponential (the process is memoryless), sizes independent of them.
- **On/off.** mm-onoff's and Remy's model (Winstein & Balakrishnan, "TCP ex Machina", SIGCOMM
  2013, §4.1: senders "on" for an exponentially distributed time, then "off"): alternating on and
  off periods, each exponential with its mean or fixed; each on period is a bulk flow of its own,
  starting afresh as a new connection does.

Everything here is pure: numbers in, numbers out, a `random.Random` given by the caller.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

from pantheon import files
from pantheon.repository import ROOT

SIZES_DIR = ROOT / "workloads"
"""The shipped size distributions, `NAME.cdf`."""
MAX_CDF_BYTES = 1 << 20
"""A CDF of a few hundred points is a few kB; a bigger file is not one."""
MAX_TRANSFER_BYTES = 1 << 40
"""A terabyte: larger sizes are a unit mistake."""


class WorkloadError(ValueError):
    """A workload's parameters or size file are not usable; the message says what (the caller adds
    where)."""


@dataclass(frozen=True)
class SizeCdf:
    """An empirical distribution of transfer sizes: `points` are (bytes, cumulative probability)."""

    name: str
    points: tuple[tuple[float, float], ...]

    def mean_bytes(self) -> float:
        """E[size] of the piecewise-linear CDF: the atom at the first point, then each segment's
        midpoint weighted by its probability."""
        first_bytes, first_p = self.points[0]
        total = first_bytes * first_p
        for (x0, p0), (x1, p1) in zip(self.points, self.points[1:]):
            total += (x0 + x1) / 2 * (p1 - p0)
        return total

    def draw(self, rng: random.Random) -> int:
        """One size, in whole bytes (at least 1), by inverse transform sampling."""
        u = rng.random()
        x0, p0 = self.points[0]
        if u <= p0:
            return max(1, round(x0))
        for x1, p1 in self.points[1:]:
            if u <= p1:
                size = x0 if p1 == p0 else x0 + (x1 - x0) * (u - p0) / (p1 - p0)
                return max(1, round(size))
            x0, p0 = x1, p1
        return max(1, round(self.points[-1][0]))


def parse_cdf(text: str, name: str) -> SizeCdf:
    """A CDF file: one point per line, `bytes probability` (spaces or a comma between), `#`
    comments and blank lines ignored. A WorkloadError names the line that is wrong."""
    points: list[tuple[float, float]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].replace(",", " ").strip()
        if not line:
            continue
        fields = line.split()
        try:
            size, p = (float(v) for v in fields) if len(fields) == 2 else (math.nan, math.nan)
        except ValueError:
            size = p = math.nan
        if not (math.isfinite(size) and math.isfinite(p)):
            raise WorkloadError(f"line {number}: expected 'bytes probability', got '{line}'")
        if not 0 < size <= MAX_TRANSFER_BYTES:
            raise WorkloadError(f"line {number}: a size must be > 0 and at most {MAX_TRANSFER_BYTES} bytes, got {size:g}")
        if not 0 <= p <= 1:
            raise WorkloadError(f"line {number}: a probability must be in [0, 1], got {p:g}")
        if points and (size < points[-1][0] or p < points[-1][1]):
            raise WorkloadError(f"line {number}: not a CDF: sizes and probabilities must not decrease "
                                f"({points[-1][0]:g} {points[-1][1]:g} then {size:g} {p:g})")
        points.append((size, p))
    if not points:
        raise WorkloadError("no points: expected lines of 'bytes probability'")
    if points[-1][1] != 1:
        raise WorkloadError(f"not a CDF: its last probability must be 1, got {points[-1][1]:g}")
    return SizeCdf(name, tuple(points))


def shipped_sizes() -> list[str]:
    return sorted(p.stem for p in SIZES_DIR.glob("*.cdf"))


def load_sizes(sizes: str, relative_to: Path) -> SizeCdf:
    """A shipped CDF by name (`websearch`), or a CDF file's path (relative to `relative_to`, the
    scenario's directory)."""
    shipped = SIZES_DIR / f"{sizes}.cdf"
    path = shipped if "/" not in sizes and shipped.is_file() else relative_to / sizes
    try:
        text = files.read_small_text(path, MAX_CDF_BYTES)
    except FileNotFoundError:
        raise WorkloadError(f"'{sizes}' is neither a shipped size distribution ({', '.join(shipped_sizes())}) "
                            f"nor a file ({path})") from None
    except (OSError, ValueError) as e:
        raise WorkloadError(f"cannot read the size distribution {path}: {getattr(e, 'strerror', None) or e}") from None
    try:
        return parse_cdf(text, sizes)
    except WorkloadError as e:
        raise WorkloadError(f"{path}: {e}") from None


def poisson_arrivals(rng: random.Random, sizes: SizeCdf, load: float, rate_mbps: float, start_s: float,
                     duration_s: float) -> list[tuple[float, int]]:
    """(start_s, bytes) of each transfer arriving in [start_s, start_s + duration_s), Poisson at
    `load` of `rate_mbps` in transfer bytes."""
    per_s = load * rate_mbps * 1e6 / (8 * sizes.mean_bytes())
    arrivals = []
    t_s = start_s + rng.expovariate(per_s)
    while t_s < start_s + duration_s:
        arrivals.append((t_s, sizes.draw(rng)))
        t_s += rng.expovariate(per_s)
    return arrivals


def expected_arrivals(sizes: SizeCdf, load: float, rate_mbps: float, duration_s: float) -> float:
    """The mean number of arrivals `poisson_arrivals` draws."""
    return load * rate_mbps * 1e6 / (8 * sizes.mean_bytes()) * duration_s


def on_periods(rng: random.Random, on_s: float, off_s: float, exponential: bool, start_s: float,
               duration_s: float) -> list[tuple[float, float]]:
    """(start_s, duration_s) of each on period in [start_s, start_s + duration_s), starting on;
    with `exponential` each period's length is drawn with its mean, otherwise fixed."""
    def length(mean_s: float) -> float:
        return rng.expovariate(1 / mean_s) if exponential else mean_s

    periods = []
    t_s, end_s = start_s, start_s + duration_s
    while t_s < end_s:
        on = min(length(on_s), end_s - t_s)
        if on > 0:
            periods.append((t_s, on))
        t_s += on + length(off_s)
    return periods


def peak_arrivals_per_s(starts_s: list[float]) -> int:
    """The most arrivals within any one second (a sliding window over the sorted starts)."""
    ordered = sorted(starts_s)
    peak, first = 0, 0
    for last, t_s in enumerate(ordered):
        while ordered[first] <= t_s - 1.0:
            first += 1
        peak = max(peak, last - first + 1)
    return peak
