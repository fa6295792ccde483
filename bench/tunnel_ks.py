#!/usr/bin/env python3
"""Does the tunnel change how schemes behave? The Pantheon paper's check (§3.1.2), redone.

What is measured
    Each scheme, RUNS runs inside the tunnel (a `pantheon test local` run) and RUNS runs outside it
    (the scheme's own sender and receiver straight through `pantheon emulate`), all on one emulated
    path: 12 Mbit/s each way, 20 ms one-way delay, a 90 000-byte DropTail buffer on the uplink; with
    `--uplink-poisson MBPS` the uplink delivers at Poisson instants of that mean rate instead, a
    path whose runs vary as the paper's real paths did (each run has its own emulator seed). Each
    run yields its throughput and its 95th-percentile one-way delay, both read from the emulator's
    uplink log, the same vantage point inside and outside the tunnel (bytes through the bottleneck
    over the span of departures; per-packet time from entering the path to leaving it), and the
    95th-percentile delay of its first second alone, where a flow's start-up would show a
    difference. A two-sample Kolmogorov-Smirnov test compares the inside and outside samples of each
    metric; a large p-value means no detectable difference (the paper: p >= 0.2 for Cubic, Vegas and
    BBR over 50 runs each).

    Runs go in rounds, each round one run of every scheme inside and one outside, so that a change
    of the machine's load during the bench falls on both samples alike (a bench that ran all the
    inside runs first once showed BBR's p95 delay 25 % higher inside, which interleaved rounds did
    not reproduce: docs/tunnel.md).

    KS p-values use the asymptotic Kolmogorov distribution with Stephens' small-sample correction
    (Numerical Recipes §14.3), good to a few percent for samples of 20.

Results accumulate in a JSON-lines file (`--results`), one line per run, so a long bench can be run
in pieces (`--budget` seconds each, e.g. under a shared lock) and resumed: each invocation runs
rounds until every scheme has RUNS runs each side or its budget is spent, then prints the table of
everything in the file for this path.

Run as root after ./setup.sh --no-run:
    python3 bench/tunnel_ks.py [--runs 20] [--runtime 10] [--schemes cubic,bbr,vegas-user]
                               [--uplink-poisson 12] [--results FILE] [--budget SECONDS]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import support
from pantheon import link_log
from pantheon.analysis.metrics import nearest_rank
from pantheon.schemes import lookup

REPO = support.REPO

PANTHEON = REPO / ".venv" / "bin" / "pantheon"
BASE_PATH = ["--delay", "20", "--downlink-rate", "12", "--uplink-queue-bytes", "90000"]
PORT = 5600
METRICS = (("throughput_mbps", "throughput Mbit/s"), ("p95_ms", "p95 delay ms"), ("p95_first_s_ms", "p95 first 1 s ms"))
# Seeds of the emulator's random choices: inside and outside runs draw from disjoint ranges, so the
# two samples are independent, as the KS test assumes.
INSIDE_SEEDS, OUTSIDE_SEEDS = 100_000, 200_000


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


def metrics(uplink_log: Path) -> dict[str, float]:
    """Throughput (Mbit/s), p95 one-way delay (ms) and that of the first second, of the data
    packets in an emulator uplink log."""
    log = link_log.read(uplink_log)
    data = [d for d in log.departures if d.size_bytes >= DATA_MIN_BYTES]
    start_us = data[0].t_us
    span_us = data[-1].t_us - start_us
    delays_ms = [log.delay_us(d) / 1000 for d in data]
    first_s_ms = [ms for d, ms in zip(data, delays_ms) if d.t_us - start_us < 1_000_000]
    return {
        "throughput_mbps": 8 * sum(d.size_bytes for d in data) / span_us,
        "p95_ms": nearest_rank(sorted(delays_ms), 95),
        "p95_first_s_ms": nearest_rank(sorted(first_s_ms), 95),
    }


def outside_run(scheme: str, path: list[str], runtime_s: float, seed: int, log: Path) -> dict[str, float]:
    """The scheme's receiver in a fresh namespace, its sender in `pantheon emulate` inside it: the
    harness's topology without the tunnel. The receiver starts first, as every scheme here wants."""
    (manifest,) = lookup([scheme])
    receiver = [part.replace("{local}", "0.0.0.0") for part in manifest.command("receiver", port=PORT)]
    sender = " ".join(shlex.quote(part).replace("'{peer}'", '"$MAHIMAHI_BASE"').replace("{peer}", '"$MAHIMAHI_BASE"')
                      for part in manifest.command("sender", port=PORT))
    ns = f"pbench-ks-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    receiver_process = None
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        receiver_process = subprocess.Popen(["ip", "netns", "exec", ns, *receiver], stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL)
        flow = f"sleep 0.3; {sender} & s=$!; sleep {runtime_s}; kill $s; wait $s"
        subprocess.run(["ip", "netns", "exec", ns, str(PANTHEON), "emulate", *path, "--seed", str(seed),
                        "--uplink-log", str(log), "--", "sh", "-c", flow], check=True, capture_output=True)
    finally:
        if receiver_process:
            receiver_process.terminate()
            receiver_process.wait()
        subprocess.run(["ip", "netns", "del", ns], check=False)
    return metrics(log)


