#!/usr/bin/env python3
"""Does the tunnel change how schemes behave? The Pantheon paper's check (§3.1.2), redone.

What is measured
    Kernel TCP Cubic and BBR, RUNS runs each, inside the tunnel (a `pantheon test local` campaign)
    and outside it (the same sender and receiver, python -m pantheon.kernel_tcp, straight through
    `pantheon emulate`), all on one emulated path: 12 Mbit/s each way, 20 ms one-way delay, a
    90 000-byte DropTail buffer on the uplink. Each run yields its throughput and its 95th-percentile
    one-way delay, both read from the emulator's uplink log — the same vantage point inside and
    outside the tunnel (bytes through the bottleneck over the span of departures; per-packet time
    from entering the path to leaving it). A two-sample Kolmogorov-Smirnov test compares the inside
    and outside samples of each metric; a large p-value means no detectable difference.

    KS p-values use the asymptotic Kolmogorov distribution with Stephens' small-sample correction
    (Numerical Recipes §14.3), good to a few percent for samples of 20.

Run as root after ./setup.sh --no-run:
    python3 bench/tunnel_ks.py [--runs 20] [--runtime 10] [--cc cubic,bbr]
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))

from pantheon import linklog  # noqa: E402
from pantheon.analysis.metrics import nearest_rank  # noqa: E402

PANTHEON = REPO / ".venv" / "bin" / "pantheon"
PYTHON = REPO / ".venv" / "bin" / "python"
PATH_OPTIONS = ["--delay", "20", "--uplink-rate", "12", "--downlink-rate", "12", "--uplink-queue-bytes", "90000"]
PORT = 5600


def ks_statistic(a: list[float], b: list[float]) -> float:
    """Largest distance between the two empirical distribution functions."""
    a, b = sorted(a), sorted(b)
    i = j = 0
    d = 0.0
    while i < len(a) and j < len(b):
        x = min(a[i], b[j])
        while i < len(a) and a[i] <= x:
            i += 1
        while j < len(b) and b[j] <= x:
            j += 1
        d = max(d, abs(i / len(a) - j / len(b)))
    return d


def ks_p_value(d: float, n: int, m: int) -> float:
    ne = n * m / (n + m)
    lam = (math.sqrt(ne) + 0.12 + 0.11 / math.sqrt(ne)) * d
    if lam < 0.2:
        return 1.0
    total = sum(2 * (-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101))
    return min(1.0, max(0.0, total))


# Data packets are full-sized; the tunnel's handshake and keepalives (44 bytes on the wire, sent
# a second before the flow starts) are not data and must not stretch the throughput's time span.
DATA_MIN_BYTES = 500


def metrics(uplink_log: Path) -> tuple[float, float]:
    """(throughput Mbit/s, p95 one-way delay ms) of the data packets in an emulator uplink log."""
    log = linklog.read(uplink_log)
    data = [(t, size, late, uid) for t, uid, size, late in log.departures if size >= DATA_MIN_BYTES]
    span_us = data[-1][0] - data[0][0]
    throughput_mbps = 8 * sum(size for _, size, _, _ in data) / span_us
    delays_ms = [(t + late - log.entries_us[uid]) / 1000 for t, _, late, uid in data]
    return throughput_mbps, nearest_rank(sorted(delays_ms), 95)


def outside_run(cc: str, runtime_s: float, tmp: Path, index: int) -> tuple[float, float]:
    ns = f"pbench-ks-{os.getpid()}"
    log = tmp / f"outside-{cc}-{index}.log"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    receiver = None
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        receiver = subprocess.Popen(["ip", "netns", "exec", ns, str(PYTHON), "-m", "pantheon.kernel_tcp", "receiver", str(PORT)])
        sender = (f"{PYTHON} -m pantheon.kernel_tcp sender $MAHIMAHI_BASE {PORT} --cc {cc} & s=$!; "
                  f"sleep {runtime_s}; kill $s; wait $s")
        subprocess.run(["ip", "netns", "exec", ns, str(PANTHEON), "emulate", *PATH_OPTIONS, "--uplink-log", str(log),
                        "--", "sh", "-c", f"sleep 0.3; {sender}"], check=True, capture_output=True)
    finally:
        if receiver:
            receiver.terminate()
            receiver.wait()
        subprocess.run(["ip", "netns", "del", ns], check=False)
    return metrics(log)


def inside_runs(schemes: list[str], runs: int, runtime_s: float, tmp: Path) -> dict[str, list[tuple[float, float]]]:
    data = tmp / "inside"
    subprocess.run([str(PANTHEON), "test", "local", "--schemes", ",".join(schemes), "--run-times", str(runs),
                    "--runtime", str(runtime_s), "--data-dir", str(data), *PATH_OPTIONS], check=True)
    return {cc: [metrics(data / cc / f"run{k}" / "uplink.log") for k in range(1, runs + 1)] for cc in schemes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--runtime", type=float, default=10.0, help="seconds per run")
    parser.add_argument("--cc", default="cubic,bbr")
    args = parser.parse_args()
    schemes = args.cc.split(",")
    with tempfile.TemporaryDirectory(prefix="pantheon-ks-") as tmp_name:
        tmp = Path(tmp_name)
        inside = inside_runs(schemes, args.runs, args.runtime, tmp)
        outside = {}
        for cc in schemes:
            outside[cc] = []
            for k in range(args.runs):
                print(f"outside the tunnel: {cc} run {k + 1}/{args.runs}", file=sys.stderr, flush=True)
                outside[cc].append(outside_run(cc, args.runtime, tmp, k))
    print(f"\n{args.runs} runs of {args.runtime:g} s each way; path: {' '.join(PATH_OPTIONS)}")
    print(f"{'scheme':8} {'metric':16} {'inside mean':>12} {'outside mean':>13} {'KS D':>6} {'p-value':>8}")
    for cc in schemes:
        for column, name in ((0, "throughput Mbit/s"), (1, "p95 delay ms")):
            a = [m[column] for m in inside[cc]]
            b = [m[column] for m in outside[cc]]
            d = ks_statistic(a, b)
            print(f"{cc:8} {name:16} {sum(a) / len(a):12.3f} {sum(b) / len(b):13.3f} {d:6.3f} {ks_p_value(d, len(a), len(b)):8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
