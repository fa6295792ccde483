"""Latency probes as pure functions: the round-trip time of each probe of a probes flow, and which
probes saw an idle path (docs/analysis.md, "Workloads").

A probes flow is a crates/cc `cbr:interval_ms=T` flow: one datagram every T ms, whatever happens,
each acknowledged by the receiver at once and in order (pantheon-udp: every datagram has its own
acknowledgement). That is RRUL's idea of measuring interactive latency beside the load (Høiland-
Jørgensen et al., Flent's "Realtime Response Under Load" test), with a probe that never backs off.
Its RTT is taken from the records alone: the k-th acknowledgement the receiver sent answers the
k-th data datagram it received, so

    probe RTT = recv_us of the k-th acknowledgement (by its send time) − send_us of the k-th
                delivered data datagram (by its receive time)

both times on the sender's clock (exact also over a real path). A probe whose acknowledgement was
lost has no RTT. The reference, probe RTT without load, is that of the probes sent while no other
flow of the run was active: a flow is active from its first data send to its last delivery, a flow
of transfers only during each transfer (began to end, or to the run's end where it did not
complete); other probes flows are no load. An on/off flow counts as active through its off times.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def probe_rtts_us(data_send_us: np.ndarray, data_recv_us: np.ndarray, ack_send_us: np.ndarray,
                  ack_recv_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each answered probe's send time, its RTT), µs, in probe order, from one flow's data and
    acknowledgement records (receive times NaN where lost)."""
    delivered = np.isfinite(data_recv_us)
    order = np.lexsort((data_send_us[delivered], data_recv_us[delivered]))
    sent = data_send_us[delivered][order]
    answers = ack_recv_us[np.argsort(ack_send_us, kind="stable")]
    k = min(sent.size, answers.size)
    sent, answers = sent[:k], answers[:k]
    answered = np.isfinite(answers)
    return sent[answered], answers[answered] - sent[answered]


def idle(t_us: np.ndarray, active_us: Sequence[tuple[float, float]]) -> np.ndarray:
    """Whether each time lies outside every [start, end] interval of activity."""
    busy = np.zeros(t_us.size, dtype=bool)
    for start, end in active_us:
        busy |= (t_us >= start) & (t_us <= end)
    return ~busy
