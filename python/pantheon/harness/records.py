"""Per-packet records of a run, merged from the tunnel logs of its flows (paper §3.2: every
datagram is tagged with a unique id by the tunnel at one end and matched at the other).

For flow i, data packets are those entering the tunnel at the sender (its ingress log) and leaving
at the receiver (egress); acknowledgements, the reverse. A packet sent but never received was
lost (or was still in flight when the run stopped). Times are microseconds since the run's clock
started (t0), from each endpoint's log base (µs since the epoch) plus its offsets.

Written per run:
    records.parquet   flow, direction (data|ack), uid, size_bytes, send_us, recv_us (null: lost)
    datalink.log, acklink.log  the original Pantheon's merged text form, in ms since t0:
                      `t + size flow`, `t - size delay flow`, and `t # 1500` for each delivery
                      opportunity of the emulator in that direction (the link's capacity);
                      flows are numbered from 1 there, as in the original.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pantheon.harness.plan import Plan

EPOCH_IN_HEADER = re.compile(r"(\d{15,})\s*us since the Unix epoch")
SCHEMA = pa.schema([
    ("flow", pa.uint16()), ("direction", pa.string()), ("uid", pa.uint64()), ("size_bytes", pa.uint32()),
    ("send_us", pa.int64()), ("recv_us", pa.int64()),
])


class RecordsError(ValueError):
    """A log needed for the records is missing or unreadable."""


@dataclass
class Summary:
    data_packets: int = 0
    ack_packets: int = 0
    silent_flows: list[int] = field(default_factory=list)
    """Flows whose receiver got no data packet at all."""


def _base_epoch_us(path: Path) -> int:
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                break
            if m := EPOCH_IN_HEADER.search(line):
                return int(m[1])
    raise RecordsError(f"{path}: no base time ('... us since the Unix epoch') in its header")


def read_tunnel_log(path: Path, t0_us: int) -> dict[int, tuple[int, int]]:
    """uid -> (t_us since t0, size_bytes) from a native tunnel log (`t_us uid bytes` lines)."""
    if not path.exists():
        raise RecordsError(f"{path} is missing: the tunnel endpoint did not write its log")
    offset_us = _base_epoch_us(path) - t0_us
    packets = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            t_us, uid, size = line.split()
            packets[int(uid)] = (int(t_us) + offset_us, int(size))
    return packets


def read_opportunities(path: Path, t0_us: int) -> list[int]:
    """Delivery-opportunity times (µs since t0) from an emulator link log."""
    if not path.exists():
        return []
    offset_us = _base_epoch_us(path) - t0_us
    with open(path) as f:
        return [int(line.split(" ", 1)[0]) + offset_us for line in f if not line.startswith("#") and " # " in line]


def merge_run(run_dir: Path, plan: Plan, t0_epoch_s: float) -> Summary:
    t0_us = round(t0_epoch_s * 1e6)
    columns: dict[str, list] = {name: [] for name in SCHEMA.names}
    summary = Summary()
    text: dict[str, list[tuple[int, str]]] = {"data": [], "ack": []}
    for i in range(len(plan.flows)):
        for direction, sent_log, received_log in (("data", "sender.ingress", "receiver.egress"), ("ack", "receiver.ingress", "sender.egress")):
            sent = read_tunnel_log(run_dir / f"flow{i}.{sent_log}.log", t0_us)
            received = read_tunnel_log(run_dir / f"flow{i}.{received_log}.log", t0_us)
            for uid, (send_us, size) in sent.items():
                recv = received.get(uid)
                columns["flow"].append(i)
                columns["direction"].append(direction)
                columns["uid"].append(uid)
                columns["size_bytes"].append(size)
                columns["send_us"].append(send_us)
                columns["recv_us"].append(recv[0] if recv else None)
                text[direction].append((send_us, f"+ {size} {i + 1}"))
                if recv:
                    text[direction].append((recv[0], f"- {size} {(recv[0] - send_us) / 1000:.3f} {i + 1}"))
            if direction == "data":
                summary.data_packets += len(sent)
                if not any(uid in received for uid in sent):
                    summary.silent_flows.append(i)
            else:
                summary.ack_packets += len(sent)
    pq.write_table(pa.table(columns, schema=SCHEMA), run_dir / "records.parquet", compression="zstd")
    for direction, link_log in (("data", "uplink.log"), ("ack", "downlink.log")):
        lines = text[direction] + [(t, "# 1500") for t in read_opportunities(run_dir / link_log, t0_us)]
        lines.sort(key=lambda item: item[0])
        name = "datalink.log" if direction == "data" else "acklink.log"
        with open(run_dir / name, "w") as f:
            f.write(f"# init timestamp: {t0_us / 1000:.3f}\n")
            f.writelines(f"{t / 1000:.3f} {rest}\n" for t, rest in lines)
    return summary
