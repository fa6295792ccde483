"""Finite transfers as pure functions: each transfer's completion time, its slowdown against the
ideal on the empty path, their percentiles by size, the lateness of their starts, and the ratio
of throughputs between flows of different base RTTs (docs/analysis.md, "Workloads").

A transfer's flow completion time (FCT) is `end_us − began_us` of transfers.parquet: from when the
sender began it (kernel TCP's connect(), pantheon-udp's first datagram, the simulator's start) to
when the receiver had its last byte. Its slowdown is FCT / ideal FCT, the ideal being the same
transfer alone on the empty path (as HPCC and Homa normalise FCTs: Li et al., "HPCC: High
Precision Congestion Control", SIGCOMM 2019, §5; Montazeri et al., "Homa: A Receiver-Driven
Low-Latency Transport Protocol Using Network Priorities", SIGCOMM 2018, §5):

    ideal FCT = handshake round trips × base RTT + base one-way delay + bytes on the wire / rate

- base one-way delay: the path's one-way delay (`--delay`, from the data dir's path options) plus
  the flow's extra_delay_ms; where the path is not known (a real path), the least one-way delay of
  the flow's delivered data, which already includes any extra delay. Base RTT = 2 × that.
- rate: the run's capacity (the bottleneck's delivery opportunities, metrics.capacity_mbps).
- handshake round trips: 1 for kernel TCP (connect() waits for the SYN-ACK before the first byte
  leaves), 0 for pantheon-udp and the simulator's crates/cc flows (no handshake).
- bytes on the wire: the transfer's packets as the bottleneck carries them, 1500 bytes each (the
  tunnel's 36 bytes of overhead around an inner packet of at most 1464: docs/tunnel.md).
  pantheon-udp: ⌈bytes / 1464⌉ datagrams, the contract's byte budget. Kernel TCP: the 12-byte
  transfer header (kernel_tcp.py) then the bytes, in segments of 1412 bytes of payload (1464 − 20 IP
  − 20 TCP − 12 timestamp option; docs/tunnel.md measures 1412 per 1500 on the path); the
  handshake's and the acknowledgements' packets are not counted (they go the other way or carry
  no data). Schemes that are neither (QUIC, browsers) are held to the pantheon-udp bound.

So a slowdown of 1 is the empty path's best; queueing, losses and a slow start all add to it. The
transfers that did not complete by the run's end have no FCT: they are counted (`count` against
`completed`) and left out of the percentiles, which therefore flatter a flow that left many
incomplete; the analysis warns of them.

Percentiles are nearest-rank (metrics.nearest_rank), as every percentile of the analysis. Sizes are
bucketed as HPCC's and Homa's figures report slowdowns by flow size: up to 10 kB, 100 kB, 1 MB,
10 MB and above (decimal units; a bucket holds the sizes above the previous edge up to its own).

RTT fairness: where a run's bulk flows had different extra delays (so different base RTTs through
one bottleneck queue), the mean throughput of the flows with the shortest base RTT over that of
the flows with the longest. Loss-based TCP favours the short RTT (Floyd and Jacobson, "On traffic
phase effects in packet-switched gateways", 1991; Lakshman and Madhow, ToN 1997): a ratio above 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from pantheon.analysis.metrics import nearest_rank

PATH_PACKET_BYTES = 1500
"""Bytes a packet occupies on the emulated path: the tunnel's datagram around an inner packet of at
most 1464 bytes (docs/tunnel.md), which the bottleneck's 1500-byte opportunities carry whole."""
LATE_START_MS = 10.0
"""A flow of transfers whose p99 start lateness (began − planned start) exceeds this is warned of."""
SIZE_EDGES_BYTES: tuple[int | None, ...] = (10_000, 100_000, 1_000_000, 10_000_000, None)
"""Upper edges of the size buckets (HPCC's and Homa's); None: no upper edge."""


@dataclass(frozen=True)
class Transport:
    """How a transfer's bytes cross the path: round trips before the first byte, and the payload
    each 1500-byte packet on the path carries."""
    name: str
    handshake_rtts: int
    payload_bytes: int
    """Payload per packet on the path, bytes."""
    header_bytes: int = 0
    """Bytes the sender puts before the transfer's own."""

    def wire_bytes(self, size_bytes: int) -> int:
        """The bytes the bottleneck carries for a transfer of `size_bytes`."""
        return math.ceil((size_bytes + self.header_bytes) / self.payload_bytes) * PATH_PACKET_BYTES


KERNEL_TCP = Transport("kernel TCP", handshake_rtts=1, payload_bytes=1412, header_bytes=12)
"""kernel_tcp.py's finite sender: connect() (one round trip), a 12-byte header (transfer id u32,
bytes u64), then the bytes, in segments of 1464 − 20 − 20 − 12 (timestamps) = 1412 bytes."""
DATAGRAMS = Transport("pantheon-udp", handshake_rtts=0, payload_bytes=1464)
"""pantheon-udp's byte budget: ⌈bytes / 1464⌉ datagrams of 1464 bytes, no handshake."""


