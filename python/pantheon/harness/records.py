"""Per-packet records of a run, merged from the tunnel logs of its flows (paper §3.2: every
datagram is tagged with a unique id by the tunnel at one end and matched at the other).

For flow i, data packets are those entering the tunnel at the sender (its ingress log) and leaving
at the receiver (egress); acknowledgements, the reverse. A packet sent but never received was
lost (or was still in flight when the run stopped). Times are microseconds since the run's clock
started (t0), from each endpoint's log base (µs since the epoch) plus its offsets.

In remote mode (docs/remote.md) one endpoint's logs are on the remote host's clock. A one-way
delay subtracts a time on one clock from a time on the other, so every time is first mapped onto
the sender's clock with the run's measured clock fit (harness/clock.py; issue 16 §2): the sender's
own times are then exact and the receiver's carry the fit's error bound. t0, taken by the harness
on the local clock, is mapped too when the sender is remote. After the correction a delay below
zero is impossible unless the bound was exceeded (the data's one-way delay is at least the probes'
least one, and the fit's offset error is at most half their round trip); clock_flags says so, with
the numbers, and reports a clock step.

Each tunnel log line is `t_us uid bytes [ecn]`: the optional 4th column is the inner packet's ECN
codepoint (RFC 3168: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE), as sent in an ingress log and as
delivered in an egress log (3: a queue marked it on the way); a log of three columns, the tunnel's
before ECN, means 0.

Written per run:
    records.parquet   flow, direction (data|ack), uid, size_bytes, send_us, recv_us (null: lost),
                      ecn (the codepoint sent), ce (it arrived CE-marked; null: lost)
    datalink.log, acklink.log  the original Pantheon's merged text form, in ms since t0:
                      `t + size flow`, `t - size delay flow`, and `t # 1500` for each delivery
                      opportunity of the emulator in that direction (the link's capacity);
                      flows are numbered from 1 there, as in the original.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pantheon import files, link_log
from pantheon.harness.clock import ClockFit, PeerClock
from pantheon.plan import Plan

EPOCH_IN_HEADER = re.compile(r"(\d{15,})\s*us since the Unix epoch")
SCHEMA = pa.schema([
    ("flow", pa.uint16()), ("direction", pa.string()), ("uid", pa.uint64()), ("size_bytes", pa.uint32()),
    ("send_us", pa.int64()), ("recv_us", pa.int64()), ("ecn", pa.uint8()), ("ce", pa.bool_()),
])
"""records.parquet's columns, every one nullable (as pyarrow writes them; pantheon-sim writes the
same types, crates/sim/src/records.rs). `ecn` and `ce` came with ECN (issue 34): the analysis
reads records without them as Not-ECT, never marked (analysis/logs.py)."""
CE = 3
"""The ECN codepoint Congestion Experienced (RFC 3168 §5)."""
TRANSFERS_SCHEMA = pa.schema([
    ("flow", pa.uint16()), ("transfer", pa.uint32()), ("bytes", pa.uint64()), ("start_us", pa.int64()),
    ("began_us", pa.int64()), ("end_us", pa.int64()),
])
"""transfers.parquet's columns (issue 35): one row per planned transfer, flows in order, each
flow's transfers in plan order; `start_us` when it was due, `began_us` when its sender began it
(null: never), `end_us` when its receiver had the last byte (null: not by the run's end); µs since
t0. pantheon-sim writes the same (crates/sim/src/records.rs)."""


class RecordsError(ValueError):
    """A log needed for the records is missing or unreadable."""


@dataclass
class Summary:
    data_packets: int = 0
    ack_packets: int = 0
    silent_flows: list[int] = field(default_factory=list)
    """Flows whose receiver got no data packet at all."""
    negative_delays: int = 0
    """Data packets received before they were sent (after any clock correction)."""
    min_delay_us: int | None = None
    """Least one-way delay of a data packet, µs (after any clock correction); None if none arrived."""


def _base_epoch_us(path: Path) -> int:
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                break
            if m := EPOCH_IN_HEADER.search(line):
                return int(m[1])
    raise RecordsError(f"{path}: no base time ('... us since the Unix epoch') in its header")


ClockMap = Callable[[int], int]
"""Maps an epoch µs time on one host's clock onto the sender's clock."""


def read_tunnel_log(path: Path, t0_us: int, to_sender: ClockMap | None = None) -> dict[int, tuple[int, int, int]]:
    """uid -> (t_us since t0, size_bytes, ecn codepoint) from a native tunnel log (`t_us uid bytes
    [ecn]` lines, ecn 0 where absent); to_sender maps the log's clock onto the sender's where they differ."""
    if not path.exists():
        raise RecordsError(f"{path} is missing: the tunnel endpoint did not write its log")
    base_us = _base_epoch_us(path)
    offset_us = base_us - t0_us
    packets = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.startswith("#"):
                continue
            fields = line.split()
            try:
                if len(fields) not in (3, 4):
                    raise ValueError
                t_us, uid, size, ecn = (int(field) for field in (*fields, "0")[:4])
                if not 0 <= ecn <= CE:
                    raise ValueError
            except ValueError:
                # A log cut short (a full disk, a killed endpoint) ends in a partial line.
                raise RecordsError(f"{path} line {number} is not 't_us uid bytes [ecn 0-3]': {line[:40]!r}") from None
            t = t_us + offset_us if to_sender is None else to_sender(base_us + t_us) - t0_us
            packets[uid] = (t, size, ecn)
    return packets


def read_opportunities(path: Path, t0_us: int, to_sender: ClockMap | None = None) -> list[int]:
    """Delivery-opportunity times (µs since t0) from an emulator link log."""
    if not path.exists():
        return []
    base_us = _base_epoch_us(path)
    times = link_log.opportunities_us(path)
    if to_sender is None:
        return [t + base_us - t0_us for t in times]
    return [to_sender(base_us + t) - t0_us for t in times]


def _sender_clock_maps(peer_clock: PeerClock | None) -> dict[str, ClockMap | None]:
    """For the logs of the "sender", of the "receiver" and of the "local" host (t0, the emulator's
    link logs): the map of their times onto the sender's clock; None where they are on it already."""
    if peer_clock is None:
        return {"sender": None, "receiver": None, "local": None}
    if peer_clock.remote_side == "sender":
        to_peer = peer_clock.fit.local_to_peer_us
        return {"sender": None, "receiver": to_peer, "local": to_peer}
    if peer_clock.remote_side == "receiver":
        return {"sender": None, "receiver": peer_clock.fit.peer_to_local_us, "local": None}
    raise ValueError(f"remote_side must be 'sender' or 'receiver', not {peer_clock.remote_side!r}")


def merge_run(run_dir: Path, plan: Plan, t0_epoch_s: float, peer_clock: PeerClock | None = None) -> Summary:
    """Writes the run's records and merged text logs. t0_epoch_s is on the local clock;
    peer_clock, in remote mode, says how the remote endpoint's clock relates to it."""
    maps = _sender_clock_maps(peer_clock)
    t0_us = round(t0_epoch_s * 1e6)
    if (local := maps["local"]) is not None:
        t0_us = local(t0_us)
    columns: dict[str, list] = {name: [] for name in SCHEMA.names}
    summary = Summary()
    text: dict[str, list[tuple[int, str]]] = {"data": [], "ack": []}
    for i in range(len(plan.flows)):
        for direction, sent_log, received_log in (("data", "sender.ingress", "receiver.egress"), ("ack", "receiver.ingress", "sender.egress")):
            sent = read_tunnel_log(run_dir / f"flow{i}.{sent_log}.log", t0_us, maps[sent_log.split(".")[0]])
            received = read_tunnel_log(run_dir / f"flow{i}.{received_log}.log", t0_us, maps[received_log.split(".")[0]])
            for uid, (send_us, size, ecn) in sent.items():
                recv = received.get(uid)
                columns["flow"].append(i)
                columns["direction"].append(direction)
                columns["uid"].append(uid)
                columns["size_bytes"].append(size)
                columns["send_us"].append(send_us)
                columns["recv_us"].append(recv[0] if recv else None)
                columns["ecn"].append(ecn)
                columns["ce"].append(recv[2] == CE if recv else None)
                text[direction].append((send_us, f"+ {size} {i + 1}"))
                if recv:
                    text[direction].append((recv[0], f"- {size} {(recv[0] - send_us) / 1000:.3f} {i + 1}"))
                    if direction == "data":
                        delay_us = recv[0] - send_us
                        summary.negative_delays += delay_us < 0
                        summary.min_delay_us = delay_us if summary.min_delay_us is None else min(summary.min_delay_us, delay_us)
            if direction == "data":
                summary.data_packets += len(sent)
                if not any(uid in received for uid in sent):
                    summary.silent_flows.append(i)
            else:
                summary.ack_packets += len(sent)
    with files.atomic_path(run_dir / "records.parquet") as tmp:
        pq.write_table(pa.table(columns, schema=SCHEMA), tmp, compression="zstd")
    for direction, log_name in (("data", "uplink.log"), ("ack", "downlink.log")):
        lines = text[direction] + [(t, "# 1500") for t in read_opportunities(run_dir / log_name, t0_us, maps["local"])]
        lines.sort(key=lambda item: item[0])
        name = "datalink.log" if direction == "data" else "acklink.log"
        with files.atomic_path(run_dir / name) as tmp, open(tmp, "w") as f:
            f.write(f"# init timestamp: {t0_us / 1000:.3f}\n")
            f.writelines(f"{t / 1000:.3f} {rest}\n" for t, rest in lines)
    return summary


def _log_columns(path: Path, width: int) -> dict[int, list[int]]:
    """transfer id -> its other columns, from a transfer log of `width` integers a line; a line
    cut short (the writer killed mid-line) or not of integers is left out."""
    rows: dict[int, list[int]] = {}
    if not path.exists():
        return rows
    for line in path.read_text(errors="replace").splitlines():
        fields = line.split()
        if len(fields) == width and all(f.lstrip("-").isdigit() for f in fields):
            rows.setdefault(int(fields[0]), [int(f) for f in fields[1:]])
    return rows


def merge_transfers(run_dir: Path, plan: Plan, t0_epoch_s: float, head_start_s: float) -> None:
    """Writes transfers.parquet from the transfer logs of the run's flows with transfers
    (harness/transfers.py): the driver's `id began_epoch_us due_epoch_us`, the receiver's `id
    end_epoch_us`. A transfer the driver never began is due at its planned offset from the
    flow's sender's release (`head_start_s` after the flow's start, for a receiver-first scheme)."""
    if not any(flow.transfers for flow in plan.flows):
        return
    t0_us = round(t0_epoch_s * 1e6)
    columns: dict[str, list] = {name: [] for name in TRANSFERS_SCHEMA.names}
    for i, flow in enumerate(plan.flows):
        began = _log_columns(run_dir / f"flow{i}.transfers.sender.log", 3)
        ended = _log_columns(run_dir / f"flow{i}.transfers.receiver.log", 2)
        for k, transfer in enumerate(flow.transfers):
            logged = began.get(k)
            columns["flow"].append(i)
            columns["transfer"].append(k)
            columns["bytes"].append(transfer.bytes)
            columns["start_us"].append(logged[1] - t0_us if logged else round((transfer.start_s + head_start_s) * 1e6))
            columns["began_us"].append(logged[0] - t0_us if logged else None)
            columns["end_us"].append(ended[k][0] - t0_us if k in ended else None)
    with files.atomic_path(run_dir / "transfers.parquet") as tmp:
        pq.write_table(pa.table(columns, schema=TRANSFERS_SCHEMA), tmp, compression="zstd")


def clock_flags(summary: Summary, fit: ClockFit) -> list[str]:
    """One line per clock problem of a remote run, for run.json's "flags". A corrected delay below
    zero but within the bound is what the bound allows (a path of a few µs, timestamping noise);
    one below minus the bound cannot happen unless the clocks moved beyond what was measured."""
    flags = []
    if summary.min_delay_us is not None and summary.min_delay_us < -fit.bound_us:
        flags.append(f"clock: {summary.negative_delays} of {summary.data_packets} data packets arrived before they were "
                     f"sent after the clock correction (least one-way delay {summary.min_delay_us / 1000:.3f} ms, "
                     f"clock bound ± {fit.bound_us / 1000:.3f} ms): the clocks moved beyond the measured bound")
    if fit.step is not None:
        at = datetime.fromtimestamp(fit.step["at_us"] / 1e6, UTC).strftime("%H:%M:%S.%f")[:-3]
        flags.append(f"clock: the remote host's clock stepped by {fit.step['size_us'] / 1000:+.3f} ms at {at} UTC "
                     f"(local clock) during the run; one-way delays around it are off by up to that much")
    return flags
