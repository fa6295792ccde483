"""Kernel TCP schemes: the sender really runs the congestion control it was asked for (seen by
ss(8) on the live socket), moves data across an emulated path, and an unavailable algorithm is a
one-line error."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from pantheon import kernel_tcp
from support.emulator import in_ns

PYTHON = str(REPO / ".venv" / "bin" / "python")
PORT = 5555


def wait_until_listening(netns: str, port: int, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while f":{port} " not in subprocess.run(in_ns(netns, ["ss", "-ltnH"]), capture_output=True, text=True).stdout:
        assert time.monotonic() < deadline, f"nothing listens on port {port}"
        time.sleep(0.02)


@pytest.mark.parametrize("cc", ["cubic", "bbr", "reno"])
def test_sender_uses_the_requested_congestion_control(netns: str, emu: Path, tmp_path: Path, cc: str) -> None:
    log = tmp_path / "up.log"
    receiver = subprocess.Popen(in_ns(netns, [PYTHON, "-m", "pantheon.kernel_tcp", "receiver", str(PORT)]))
    try:
        wait_until_listening(netns, PORT)
        script = (
            f"{PYTHON} -m pantheon.kernel_tcp sender $MAHIMAHI_BASE {PORT} --cc {cc} & sender=$!; "
            "sleep 2.5; ss -tin state established; kill $sender; wait $sender"
        )
        done = subprocess.run(
            in_ns(netns, [str(emu), "--delay", "5", "--uplink-log", str(log), "--", "sh", "-c", script]),
            capture_output=True, text=True, timeout=30,
        )
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    assert f" {cc} " in done.stdout, done.stdout
    departed_bytes = sum(int(line.split()[3]) for line in log.read_text().splitlines() if " - " in line and not line.startswith("#"))
    # 12 Mbit/s for ~2.5 s, less interpreter start-up and slow start: well over 500 kB.
    assert departed_bytes > 500_000, departed_bytes


@pytest.mark.parametrize("cc", ["bbr", "cubic"])
def test_the_senders_log_shows_its_state_every_10_ms(netns: str, emu: Path, tmp_path: Path, cc: str) -> None:
    """12 Mbit/s, 10 ms each way: BBR's bandwidth estimate ends near the link's rate and its min RTT
    near the path's 20 ms; the window, pacing rate and flight are real numbers for either algorithm."""
    log = tmp_path / "state.log"
    receiver = subprocess.Popen(in_ns(netns, [PYTHON, "-m", "pantheon.kernel_tcp", "receiver", str(PORT)]))
    try:
        wait_until_listening(netns, PORT)
        script = (f"{PYTHON} -m pantheon.kernel_tcp sender $MAHIMAHI_BASE {PORT} --cc {cc} --log {log} & sender=$!; "
                  "sleep 3; kill $sender; wait $sender")
        done = subprocess.run(in_ns(netns, [str(emu), "--delay", "10", "--", "sh", "-c", script]),
                              capture_output=True, text=True, timeout=30)
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    header, *lines = log.read_text().splitlines()
    assert header == kernel_tcp.LOG_HEADER.strip()
    rows = [line.split() for line in lines]
    assert all(len(row) == 11 for row in rows), rows[:3]
    times_us = [int(row[0]) for row in rows]
    # A line every 10 ms for the ~2.5 s the flow ran (the interpreter starts in the first 0.5 s).
    assert 150 < len(rows) < 320 and all(0 < b - a < 50_000 for a, b in zip(times_us, times_us[1:])), times_us[:5]
    last = rows[-1]
    cwnd_bytes, pacing_bps, srtt_us, inflight_bytes, min_rtt_us = (int(last[i]) for i in (1, 2, 3, 5, 7))
    assert cwnd_bytes >= 4 * 1400 and pacing_bps > 1_000_000 and 0 < inflight_bytes <= 2 * cwnd_bytes, last
    assert 20_000 <= min_rtt_us < 25_000 and srtt_us >= min_rtt_us, last
    assert last[4] == "-" and last[8] in kernel_tcp.CA_STATES, last
    if cc == "bbr":
        assert 9_000_000 < int(last[10]) < 13_500_000, last
    else:
        assert last[10] == "-", last


def test_unavailable_congestion_control_is_a_clear_error() -> None:
    missing = next(cc for cc in ("vegas", "hybla", "westwood", "illinois") if cc not in kernel_tcp.available_congestion_controls())
    done = subprocess.run([sys.executable, "-m", "pantheon.kernel_tcp", "sender", "127.0.0.1", "9", "--cc", missing],
                          capture_output=True, text=True, cwd=REPO / "python")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and f"'{missing}' is not available" in done.stderr