def inside_runs(schemes: list[str], path: list[str], runtime_s: float, seed: int, data: Path) -> dict[str, dict[str, float]]:
    """One run of each scheme through the tunnel, as `pantheon test local` runs it."""
    subprocess.run([str(PANTHEON), "test", "local", "--schemes", ",".join(schemes), "--run-times", "1", "--quiet",
                    "--no-analyze", "--runtime", str(runtime_s), "--seed", str(seed), "--data-dir", str(data), *path],
                   check=True, stdout=subprocess.DEVNULL)
    return {scheme: metrics(data / scheme / "run1" / "uplink.log") for scheme in schemes}


def read_results(results: Path, path_key: str) -> list[dict]:
    if not results.exists():
        return []
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    return [row for row in rows if row["path"] == path_key]


def print_table(rows: list[dict], schemes: list[str], path_key: str) -> None:
    print(f"\npath: {path_key}")
    print(f"{'scheme':11} {'metric':18} {'runs in/out':>11} {'inside mean':>12} {'outside mean':>13} {'KS D':>6} {'p-value':>8}")
    for scheme in schemes:
        for key, name in METRICS:
            a = [r[key] for r in rows if r["scheme"] == scheme and r["side"] == "inside"]
            b = [r[key] for r in rows if r["scheme"] == scheme and r["side"] == "outside"]
            if not a or not b:
                continue
            d = ks_statistic(a, b)
            print(f"{scheme:11} {name:18} {f'{len(a)}/{len(b)}':>11} {sum(a) / len(a):12.3f} {sum(b) / len(b):13.3f} "
                  f"{d:6.3f} {ks_p_value(d, len(a), len(b)):8.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each scheme on each side (default 20)")
    parser.add_argument("--runtime", type=float, default=10.0, help="seconds per run (default 10)")
    parser.add_argument("--schemes", default="cubic,bbr,vegas-user")
    parser.add_argument("--uplink-poisson", type=float, metavar="MBPS",
                        help="Poisson uplink deliveries at this mean rate instead of a constant 12 Mbit/s")
    parser.add_argument("--results", type=Path, help="JSON-lines file the runs accumulate in (default: a temporary one)")
    parser.add_argument("--budget", type=float, default=math.inf, metavar="SECONDS",
                        help="start no new round after this many seconds (resume later with the same --results)")
    args = parser.parse_args()
    schemes = args.schemes.split(",")
    uplink = ["--uplink-poisson", f"{args.uplink_poisson:g}"] if args.uplink_poisson else ["--uplink-rate", "12"]
    path = [*BASE_PATH, *uplink]
    path_key = f"{' '.join(path)}, {args.runtime:g} s"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pantheon-ks-") as tmp_name:
        tmp = Path(tmp_name)
        results = args.results or tmp / "results.jsonl"
        while time.monotonic() - started < args.budget:
            rows = read_results(results, path_key)
            done = {(s, side): sum(r["scheme"] == s and r["side"] == side for r in rows)
                    for s in schemes for side in ("inside", "outside")}
            round_index = min(done.values())
            if round_index >= args.runs:
                break
            print(f"round {round_index + 1}/{args.runs}", file=sys.stderr, flush=True)
            wanted = [s for s in schemes if done[(s, "inside")] == round_index]
            measured = [{"scheme": s, "side": "inside", "seed": INSIDE_SEEDS + round_index, **m}
                        for s, m in inside_runs(wanted, path, args.runtime, INSIDE_SEEDS + round_index,
                                                tmp / f"inside{round_index}").items()]
            for s in schemes:
                if done[(s, "outside")] == round_index:
                    m = outside_run(s, path, args.runtime, OUTSIDE_SEEDS + round_index, tmp / f"outside-{s}.log")
                    measured.append({"scheme": s, "side": "outside", "seed": OUTSIDE_SEEDS + round_index, **m})
            with open(results, "a") as f:
                for row in measured:
                    f.write(json.dumps({"path": path_key, **row}) + "\n")
        print_table(read_results(results, path_key), schemes, path_key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
