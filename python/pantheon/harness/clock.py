"""The peer's clock against ours, measured over the path under test (issue 16 §2).

One-way delay needs both tunnel endpoints' clocks on one timeline. The original Pantheon asked a
third-party NTP server once per host per run and got negative delays whenever that server's error
exceeded the path's delay (StanfordSNR/pantheon#71). Here the two endpoints time each other
directly, and the estimate comes with an error bound that the report prints beside every delay.

Exchanges. Each endpoint sends probes and logs the four timestamps of each exchange it initiated
(docs/tunnel.md, `--clock-log`): t1 probe sent and t4 answer received on its own clock, t2 probe
received and t3 answer sent on the other's. RFC 5905 §8's on-wire arithmetic gives the offset
θ = ((t2 − t1) + (t3 − t4)) / 2 (responder's clock minus initiator's) and the round-trip delay
δ = (t4 − t1) − (t3 − t2). Whatever the split of δ into its two one-way parts, the true offset at
that moment lies within θ ± δ/2. An exchange the peer initiated gives the same with the roles
swapped: its θ is ours minus the peer's, so it enters with the sign changed, at local time
(t2 + t3)/2; one we initiated sits at (t1 + t4)/2. (A path's asymmetry biases both directions
the same way — it cannot be seen from the endpoints — and δ/2 covers it.)

Filtering. Queueing only ever adds delay, and an exchange's offset error is at most half its
delay, so the exchanges with the least delay are the accurate ones: RFC 5905 §10's clock filter
keeps, of the last eight exchanges, the one of least delay. NTP's filter slides over the last
eight because it runs for ever and must follow a path that changes; a run lasts a minute, and
during it the experiment's own flows fill the path's queue, so every exchange then may wait in it (and one direction's queue biases
the offset by half its wait). We therefore keep the exchanges within a margin of the least delay
of the whole log: KEEP_MARGIN_US, about timestamping noise, so exchanges as good as the minimum
steady the fit at a cost of at most half the margin in the bound (below). The kept exchanges must
bracket the run, or the fit's drift would be extrapolated: the least-delay exchange of the first
and of the last window of WINDOW_US (or of half the log, if it is shorter) is kept too, whatever
its delay — the exchanges before the run starts and after its flows stop, when the path is idle;
a slow one among them widens the bound by half its excess delay, as it should.

Fit. Clocks run at slightly different rates (5–30 µs/s is typical: Geng et al., "Exploiting a
natural network effect for scalable, fine-grained clock synchronization" (Huygens), NSDI 2018),
up to ~1 ms over a 30 s run, so the offset is fitted as a line in local time by least squares:
offset(t) = offset_us + drift · (t − t_ref_us), t_ref_us the mean local time of the kept exchanges.

Error bound, in the spirit of OWAMP's per-timestamp error estimate (RFC 4656 §4.1.2). At each kept
exchange i, |line(t_i) − truth(t_i)| ≤ |line(t_i) − θ_i| + δ_i/2 = min_rtt/2 + r_i with
r_i = |line(t_i) − θ_i| + (δ_i − min_rtt)/2. residual_us is the largest r_i, and the bound is
min_rtt_us/2 + residual_us. If the peer's offset really is a line, the difference between it and
the fit is a line too, so a bound that holds at the first and the last kept exchange holds at every
time between them: the exchanges before and after a run bracket it.

Steps. A clock that is stepped mid-run (ntpd steps a clock that is off by more than its step
threshold, 125 ms in RFC 5905; an administrator may step one at any time) is not a line. The kept offsets are fitted
again as two pieces with a common drift, split where the squared error is least; if the pieces'
offsets differ by more than twice the two-piece fit's own bound — without a step both pieces lie
within their bound of one line, so they cannot differ by more — the step is reported in `step`.
The one line is still what maps times (its residual, and so the bound, grows with the step), and
the harness flags the run rather than silently fitting across the step.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from pantheon.errors import PantheonError

WINDOW_US = 2_000_000
"""The first and last windows, each of which keeps its least-delay exchange: the tunnel's fast
probing at connection (every 50 ms for 2 s), and eight exchanges at its slow rate at the end."""
KEEP_MARGIN_US = 100
"""Exchanges within this much of the least delay are kept: about user-space timestamping noise,
so the bound grows by at most 50 µs for them."""
MIN_EXCHANGES = 4
"""Fewer usable exchanges than this cannot give a line and a residual worth a bound."""
MIN_PIECE = 3
"""Kept exchanges on each side of a candidate step: a piece of fewer has no offset to compare."""


class ClockError(PantheonError):
    """The clock logs cannot give a fit: missing, malformed, or too few usable exchanges."""


@dataclass(frozen=True)
class Exchange:
    """One completed exchange, as its initiator logged it; µs since the Unix epoch."""
    t1_us: int
    """Probe sent, on the initiator's clock."""
    t2_us: int
    """Probe received, on the responder's clock."""
    t3_us: int
    """Answer sent, on the responder's clock."""
    t4_us: int
    """Answer received, on the initiator's clock."""


