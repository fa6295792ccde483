"""Rewards over one decision interval, from what the interval did (`StepStats`). The default is the
paper's: Indigo's oracle picks the window that maximises log(throughput) − log(delay) (Yan et al.,
USENIX ATC 2018, §6), the objective Copa also maximises with a weight δ on the delay term (Arun and
Balakrishnan, NSDI 2018, §2: U = log λ − δ·log d). Aurora's linear reward is the other common
choice (Jay et al., ICML 2019, §4: 10·throughput − 1000·latency − 2000·loss, with throughput in
packets per second and latency in seconds). Any callable from `StepStats` to a float will do.

Throughput is what the receiver got in the interval; delay the mean one-way delay of the datagrams
delivered in it (Pantheon's per-packet delay, docs/analysis.md), the last such mean when the
interval delivered nothing, 0 before the first delivery; loss the share of the datagrams that
ended in the interval (delivered or dropped) that the path dropped.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pantheon.errors import PantheonError


@dataclass(slots=True)
class StepStats:
    throughput_mbps: float
    delay_ms: float
    """Mean one-way delay of the interval's deliveries (see the module's note; 0 before any)."""
    loss_rate: float
    cwnd_packets: float
    """The window the interval ran under."""
    delivered_packets: int
    sent_packets: int
    step_ms: float


Reward = Callable[[StepStats], float]

THROUGHPUT_FLOOR_MBPS = 0.01
"""log(0) is −∞: an interval that delivered nothing scores as if it delivered 10 kbit/s."""
DELAY_FLOOR_MS = 1.0
"""Below 1 ms, log(delay) would reward the last microseconds more than a whole throughput doubling."""
PACKET_BITS = 1464 * 8
"""A datagram inside the tunnel (crates/cc/src/flow/datagram.rs), for packets per second."""


@dataclass(frozen=True)
class LogReward:
    """log(throughput / Mbit/s) − delay_weight · log(delay / ms), floored as the constants say."""
    delay_weight: float = 1.0

    def __call__(self, s: StepStats) -> float:
        delay_ms = max(s.delay_ms, DELAY_FLOOR_MS)
        return math.log(max(s.throughput_mbps, THROUGHPUT_FLOOR_MBPS)) - self.delay_weight * math.log(delay_ms)


def aurora(s: StepStats) -> float:
    """Aurora's 10·throughput (packets/s) − 1000·delay (s) − 2000·loss; the delay here is one-way."""
    return 10 * s.throughput_mbps * 1e6 / PACKET_BITS - 1000 * s.delay_ms / 1e3 - 2000 * s.loss_rate


REWARDS: dict[str, Reward] = {"log": LogReward(), "copa": LogReward(delay_weight=0.5), "aurora": aurora}
"""The built-in rewards by name: the paper's (δ = 1), Copa's default δ = 0.5, Aurora's."""


def lookup(reward: str | Reward) -> Reward:
    if callable(reward):
        return reward
    try:
        return REWARDS[reward]
    except KeyError:
        raise PantheonError(f"unknown reward '{reward}'; known: {', '.join(REWARDS)}, or a function of StepStats") from None
