"""Pantheon's own controllers over pantheon-udp (crates/transport) as schemes, through the harness:
12 Mbit/s, 20 ms each way, a 240 000-byte buffer each way (160 ms at 12 Mbit/s, four BDPs).

Checks what a researcher would look at first: every data datagram is a 1464-byte IP packet (the
tunnel's inner MTU) and each is acknowledged by one 60-byte datagram (32 bytes of UDP payload);
both sides stop with status 0 when told to; and the delay-based controller behaves as its paper
says against the loss-based one on the same path: Copa (NSDI 2018, §2: about 1/delta = 2 packets
queued) keeps the queueing delay a fraction of what the userspace Cubic builds by filling the buffer.
The loopback tests of the binary itself are in crates/transport/tests/loopback.rs."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pantheon import schemes
from pantheon.analysis.metrics import nearest_rank
from test_harness import pantheon, run_namespaces

SCHEMES = ("copa", "cubic-user")
DELAY_MS = 20
RATE_MBPS = 12
QUEUE_BYTES = 240_000
RUNTIME_S = 10
PACKET_BYTES = 1464
ACK_BYTES = 32 + 28
ICMP_BYTES = {20 + 8 + 20 + 8 + 32, 576}
"""ICMP port-unreachables: one quoting an acknowledgement whole, one quoting a data datagram as
far as Linux lets an ICMP error grow (576 bytes, RFC 1812 §4.3.2.3)."""

_PROBLEMS = {name: schemes.registry().problem(name) for name in SCHEMES}
pytestmark = [
    pytest.mark.skipif(any(_PROBLEMS.values()), reason=f"cannot run here: {_PROBLEMS}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="runs flows in network namespaces (needs root)"),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    data = tmp_path_factory.mktemp("transport")
    done = pantheon("test", "local", "--schemes", ",".join(SCHEMES), "--runtime", str(RUNTIME_S),
                    "--delay", str(DELAY_MS), "--uplink-queue-bytes", str(QUEUE_BYTES),
                    "--downlink-queue-bytes", str(QUEUE_BYTES), "--data-dir", str(data), "--quiet", "--no-analyze")
    assert done.returncode == 0, done.stderr
    assert run_namespaces(done.pid) == []
    return {name: data / name / "run1" for name in SCHEMES}


def records(run: Path) -> list[dict]:
    return pq.read_table(run / "records.parquet").to_pylist()


def delivered_data(run: Path) -> list[dict]:
    return [r for r in records(run) if r["direction"] == "data" and r["recv_us"] is not None]


def throughput_mbps(packets: list[dict]) -> float:
    span_us = max(r["recv_us"] for r in packets) - min(r["recv_us"] for r in packets)
    return sum(r["size_bytes"] for r in packets) * 8 / span_us


def p95_one_way_delay_ms(packets: list[dict]) -> float:
    delays = sorted(r["recv_us"] - r["send_us"] for r in packets)
    return nearest_rank(delays, 95) / 1000


@pytest.mark.parametrize("name", SCHEMES)
def test_both_sides_stop_cleanly(runs: dict[str, Path], name: str) -> None:
    run = runs[name]
    assert json.loads((run / "run.json").read_text())["ok"], (run / "run.json").read_text()
    for side in ("sender", "receiver"):
        exit_record = json.loads((run / "control" / f"flow0.{side}.exit").read_text())
        stderr = (run / "control" / f"flow0.{side}.stderr").read_text()
        assert exit_record == {"status": 0, "exited_early": False, "needed_sigkill": False}, (side, exit_record, stderr)
        # One line of totals at the end, nothing else.
        assert len(stderr.splitlines()) == 1 and stderr.startswith("pantheon-udp: "), stderr


@pytest.mark.parametrize("name", SCHEMES)
def test_datagrams_fill_the_tunnel_and_each_is_acknowledged(runs: dict[str, Path], name: str) -> None:
    rows = records(runs[name])
    # Besides data and acknowledgements, only ICMP port-unreachables cross, for datagrams that
    # arrive after the side they are for has exited.
    data = [r for r in rows if r["direction"] == "data" and r["size_bytes"] not in ICMP_BYTES]
    assert data and {r["size_bytes"] for r in data} == {PACKET_BYTES}
    acks = [r for r in rows if r["direction"] == "ack" and r["size_bytes"] not in ICMP_BYTES]
    assert {r["size_bytes"] for r in acks} == {ACK_BYTES}
    arrived = sum(r["recv_us"] is not None for r in data)
    # One acknowledgement per datagram that reached the receiver while it ran: at most what was
    # queued and in flight when the sides stopped (buffer + one BDP, ~205 datagrams) lacks one.
    in_flight = (QUEUE_BYTES + RATE_MBPS * 1000 * 2 * DELAY_MS // 8) // PACKET_BYTES
    assert arrived - in_flight <= len(acks) <= arrived, (len(acks), arrived)


def test_copa_keeps_the_queue_short_where_cubic_fills_it(runs: dict[str, Path]) -> None:
    copa, cubic = delivered_data(runs["copa"]), delivered_data(runs["cubic-user"])
    base_ms = DELAY_MS + PACKET_BYTES * 8 / (RATE_MBPS * 1000)  # propagation + one packet's transmission
    copa_queue_ms = p95_one_way_delay_ms(copa) - base_ms
    cubic_queue_ms = p95_one_way_delay_ms(cubic) - base_ms
    # Cubic fills most of the 160 ms buffer; Copa holds a few packets (1 ms each at 12 Mbit/s).
    assert cubic_queue_ms > 100, cubic_queue_ms
    assert copa_queue_ms < cubic_queue_ms / 3, (copa_queue_ms, cubic_queue_ms)
    assert throughput_mbps(cubic) > 0.9 * RATE_MBPS
    assert throughput_mbps(copa) > 0.6 * RATE_MBPS