def read_clock_log(path: Path) -> list[Exchange]:
    """The exchanges of a tunnel endpoint's --clock-log. A last line cut short (the endpoint was
    killed while writing it) is skipped; any other malformed line is an error."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise ClockError(f"{path}: cannot read the clock log ({e.strerror})") from None
    body = [(n, line) for n, line in enumerate(lines, 1) if line.strip() and not line.startswith("#")]
    exchanges = []
    for i, (n, line) in enumerate(body):
        fields = line.split()
        if len(fields) != 4 or not all(f.isdigit() for f in fields):
            if i == len(body) - 1:
                break
            raise ClockError(f"{path}:{n}: not an exchange ('t1_us t2_us t3_us t4_us'): {line.strip()!r}")
        exchanges.append(Exchange(*(int(f) for f in fields)))
    return exchanges


@dataclass(frozen=True)
class ClockFit:
    """The peer's clock as a line in ours, and how far a mapped time may be off."""
    t_ref_us: int
    """Local-clock epoch µs the fit is anchored at (the mean local time of the kept exchanges)."""
    offset_us: float
    """Peer clock minus local clock at t_ref_us, µs."""
    drift_us_per_s: float
    """d(offset)/dt, µs per second of local clock."""
    exchanges: int
    """Exchanges seen, both directions."""
    kept: int
    """Exchanges the fit used (within the margin of the least delay)."""
    min_rtt_us: int
    """Least round-trip delay of the exchanges kept, µs."""
    residual_us: float
    """Largest distance, beyond half the min RTT, of a kept exchange's offset interval from the line, µs."""
    bound_us: float
    """Error bound on a mapped time: min_rtt_us / 2 + residual_us, µs."""
    step: dict | None
    """A clock step detected mid-run: {"at_us": local epoch µs, "size_us": peer's jump}; None if none."""

    def _drift(self) -> float:
        return self.drift_us_per_s / 1e6

    def local_to_peer_us(self, t_local_us: int) -> int:
        return t_local_us + round(self.offset_us + self._drift() * (t_local_us - self.t_ref_us))

    def peer_to_local_us(self, t_peer_us: int) -> int:
        # peer = local + offset + drift·(local − t_ref), solved for local
        return self.t_ref_us + round((t_peer_us - self.t_ref_us - self.offset_us) / (1 + self._drift()))

    def to_json(self) -> dict:
        return asdict(self)


