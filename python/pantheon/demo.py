"""The main job, for now: one bulk kernel-TCP flow (iperf3) from inside an emulated path —
12 Mbit/s each way, 20 ms one-way delay, a 90 kB DropTail buffer (60 packets, about the path's
bandwidth-delay product) — with its throughput and one-way delay read from the emulator's own
per-packet log."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from pantheon import linklog
from pantheon.binaries import binary
from pantheon.netns import in_netns, private_netns, require_root

RATE_MBPS = 12
DELAY_MS = 20
QUEUE_BYTES = 90_000
PORT = 5201


def run_demo(seconds: float, cc: str) -> int:
    require_root("pantheon demo")
    if seconds <= 0:
        raise ValueError(f"--seconds must be positive, got {seconds}")
    if shutil.which("iperf3") is None:
        raise ValueError("iperf3 is not installed: run ./setup.sh")
    emu = binary("pantheon-emu")
    with tempfile.TemporaryDirectory(prefix="pantheon-demo-") as tmp, private_netns(f"pantheon-demo-{os.getpid()}") as ns:
        uplink_log = Path(tmp) / "uplink.log"
        server = subprocess.Popen(
            in_netns(ns, ["iperf3", "--server", "--one-off", "--port", str(PORT)]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            command = (
                f"sleep 0.2; iperf3 --client $MAHIMAHI_BASE --port {PORT} --time {seconds:g} "
                f"--congestion {cc} --json"
            )
            emulate = [
                str(emu), "--delay", str(DELAY_MS),
                "--uplink-rate", str(RATE_MBPS), "--downlink-rate", str(RATE_MBPS),
                "--uplink-queue-bytes", str(QUEUE_BYTES), "--downlink-queue-bytes", str(QUEUE_BYTES),
                "--uplink-log", str(uplink_log), "--", "sh", "-c", command,
            ]
            print(
                f"pantheon demo: {seconds:g} s of TCP {cc} over {RATE_MBPS} Mbit/s, {DELAY_MS} ms one-way delay, "
                f"{QUEUE_BYTES} B DropTail buffer ...",
                flush=True,
            )
            done = subprocess.run(in_netns(ns, emulate), capture_output=True, text=True)
        finally:
            server.kill()
            server.wait()
        if done.returncode != 0:
            print(f"pantheon demo: the flow failed (exit {done.returncode}): {done.stderr.strip() or done.stdout[-300:]}")
            return 1
        report = json.loads(done.stdout)
        iperf_mbps = report["end"]["sum_received"]["bits_per_second"] / 1e6
        log = linklog.read(uplink_log)
        delays_ms = [d / 1000 for d in log.delays_us()]
        lost = sum(1 for *_, cause in log.drops if cause == "queue")
        print(f"  throughput (iperf3 receiver)       {iperf_mbps:8.2f} Mbit/s")
        print(f"  throughput (emulator uplink log)   {log.throughput_mbps():8.2f} Mbit/s of {RATE_MBPS} Mbit/s")
        print(
            f"  one-way delay (uplink)             median {linklog.percentile(delays_ms, 50):.2f} ms, "
            f"95th percentile {linklog.percentile(delays_ms, 95):.2f} ms"
        )
        print(f"  packets dropped at the bottleneck  {lost} of {len(log.entries_us)}")
    return 0
