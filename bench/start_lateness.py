#!/usr/bin/env python3
"""How far apart the hosts start flows planned together, emulated and simulated, and whether the
simulated seeds of the fidelity matrix's two-flow cells cover their emulated runs
(crates/sim/src/host.rs, docs/sim.md "What differs from the emulator").

What is measured
    Emulated: every valid two-flow run in DIR (bench/sim_fidelity.py --keep DIR): each flow's
    start lateness (run.json's start_lateness_ms) and the gap between the two flows' first
    datagrams into their tunnels (datalink.log), pantheon-udp schemes and the kernel's apart.
    Simulated: the same gap in `pantheon-sim run` of two flows of cubic planned together on the
    demo's path, seeds 0..N-1 (the anchor, measured in the same run).
    Coverage, per pantheon-sim build named by --builds (DIR's simulated seeds are kept under
    their build's hash): of each two-flow cell's emulated run (data/fidelity/emulated.json), on
    throughput and on p95, how far it lies outside the range of the cell's simulated seeds.

Why
    The simulator started every flow of a run at the same microsecond, and one emulated run of a
    cell lay outside its 20 seeds because of it (bbr-user on the demo's deep buffer, docs/sim.md).
    One emulated run against a mean says little for one cell; over the matrix's 798 two-flow
    cells, how many runs the seeds fail to cover says whether the simulator's spread is the
    emulator's.

Run from the repository (./setup.sh, cargo build --release, and the matrix's runs in DIR first):
    python3 bench/start_lateness.py --keep DIR [--seeds 400] [--builds OLD,NEW]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

import support  # noqa: F401 - puts python/ on sys.path
from pantheon.sim import replay, simulator
from support import fidelity

QUANTILES = (25, 50, 75, 90, 95)
OUTSIDE = (0.0, 0.02, 0.05, 0.10)
"""How far outside the seeds' range a run lies, as a share of its figure: the thresholds counted."""


def gap_ms(datalink_log: Path) -> float | None:
    """The gap between the two flows' first datagrams into their tunnels, ms (None: one sent nothing)."""
    firsts_us = replay.first_sends_us(datalink_log)
    return abs(firsts_us[1] - firsts_us[2]) / 1e3 if len(firsts_us) == 2 else None


def emulated_starts(root: Path) -> tuple[list[float], dict[bool, list[float]]]:
    """Every flow's start lateness (ms) and each run's gap (ms), by whether its scheme is the kernel's."""
    lateness: list[float] = []
    gaps: dict[bool, list[float]] = {False: [], True: []}
    for run_json in sorted(root.glob("*/*/2flow/emu-*/seed*/part*/*/run*/run.json")):
        run = json.loads(run_json.read_text())
        if not run.get("ok"):
            continue
        lateness += [late for late in run.get("start_lateness_ms") or [] if late is not None]
        if (gap := gap_ms(run_json.parent / "datalink.log")) is not None:
            gaps[run_json.parent.parent.name in fidelity.KERNEL_TWINS].append(gap)
    return lateness, gaps


def simulated_gaps(seeds: int) -> list[float]:
    """The gap between two cubic flows' first datagrams in pantheon-sim, seed by seed (ms)."""
    options = fidelity.DEMO.options(Path("."))
    flows = (simulator.FlowArg("cubic", 0.0, None),) * 2
    gaps = []
    with tempfile.TemporaryDirectory() as scratch:
        for seed in range(seeds):
            out = Path(scratch) / str(seed)
            argv = simulator.run_command(out, flows, options, 0.2, seed)
            subprocess.run(argv, check=True, capture_output=True, preexec_fn=simulator.die_with_parent)  # noqa: PLW1509
            if (gap := gap_ms(out / "datalink.log")) is not None:
                gaps.append(gap)
    return gaps


def outside(emulated: float, seeds: np.ndarray) -> float:
    """How far `emulated` lies outside the seeds' range, as a share of it (0: inside)."""
    return max(0.0, (seeds.min() - emulated) / emulated, (emulated - seeds.max()) / emulated)


def coverage(root: Path, build: str) -> dict[bool, list[float]]:
    """Each two-flow cell's emulated run's distance outside its simulated seeds (`outside`), on
    throughput and on p95, by whether the scheme is the kernel's (its seeds: its userspace twin's)."""
    runs = json.loads(fidelity.RECORD.read_text())["runs"]
    found: dict[bool, list[float]] = {False: [], True: []}
    for key, record in runs.items():
        path, buffer, flows, runtime, _seed, scheme = key.split()
        if flows != "2" or record.get("emu") is None:
            continue
        kept = fidelity.simulated_seeds_file(root / path / buffer / "2flow", float(runtime.removesuffix("s")), build)
        if not kept.exists():
            continue
        seeds = json.loads(kept.read_text()).get(fidelity.KERNEL_TWINS.get(scheme, scheme)) or {}
        values = np.array([v for v in seeds.values() if v is not None])
        if values.size:
            found[scheme in fidelity.KERNEL_TWINS] += [outside(record["emu"][m], values[:, m]) for m in (0, 1)]
    return found


def quantiles(values: list[float]) -> str:
    qs = np.percentile(values, QUANTILES)
    return "  ".join(f"p{q} {v:.2f}" for q, v in zip(QUANTILES, qs, strict=True)) + f"  max {max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, required=True, help="the fidelity matrix's data dir")
    parser.add_argument("--seeds", type=int, default=400, help="simulated runs of two flows (default 400)")
    parser.add_argument("--builds", default="", help="pantheon-sim builds (hash prefixes) whose seeds to compare "
                                                     "(default: the current build)")
    args = parser.parse_args()
    lateness, gaps = emulated_starts(args.keep)
    print(f"emulated, start lateness of {len(lateness)} flows (ms): {quantiles(lateness)}")
    for kernel, label in ((False, "pantheon-udp"), (True, "kernel TCP")):
        print(f"emulated, first-datagram gap, {len(gaps[kernel])} {label} runs (ms): {quantiles(gaps[kernel])}")
    sim_gaps = simulated_gaps(args.seeds)
    print(f"simulated, first-datagram gap, {len(sim_gaps)} seeds (ms): {quantiles(sim_gaps)}")
    builds = args.builds.split(",") if args.builds else [simulator.version()["binary_sha256"][:12]]
    for build in builds:
        for kernel, label in ((False, "pantheon-udp"), (True, "kernel TCP (their twins' seeds)")):
            found = np.array(coverage(args.keep, build)[kernel])
            counts = "  ".join(f">{t:.0%}: {int((found > t).sum())}" for t in OUTSIDE)
            print(f"build {build}, {label}: {found.size} cell metrics, emulated run outside the seeds' range by {counts}")


if __name__ == "__main__":
    main()