def ideal_fct_ms(size_bytes: int, transport: Transport, rate_mbps: float, one_way_delay_ms: float) -> float:
    """The FCT of a transfer alone on the empty path: handshake round trips × 2 × one-way delay,
    plus the one-way delay, plus the bytes on the wire at the bottleneck's rate (bits / (Mbit/s)
    = µs; / 1000 = ms)."""
    return (transport.handshake_rtts * 2 * one_way_delay_ms + one_way_delay_ms
            + transport.wire_bytes(size_bytes) * 8 / rate_mbps / 1000)


@dataclass(frozen=True)
class Transfers:
    """One flow's transfers in plan order (transfers.parquet's rows of that flow); began_us and
    end_us are NaN where the transfer never began or did not complete."""
    size_bytes: np.ndarray
    start_us: np.ndarray
    began_us: np.ndarray
    end_us: np.ndarray

    @classmethod
    def of(cls, rows: list[tuple[int, int, int | None, int | None]]) -> Transfers:
        """From (bytes, start_us, began_us, end_us) rows, None where null."""
        as_float = lambda i: np.array([np.nan if r[i] is None else r[i] for r in rows], dtype=np.float64)  # noqa: E731
        return cls(np.array([r[0] for r in rows], dtype=np.int64), as_float(1), as_float(2), as_float(3))

    @property
    def fct_ms(self) -> np.ndarray:
        """Each transfer's FCT, ms; NaN where it did not complete."""
        return (self.end_us - self.began_us) / 1000.0

    @property
    def completed(self) -> np.ndarray:
        return np.isfinite(self.fct_ms)


def read_transfers(path: Path) -> dict[int, Transfers]:
    """transfers.parquet (the contract's columns: flow, transfer, bytes, start_us, began_us,
    end_us) by records flow number (from 0), each flow's rows in transfer order."""
    table = pq.read_table(path, columns=["flow", "transfer", "bytes", "start_us", "began_us", "end_us"])
    rows = sorted(zip(*(table[c].to_pylist() for c in ("flow", "transfer", "bytes", "start_us", "began_us", "end_us"))),
                  key=lambda r: (r[0], r[1]))
    by_flow: dict[int, list] = {}
    for flow, _, size, start, began, end in rows:
        by_flow.setdefault(int(flow), []).append((size, start, began, end))
    return {flow: Transfers.of(flow_rows) for flow, flow_rows in by_flow.items()}


def slowdowns(transfers: Transfers, transport: Transport, rate_mbps: float, one_way_delay_ms: float) -> np.ndarray:
    """Each transfer's FCT / its ideal FCT; NaN where it did not complete."""
    ideal = np.array([ideal_fct_ms(int(b), transport, rate_mbps, one_way_delay_ms) for b in transfers.size_bytes])
    return transfers.fct_ms / ideal if ideal.size else np.zeros(0)


def percentiles(values: np.ndarray, which: tuple[int, ...] = (50, 99)) -> dict[str, float | None]:
    """{"p50": ..., "p99": ...} by nearest rank over the finite values; None where there are none."""
    finite = np.sort(values[np.isfinite(values)])
    return {f"p{p}": nearest_rank(finite, p) if finite.size else None for p in which}


def by_size(size_bytes: np.ndarray, slowdown: np.ndarray) -> list[dict]:
    """Per size bucket (SIZE_EDGES_BYTES): its upper edge (`max_bytes`, None for the last), how many
    completed transfers with a slowdown fell in it, and their slowdown's p50 and p99."""
    buckets, low = [], 0
    for edge in SIZE_EDGES_BYTES:
        inside = (size_bytes > low) & (size_bytes <= edge if edge is not None else True) & np.isfinite(slowdown)
        p = percentiles(slowdown[inside])
        buckets.append({"max_bytes": edge, "count": int(inside.sum()), "slowdown_p50": p["p50"], "slowdown_p99": p["p99"]})
        low = edge or 0
    return buckets


def transfer_summary(transfers: Transfers, slowdown: np.ndarray) -> dict:
    """A flow of many transfers: how many were planned and completed, the p50 and p99 of the
    completed ones' FCT (ms) and slowdown, and the slowdown by size bucket."""
    return {"count": int(transfers.size_bytes.size), "completed": int(transfers.completed.sum()),
            "fct_ms": percentiles(transfers.fct_ms), "slowdown": percentiles(slowdown),
            "by_size": by_size(transfers.size_bytes, slowdown)}


def start_lateness_ms(transfers: Transfers) -> dict[str, float | None] | None:
    """p50, p99 and max of began − planned start over the transfers that began, ms; None if none did."""
    late_ms = (transfers.began_us - transfers.start_us) / 1000.0
    late_ms = np.sort(late_ms[np.isfinite(late_ms)])
    if not late_ms.size:
        return None
    return {**percentiles(late_ms), "max": float(late_ms[-1])}


def rtt_fairness(extra_delays_ms: list[float], throughputs_mbps: list[float]) -> float | None:
    """The mean throughput of the bulk flows with the least extra delay (the shortest base RTT)
    over that of the flows with the most; None where all had the same, or the longest moved nothing."""
    if len(set(extra_delays_ms)) < 2:
        return None
    shortest, longest = min(extra_delays_ms), max(extra_delays_ms)
    mean = lambda d: float(np.mean([x for e, x in zip(extra_delays_ms, throughputs_mbps) if e == d]))  # noqa: E731
    return mean(shortest) / mean(longest) if mean(longest) > 0 else None
