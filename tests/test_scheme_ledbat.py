"""The ledbat scheme (schemes/ledbat.toml): BitTorrent's libutp through utp-native, driven by
schemes/ledbat/utp.js. Over the emulator it moves data through the tunnel in datagrams that fit it
and stops cleanly when the harness tells it to; with a deep buffer it holds the queueing delay near
libutp's 100 ms LEDBAT target (RFC 6817 §2.4.3) instead of filling the buffer as a loss-based TCP
would; and utp.js's receiver outlives a sender that is killed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import REPO
from pantheon import schemes
from pantheon.analysis.metrics import nearest_rank
from pantheon.harness.launch import STOP_GRACE_S
from support.emulator import in_ns
from test_harness import pantheon, run_namespaces

UTP_JS = REPO / "schemes" / "ledbat" / "utp.js"
DELAY_MS = 20
RATE_MBPS = 12
TARGET_MS = 100
"""libutp's CCONTROL_TARGET (deps/libutp/utp_internal.h)."""
LIBUTP_MAX_IP_BYTES = 1402 + 28
"""libutp's UDP payload ceiling for IPv4 (UDP_IPV4_MTU, utp_utils.cpp) plus the IPv4 and UDP headers."""


_PROBLEM = schemes.registry().problem("ledbat")
pytestmark = pytest.mark.skipif(_PROBLEM is not None, reason=f"ledbat cannot run here: {_PROBLEM}")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="runs flows in network namespaces (needs root)")


def utp_pids() -> set[int]:
    """Processes running this repository's utp.js."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(UTP_JS).encode() in (entry / "cmdline").read_bytes():
                found.add(int(entry.name))
        except OSError:
            continue
    return found


def run_ledbat(data: Path, runtime_s: int, queue_bytes: int) -> Path:
    """One ledbat flow over a 12 Mbit/s, 20 ms path; its run directory, checked for a clean stop."""
    before = utp_pids()
    done = pantheon("test", "local", "--schemes", "ledbat", "--runtime", str(runtime_s), "--delay", str(DELAY_MS),
                    "--uplink-queue-bytes", str(queue_bytes), "--downlink-queue-bytes", str(queue_bytes),
                    "--data-dir", str(data), "--quiet")
    assert done.returncode == 0, done.stderr
    run = data / "ledbat" / "run1"
    assert json.loads((run / "run.json").read_text())["ok"], (run / "run.json").read_text()
    for side in ("sender", "receiver"):
        exit_record = json.loads((run / "control" / f"flow0.{side}.exit").read_text())
        stderr = (run / "control" / f"flow0.{side}.stderr").read_text()
        assert exit_record == {"status": 0, "exited_early": False, "needed_sigkill": False}, (side, exit_record, stderr)
    assert run_namespaces(done.pid) == []
    assert utp_pids() <= before, "a utp.js process outlived the run"
    return run


def delivered(run: Path) -> list[dict]:
    rows = pq.read_table(run / "records.parquet").to_pylist()
    return [r for r in rows if r["direction"] == "data" and r["recv_us"] is not None]


def throughput_mbps(packets: list[dict]) -> float:
    span_us = max(r["recv_us"] for r in packets) - min(r["recv_us"] for r in packets)
    return sum(r["size_bytes"] for r in packets) * 8 / span_us


@needs_root
def test_moves_data_in_datagrams_that_fit_and_stops_cleanly(tmp_path: Path) -> None:
    run = run_ledbat(tmp_path / "data", runtime_s=5, queue_bytes=30_000)
    packets = delivered(run)
    assert throughput_mbps(packets) >= 1.0
    assert max(r["size_bytes"] for r in packets) <= LIBUTP_MAX_IP_BYTES
    assert sum(r["size_bytes"] == LIBUTP_MAX_IP_BYTES for r in packets) > 0.9 * len(packets), "bulk data in full packets"
    delays_ms = sorted((r["recv_us"] - r["send_us"]) / 1000 for r in packets)
    # A 30 kB buffer drains in 20 ms at 12 Mbit/s: no packet can wait longer than path delay + that,
    # but a busy machine can hold a few packets back by milliseconds (one run's maximum was 50.6 ms
    # with other builds running), so the bound is on the 99th percentile; a buffer past its limit
    # (LEDBAT's own target is 100 ms of queueing) still fails it.
    p99_ms = nearest_rank(delays_ms, 99)
    assert delays_ms[0] >= DELAY_MS - 0.2 and p99_ms <= DELAY_MS + 20 + 3, (delays_ms[0], p99_ms, delays_ms[-1])


@needs_root
def test_deep_buffer_holds_queueing_delay_near_the_100_ms_target(tmp_path: Path) -> None:
    # 300 kB is 200 ms of queue at 12 Mbit/s: Cubic fills it (one-way delay ~220 ms); LEDBAT should
    # stop growing once its own queueing delay reaches the target.
    run = run_ledbat(tmp_path / "data", runtime_s=10, queue_bytes=300_000)
    packets = delivered(run)
    t0_us = min(r["send_us"] for r in packets)
    steady = [r for r in packets if r["send_us"] - t0_us >= 7_000_000]
    queueing_ms = sorted((r["recv_us"] - r["send_us"]) / 1000 - DELAY_MS for r in steady)
    median_ms, p95_ms = nearest_rank(queueing_ms, 50), nearest_rank(queueing_ms, 95)
    assert median_ms >= 0.6 * TARGET_MS and p95_ms <= 1.3 * TARGET_MS, (median_ms, p95_ms)
    assert throughput_mbps(steady) >= 0.8 * RATE_MBPS


def wait_for_line(path: Path, text: str, count: int = 1, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while path.read_text().count(text) < count:
        assert time.monotonic() < deadline, f"{path.name} never said '{text}' {count}x: {path.read_text()}"
        time.sleep(0.05)


@needs_root
def test_receiver_outlives_a_killed_sender_and_a_late_start(netns: str, tmp_path: Path) -> None:
    started: list[subprocess.Popen[bytes]] = []

    def start(role: str, log: Path) -> subprocess.Popen[bytes]:
        started.append(subprocess.Popen(in_ns(netns, ["node", str(UTP_JS), role, "127.0.0.1", "9000"]),
                                        stdout=subprocess.DEVNULL, stderr=log.open("w")))
        return started[-1]

    try:
        # The sender starts first: it keeps trying until the receiver listens.
        first = start("send", tmp_path / "send1.err")
        time.sleep(1.5)
        receiver = start("recv", tmp_path / "recv.err")
        wait_for_line(tmp_path / "send1.err", "sending to 127.0.0.1:9000")
        wait_for_line(tmp_path / "recv.err", "receiving from")
        first.kill()
        first.wait()
        second = start("send", tmp_path / "send2.err")
        wait_for_line(tmp_path / "recv.err", "receiving from", count=2)
        assert receiver.poll() is None
        for proc in (second, receiver):
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=STOP_GRACE_S) == 0  # the grace the harness gives a scheme
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize(("args", "message"), [
    (["send", "10.0.0.1", "http"], "port must be an integer in 1..65535, not 'http'"),
    (["recv", "localhost", "9000"], "address must be an IPv4 address, not 'localhost'"),
    (["push", "10.0.0.1", "9000"], "usage: node utp.js recv ADDR PORT | node utp.js send PEER PORT"),
])
def test_bad_arguments_get_one_line_and_usage(args: list[str], message: str) -> None:
    done = subprocess.run(["node", str(UTP_JS), *args], capture_output=True, text=True, timeout=10)
    assert done.returncode == 2
    assert message in done.stderr.splitlines()[0] and "Error" not in done.stderr
