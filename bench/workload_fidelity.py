#!/usr/bin/env python3
"""A short-flow workload in the simulator against the emulator, and the simulator's speed on
10 000 transfers (issue 35 §4-5).

What is measured
    1. Fidelity: one scenario, Poisson arrivals of crates/cc Cubic transfers (pantheon-udp) at
       LOAD of a 12 Mbit/s, 20 ms path with a 5-BDP DropTail queue, sizes from the web-search CDF
       scaled down 20x (438 B to 1.5 MB, mean 83 kB: the shipped one's 1.7 MB mean would bring
       one arrival every 2 s at this rate), latency probes beside them; the same arrivals
       (the scenario's seed) run by `pantheon test local` (the anchor) and `pantheon sim`, RUNS
       runs each. Printed: per driver the slowdown p50 and p99 (perf.json's, per run, then their
       mean), the probes' RTT p50 and p99 under load, and the ratios simulator / emulator. Goal:
       within 10% at p50 and p99.
    2. Scale: 10 000 transfers of the same workload at 50% of 100 Mbit/s in the simulator: the
       simulator's own wall time (sim.json), the simulated time, and the ratio.

Why
    The simulator is the inner loop of the league, harm and Remy: its FCTs must be the emulator's.

Run as root from the repository (~4 min: RUNS emulated runs of 47 s):
    .venv/bin/python bench/workload_fidelity.py [--runs 3] [--load 0.5] [--skip-emulator]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import support  # noqa: F401 - puts python/ on sys.path
from pantheon.repository import ROOT
from pantheon.workload import load_sizes

PATH = ["--delay", "20", "--uplink-queue", "droptail", "--uplink-queue-bytes", "300000"]
SCALE = 20
"""The web-search sizes divided by this."""


def scaled_cdf(path: Path) -> Path:
    cdf = load_sizes("websearch", ROOT)
    path.write_text("".join(f"{max(1, round(size / SCALE))} {p:g}\n" for size, p in cdf.points))
    return path


def scenario(directory: Path, load: float, rate_mbps: float, arrivals_s: float, runtime_s: float) -> Path:
    path = directory / "web.toml"
    path.write_text(f'name = "web"\nruntime_s = {runtime_s}\n'
                    f'[[workload]]\nkind = "poisson"\nscheme = "cubic-user"\nload = {load}\nrate_mbps = {rate_mbps}\n'
                    f'sizes = "{scaled_cdf(directory / "web.cdf").name}"\nduration_s = {arrivals_s}\n'
                    f'[[workload]]\nkind = "probes"\n')
    return path


def pantheon(*args: str) -> None:
    done = subprocess.run([str(ROOT / ".venv/bin/pantheon"), *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"pantheon {' '.join(args[:2])} failed: {done.stderr.strip()[-500:]}")


def figures(data: Path) -> dict[str, float]:
    """Means over runs of the workload's slowdown p50/p99 and the probes' RTT p50/p99."""
    runs = json.loads((data / "perf.json").read_text())["schemes"]["web"]["runs"].values()
    values: dict[str, list[float]] = {"slowdown p50": [], "slowdown p99": [], "probe RTT p50 ms": [], "probe RTT p99 ms": []}
    for run in runs:
        transfers, probes = run["flows"]["1"]["transfers"], run["flows"]["2"]["probe_rtt_ms"]
        values["slowdown p50"].append(transfers["slowdown"]["p50"])
        values["slowdown p99"].append(transfers["slowdown"]["p99"])
        values["probe RTT p50 ms"].append(probes["p50"])
        values["probe RTT p99 ms"].append(probes["p99"])
    return {name: statistics.fmean(v) for name, v in values.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load", type=float, default=0.5)
    parser.add_argument("--skip-emulator", action="store_true", help="only the simulator's figures and its speed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="workload-fidelity-") as tmp:
        work = Path(tmp)
        web = scenario(work, args.load, 12, 40, 47)
        common = ["--scenario", str(web), "--run-times", str(args.runs), *PATH, "--quiet"]
        pantheon("sim", *common, "--data-dir", str(work / "sim"))
        sim = figures(work / "sim")
        emu = None
        if not args.skip_emulator:
            pantheon("test", "local", *common, "--data-dir", str(work / "emu"))
            emu = figures(work / "emu")
        print(f"Poisson cubic-user transfers at {args.load:g} of 12 Mbit/s, 20 ms, 300 kB DropTail; web-search sizes / {SCALE}; "
              f"{args.runs} runs each")
        print(f"{'':>18} {'emulator':>9} {'simulator':>9} {'sim/emu':>8}")
        for name, value in sim.items():
            anchor = emu[name] if emu else float("nan")
            print(f"{name:>18} {anchor:9.2f} {value:9.2f} {value / anchor:8.3f}")

        mean_bytes = load_sizes("websearch", ROOT).mean_bytes() / SCALE
        arrivals_s = 10_000 / (0.5 * 100e6 / (8 * mean_bytes))
        big = scenario(work, 0.5, 100, round(arrivals_s, 1), round(arrivals_s + 5, 1))
        pantheon("sim", "--scenario", str(big), "--uplink-rate", "100", "--downlink-rate", "100", "--delay", "20",
                 "--uplink-queue", "droptail", "--uplink-queue-bytes", "1250000", "--data-dir", str(work / "big"),
                 "--quiet", "--no-analyze")
        report = json.loads((work / "big" / "web" / "run1" / "sim.json").read_text())
        transfers = len(json.loads((work / "big" / "web" / "run1" / "run.json").read_text())["flows"][0]["transfers"])
        print(f"scale: {transfers} transfers, {report['sim_s']:.0f} s simulated in {report['wall_s']:.2f} s of the simulator's "
              f"wall time ({report['sim_s'] / report['wall_s']:.0f}x real time); goal: 10 000 in <= 10 s")


if __name__ == "__main__":
    main()
