"""Networks drawn from a prior, and each one as a simulator job: the dumbbell of TCP ex Machina
(Winstein & Balakrishnan, SIGCOMM 2013, §3.1 and Figure 1): n senders share one bottleneck link
of rate r and a propagation round trip of `min_rtt_ms`, each sender switching on and off.

The draw follows Remy's evaluator (its 2014 code, which trained the learnability paper's RemyCCs):
the first networks are the prior's four "anchors" — the lowest and highest rate, each with the
lowest and highest RTT, every sender present — then networks drawn at random, each quantity
uniformly and independently (the rate log-uniformly where the prior asks). A sender starts off;
its off and on times are exponential with the prior's means, and each on-period is a flow of its
own in the job, so each starts a fresh controller, as Remy's sender is reset when it switches on
(its simulator's switched sender: each on-period is a new flow).

Deterministic: the same prior, seed and draw number give the same networks (numpy's PCG64 from a
SeedSequence of (seed, draw)), and each network its own simulator seed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pantheon.remy.prior import Prior, Range
from pantheon.sim.batch import FlowSpec, Job, link_options

PACKET_BYTES = 1464
"""The simulator's datagram (pantheon.sim.batch): a BDP in bytes is counted in these."""
ANCHORS = 4


@dataclass(frozen=True)
class OnPeriod:
    """One sender's time on: a flow of the job, from `start_s` for `duration_s`."""
    sender: int
    start_s: float
    duration_s: float


@dataclass(frozen=True)
class Network:
    rate_mbps: float
    min_rtt_ms: float
    buffer_bytes: int | None
    """The bottleneck's DropTail buffer; None: infinite."""
    senders: int
    on_periods: tuple[OnPeriod, ...]
    """Every sender's on-periods in order of start (ties by sender)."""
    runtime_s: float
    seed: int
    """The simulator's seed for this network."""

    def job(self, cc: str) -> Job:
        """This network in the simulator, every on-period a flow running controller `cc`. Each
        direction's one-way delay is half the RTT; acknowledgements return at the link's rate
        (an ack is small: the downlink never queues them behind data)."""
        flows = [FlowSpec(cc, p.start_s, p.duration_s) for p in self.on_periods]
        path = link_options(rate_mbps=self.rate_mbps, delay_ms=self.min_rtt_ms / 2, queue_bytes=self.buffer_bytes)
        return Job(flows, path, runtime_s=self.runtime_s, seed=self.seed)

    def describe(self) -> str:
        buffer = "infinite buffer" if self.buffer_bytes is None else f"{self.buffer_bytes} B buffer"
        return (f"{self.rate_mbps:.2f} Mbit/s, {self.min_rtt_ms:.0f} ms RTT, {buffer}, {self.senders} senders, "
                f"{len(self.on_periods)} on-periods")


def _uniform(rng: np.random.Generator, r: Range) -> float:
    return r.lo if r.lo == r.hi else float(rng.uniform(r.lo, r.hi))


def _rate(rng: np.random.Generator, prior: Prior) -> float:
    if prior.rate_draw == "log-uniform" and prior.rate_mbps.lo < prior.rate_mbps.hi:
        return float(math.exp(rng.uniform(math.log(prior.rate_mbps.lo), math.log(prior.rate_mbps.hi))))
    return _uniform(rng, prior.rate_mbps)


def _buffer_bytes(rng: np.random.Generator, prior: Prior, rate_mbps: float, rtt_ms: float) -> int | None:
    if prior.buffer_bytes is not None:
        return max(PACKET_BYTES, round(_uniform(rng, prior.buffer_bytes)))
    if prior.buffer_bdp is not None:
        bdp_bytes = rate_mbps * 1e6 / 8 * rtt_ms / 1e3
        return max(PACKET_BYTES, round(_uniform(rng, prior.buffer_bdp) * bdp_bytes))
    return None


def on_periods(rng: np.random.Generator, senders: int, mean_on_s: float, mean_off_s: float,
               runtime_s: float) -> tuple[OnPeriod, ...]:
    """Each sender's on-periods within [0, runtime_s): off first, then on and off alternately,
    exponential times of the given means; an on-period the run's end cuts is cut there."""
    periods = []
    for sender in range(senders):
        t = float(rng.exponential(mean_off_s))
        while t < runtime_s:
            on_s = float(rng.exponential(mean_on_s))
            periods.append(OnPeriod(sender, t, min(on_s, runtime_s - t)))
            t += on_s + float(rng.exponential(mean_off_s))
    return tuple(sorted(periods, key=lambda p: (p.start_s, p.sender)))


def draw(prior: Prior, count: int, seed: int, draw_number: int = 0) -> list[Network]:
    """`count` networks of `prior`: the anchors first (as many of the four as `count` allows),
    then random ones; the same arguments give the same networks."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, draw_number]))
    networks = []
    for i in range(count):
        if i < ANCHORS:
            rate = prior.rate_mbps.lo if i < 2 else prior.rate_mbps.hi
            rtt = prior.min_rtt_ms.lo if i % 2 == 0 else prior.min_rtt_ms.hi
            senders = prior.senders[1]
        else:
            rate, rtt = _rate(rng, prior), _uniform(rng, prior.min_rtt_ms)
            senders = int(rng.integers(prior.senders[0], prior.senders[1], endpoint=True))
        buffer = _buffer_bytes(rng, prior, rate, rtt)
        periods = on_periods(rng, senders, prior.mean_on_s, prior.mean_off_s, prior.runtime_s)
        networks.append(Network(rate, rtt, buffer, senders, periods, prior.runtime_s,
                                seed=int(rng.integers(0, 2**31))))
    return networks