def _samples(local_initiated: Sequence[Exchange], peer_initiated: Sequence[Exchange]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(local time, peer-minus-local offset, round-trip delay) of each usable exchange, µs, by local time.
    An exchange whose timestamps run backwards on either clock is not usable."""
    t, offset, delay = [], [], []
    for exchanges, sign in ((local_initiated, 1), (peer_initiated, -1)):
        for e in exchanges:
            if e.t4_us < e.t1_us or e.t3_us < e.t2_us or (e.t4_us - e.t1_us) < (e.t3_us - e.t2_us):
                continue
            offset.append(sign * ((e.t2_us - e.t1_us) + (e.t3_us - e.t4_us)) / 2)
            delay.append((e.t4_us - e.t1_us) - (e.t3_us - e.t2_us))
            t.append((e.t1_us + e.t4_us) // 2 if sign > 0 else (e.t2_us + e.t3_us) // 2)
    order = np.argsort(np.asarray(t, dtype=np.int64), kind="stable")
    return (np.asarray(t, dtype=np.int64)[order], np.asarray(offset, dtype=np.float64)[order],
            np.asarray(delay, dtype=np.int64)[order])


def _keep(t_us: np.ndarray, delay_us: np.ndarray) -> np.ndarray:
    """Indices of the exchanges kept (see the module's header): those within the margin of the
    least delay, and the least-delay exchange of the first and of the last window."""
    # At most half the span each, the first open at its end: the two never share an exchange,
    # so at least two are kept, at two times.
    window_us = min(WINDOW_US, (t_us[-1] - t_us[0]) / 2)
    keep = delay_us <= delay_us.min() + KEEP_MARGIN_US
    for window in (np.flatnonzero(t_us - t_us[0] < window_us), np.flatnonzero(t_us[-1] - t_us <= window_us)):
        keep[window[np.argmin(delay_us[window])]] = True
    return np.flatnonzero(keep)


def _line_fit(offset_us: np.ndarray, delay_us: np.ndarray, design: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Least-squares coefficients of offset on the design matrix, the residual as the module's
    header defines it, and the squared error."""
    coef, *_ = np.linalg.lstsq(design, offset_us, rcond=None)
    misfit = offset_us - design @ coef
    residual = float(np.max(np.abs(misfit) + (delay_us - delay_us.min()) / 2))
    return coef, residual, float(misfit @ misfit)


def _step(x_s: np.ndarray, offset_us: np.ndarray, delay_us: np.ndarray, t_us: np.ndarray) -> dict | None:
    """The largest change point of the kept offsets, if it is larger than twice the bound of the
    two-piece fit (see the header); None otherwise."""
    best = None
    for split in range(MIN_PIECE, x_s.size - MIN_PIECE + 1):
        after = (np.arange(x_s.size) >= split).astype(np.float64)
        design = np.column_stack([np.ones_like(x_s), x_s, after])
        coef, residual, sse = _line_fit(offset_us, delay_us, design)
        if best is None or sse < best[0]:
            best = (sse, split, float(coef[2]), residual)
    if best is None:
        return None
    _, split, size_us, residual = best
    if abs(size_us) <= 2 * (delay_us.min() / 2 + residual):
        return None
    return {"at_us": int((t_us[split - 1] + t_us[split]) // 2), "size_us": size_us}


def fit(local_initiated: Sequence[Exchange], peer_initiated: Sequence[Exchange] = ()) -> ClockFit:
    """The peer's clock against the local one from both endpoints' clock logs: local_initiated is
    the local endpoint's log, peer_initiated the remote endpoint's."""
    seen = len(local_initiated) + len(peer_initiated)
    t_us, offset_us, delay_us = _samples(local_initiated, peer_initiated)
    if t_us.size < MIN_EXCHANGES:
        raise ClockError(f"only {t_us.size} usable clock exchanges of {seen} (at least {MIN_EXCHANGES} are needed): "
                         "the tunnel endpoints did not stay connected long enough to time each other")
    if t_us[-1] == t_us[0]:
        raise ClockError(f"the {t_us.size} clock exchanges all happened at one instant: no drift can be fitted")
    kept = _keep(t_us, delay_us)
    t_us, offset_us, delay_us = t_us[kept], offset_us[kept], delay_us[kept]
    t_ref_us = int(round(float(np.mean(t_us - t_us[0])))) + int(t_us[0])
    x_s = (t_us - t_ref_us) / 1e6
    coef, residual, _ = _line_fit(offset_us, delay_us, np.column_stack([np.ones_like(x_s), x_s]))
    min_rtt_us = int(delay_us.min())
    return ClockFit(
        t_ref_us=t_ref_us, offset_us=float(coef[0]), drift_us_per_s=float(coef[1]), exchanges=seen, kept=int(kept.size),
        min_rtt_us=min_rtt_us, residual_us=residual, bound_us=min_rtt_us / 2 + residual,
        step=_step(x_s, offset_us, delay_us, t_us),
    )


@dataclass(frozen=True)
class PeerClock:
    """The fit of a run, and which endpoint's logs are on the peer's clock."""
    fit: ClockFit
    remote_side: str
    """"sender" or "receiver": the endpoint on the remote host."""
