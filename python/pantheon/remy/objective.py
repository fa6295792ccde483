"""Remy's objective (Winstein & Balakrishnan, SIGCOMM 2013, §3.2): each sender's utility is
log(throughput) − δ·log(delay), and a network's score is the sum over its senders; the optimiser
maximises the mean score over the networks drawn from the prior.

- A sender is one host switching on and off: its throughput is the data it got delivered over
  the time it was on (Remy's: packets received over the time sending), its delay the mean of its
  delivered packets' delays, over all its on-periods (the job's flows) together. Remy's 2014 code
  divides each moment of sending time by the number of senders on, which makes throughput a
  share of the fair share; the on/off times are the same for every candidate of an evaluation
  (common networks), so that only reweights a sender's on-periods, and ours does not.
- The delay is the simulator's one-way delay per delivered datagram (FlowMetrics.delay_mean_ms:
  queueing, transmission and half the round trip). Remy's simulator returns acks at once, so its
  per-packet delay is the whole propagation round trip plus queueing; ours counts half of it.
  Under the logarithm a constant factor is a constant term, so the ranking of actions on a network
  changes only through the propagation part's share (a deviation, stated in docs/remy.md).
- Units: Mbit/s and ms, natural logarithms (Remy's code uses log2 and delay/100 ms: a positive
  factor and a constant, the same ranking).
- A sender that was on but got nothing delivered has no defined utility (Remy's code gives it
  −INT_MAX). Ours is finite and below every sender that got something through: the utility of a
  sender that got one datagram delivered over the whole run, that datagram taking the whole run
  (`starved_utility`). A sender never on within the run counts nothing (Remy's: utility 0).

Pure: results in, numbers out.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from pantheon.remy.networks import PACKET_BYTES, Network
from pantheon.sim.batch import FlowMetrics


def utility(throughput_mbps: float, delay_ms: float, delta: float) -> float:
    """log(throughput) − δ·log(delay), throughput in Mbit/s and delay in ms."""
    return math.log(throughput_mbps) - delta * math.log(delay_ms)


def starved_utility(runtime_s: float, delta: float) -> float:
    """A sender's utility when nothing of it was delivered: one datagram over the whole run, taking
    the whole run, which is no more than any sender that got one through could score."""
    return utility(PACKET_BYTES * 8 / runtime_s / 1e6, runtime_s * 1e3, delta)


def sender_utilities(network: Network, flows: Sequence[FlowMetrics], delta: float) -> list[float]:
    """Each sender's utility that was on in the run, in sender order; `flows` are the job's
    flows' metrics, one per on-period in `network.on_periods`' order."""
    if len(flows) != len(network.on_periods):
        raise ValueError(f"{len(flows)} flows' metrics for {len(network.on_periods)} on-periods")
    on_s = [0.0] * network.senders
    delivered = [0] * network.senders
    delay_sum_ms = [0.0] * network.senders
    for period, flow in zip(network.on_periods, flows):
        on_s[period.sender] += period.duration_s
        delivered[period.sender] += flow.delivered_packets
        if flow.delivered_packets and flow.delay_mean_ms is not None:
            delay_sum_ms[period.sender] += flow.delay_mean_ms * flow.delivered_packets
    found = []
    for sender in range(network.senders):
        if on_s[sender] <= 0:
            continue
        if delivered[sender] == 0:
            found.append(starved_utility(network.runtime_s, delta))
            continue
        throughput_mbps = delivered[sender] * PACKET_BYTES * 8 / on_s[sender] / 1e6
        found.append(utility(throughput_mbps, max(delay_sum_ms[sender] / delivered[sender], 1e-3), delta))
    return found


def score(network: Network, flows: Sequence[FlowMetrics], delta: float) -> float:
    """The network's score: the sum of its senders' utilities."""
    return sum(sender_utilities(network, flows, delta))
