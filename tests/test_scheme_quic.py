"""QUIC Cubic and QUIC BBR (schemes/quic-cubic.toml, schemes/quic-bbr.toml; the quinn-based
pantheon-quic in schemes/quic/): each moves data over the emulator through the harness, in
full-size datagrams that fit the tunnel (UDP payload <= 1436 bytes, RFC 9000 §14), and stops
cleanly when the harness ends it; the receiver outlives a killed sender and takes the next one;
bad arguments get one line and status 2."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import REPO, in_ns

PANTHEON = str(REPO / ".venv" / "bin" / "pantheon")
BINARY = REPO / "schemes" / "quic" / "target" / "release" / "pantheon-quic"
DELAY_MS = 20
LINK_MBPS = 12  # the harness's default path
TUNNEL_MTU_BYTES = 1464  # IP packet; UDP payload 1436
needs_binary = pytest.mark.skipif(not BINARY.exists(),
                                  reason=f"{BINARY} is not built: run .venv/bin/pantheon schemes setup quic-cubic")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the harness needs root")


def quic_pids() -> set[int]:
    """Processes running this pantheon-quic binary, whoever started them."""
    found = set()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.readlink(proc / "exe").startswith(str(BINARY)):
                found.add(int(proc.name))
        except OSError:
            continue
    return found


@needs_binary
@pytest.mark.parametrize("args, complaint", [
    ([], "missing arguments"),
    (["send", "--cc", "vegas", "10.0.0.1", "5000"], "unknown congestion control 'vegas'"),
    (["recv", "localhost", "5000"], "'localhost' is not an IP address"),
    (["recv", "10.0.0.1", "70000"], "'70000' is not a port number"),
    (["send", "10.0.0.1", "5000"], "cannot read the arguments"),
])
def test_bad_arguments_get_one_line_and_status_2(args: list[str], complaint: str) -> None:
    done = subprocess.run([str(BINARY), *args], capture_output=True, text=True, timeout=10)
    assert done.returncode == 2
    assert complaint in done.stderr and "usage:" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


@needs_binary
def test_receiver_outlives_a_killed_sender(netns: str, tmp_path: Path) -> None:
    receiver_log = tmp_path / "receiver.stderr"
    send = in_ns(netns, [str(BINARY), "send", "--cc", "cubic", "127.0.0.1", "4433"])
    started: list[subprocess.Popen] = []
    try:
        with open(receiver_log, "w") as err:
            receiver = subprocess.Popen(in_ns(netns, [str(BINARY), "recv", "127.0.0.1", "4433"]), stderr=err)
        started.append(receiver)
        time.sleep(0.3)
        killed = subprocess.Popen(send, stderr=subprocess.DEVNULL)
        started.append(killed)
        time.sleep(1)
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=5)
        second = subprocess.Popen(send, stderr=subprocess.PIPE, text=True)
        started.append(second)
        time.sleep(1)
        assert second.poll() is None, "the second sender is still sending"
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=1.5) == 0, second.stderr.read()
        assert receiver.poll() is None, "the receiver survived both senders"
        receiver.send_signal(signal.SIGTERM)
        assert receiver.wait(timeout=1.5) == 0
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    accepted = re.findall(r"^pantheon-quic: connection from 127\.0\.0\.1:\d+$", receiver_log.read_text(), re.MULTILINE)
    assert len(accepted) == 2, receiver_log.read_text()


@needs_root
@needs_binary
@pytest.mark.parametrize("scheme", ["quic-cubic", "quic-bbr"])
def test_moves_data_over_the_emulator_and_stops_cleanly(scheme: str, tmp_path: Path) -> None:
    before = quic_pids()
    data = tmp_path / "data"
    done = subprocess.run([PANTHEON, "test", "local", "--schemes", scheme, "--runtime", "5", "--delay", str(DELAY_MS),
                           "--uplink-queue-bytes", "30000", "--downlink-queue-bytes", "30000", "--data-dir", str(data),
                           "--quiet"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    run = data / scheme / "run1"
    assert json.loads((run / "run.json").read_text())["ok"]
    for side in ("sender", "receiver"):
        exit_state = json.loads((run / "control" / f"flow0.{side}.exit").read_text())
        assert exit_state == {"status": 0, "exited_early": False, "needed_sigkill": False}, side

    packets = [r for r in pq.read_table(run / "records.parquet").to_pylist() if r["direction"] == "data"]
    delivered = [r for r in packets if r["recv_us"] is not None]
    span_s = (max(r["recv_us"] for r in delivered) - min(r["recv_us"] for r in delivered)) / 1e6
    throughput_mbps = sum(r["size_bytes"] for r in delivered) * 8 / span_s / 1e6
    assert 1 <= throughput_mbps <= LINK_MBPS * 1.05, throughput_mbps
    # Every datagram fits the tunnel, and the bulk of them are full-size (1436-byte UDP payloads).
    sizes = Counter(r["size_bytes"] for r in packets)
    assert max(sizes) <= TUNNEL_MTU_BYTES
    assert sizes.most_common(1)[0][0] == TUNNEL_MTU_BYTES, sizes.most_common(3)
    # The path's 20 ms is a floor on one-way delay (the emulator is precise to tens of us).
    assert min(r["recv_us"] - r["send_us"] for r in delivered) >= DELAY_MS * 1000 - 200
    assert quic_pids() <= before, "no pantheon-quic of this run is left"
