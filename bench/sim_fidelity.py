#!/usr/bin/env python3
"""Fidelity: the simulator against the emulator, scheme by scheme, path by path.

What is measured
    Each userspace scheme (pantheon-udp over a crates/cc controller) runs RUNS times over each
    preset twice: in `pantheon sim` (virtual time, docs/sim.md) and in `pantheon test local` (the
    real emulator, tunnels and sockets), with the same options and seeds. Per scheme and preset
    the table shows the mean throughput and the mean p95 one-way delay of each, and their relative
    difference (sim − emu) / emu. The kernel's Cubic, BBR and Reno run only in the emulator; they
    are compared with their userspace versions in the simulator (cubic-user, bbr-user, reno-user),
    the rows marked `kernel`.

      tput Mbit/s   mean over runs of the flow's throughput (perf.json, docs/analysis.md)
      p95 ms        mean over runs of the flow's p95 one-way delay
      Δ             (sim − emu) / emu; `*` marks a difference above 10% (the issue's bound)

    Presets (python/pantheon/presets.py): a wired path (india-wired, 100 Mbit/s), a cellular Poisson
    path (mexico-cellular), a policer (policer-12mbps-10ms) and a buffer-sweep point
    (buffer-30000b).

Why
    Calibration and Indigo's training replace thousands of real-time runs with simulated ones
    (issue 7); that is only sound if the simulator reproduces what the emulator measures.

The emulator runs in real time on this machine's two cores: all schemes × 4 presets × 10 runs of
30 s take hours, so `--runs` and `--runtime` pick a smaller sweep, and the output says which.

Run as root, from the repository (cargo build --release and ./setup.sh first):
    python3 bench/sim_fidelity.py [--runs 10] [--runtime 30] [--schemes copa,vegas-user] [--presets india-wired]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PANTHEON = REPO / ".venv" / "bin" / "pantheon"
USERSPACE = ["copa", "copa-0.1", "vegas-user", "cubic-user", "reno-user", "bbr-user", "ledbat-user",
             "pcc-allegro", "pcc-vivace", "sprout", "verus", "scream"]
KERNEL_TWINS = {"cubic": "cubic-user", "bbr": "bbr-user", "reno": "reno-user"}
PRESETS = ["india-wired", "mexico-cellular", "policer-12mbps-10ms", "buffer-30000b"]
BOUND = 0.10


def campaign(mode: list[str], schemes: list[str], preset: str, runs: int, runtime_s: int, data_dir: Path) -> dict:
    """{scheme: (mean throughput Mbit/s, mean p95 delay ms)} of one campaign."""
    argv = [str(PANTHEON), *mode, "--schemes", ",".join(schemes), "--emulator", preset, "--run-times", str(runs),
            "--runtime", str(runtime_s), "--data-dir", str(data_dir), "--quiet"]
    done = subprocess.run(argv, capture_output=True, text=True)
    perf_path = data_dir / "perf.json"
    if not perf_path.exists():
        sys.exit(f"{' '.join(mode)} on {preset} wrote no perf.json (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    out = {}
    for name, scheme in json.loads(perf_path.read_text())["schemes"].items():
        flows = [run["flows"]["all"] for run in scheme["runs"].values() if run["valid"]]
        if flows:
            out[name] = (statistics.mean(f["throughput_mbps"] for f in flows),
                         statistics.mean(f["delay_p95_ms"] for f in flows), len(flows))
    return out


def delta(sim: float, emu: float) -> str:
    d = (sim - emu) / emu if emu else float("inf")
    return f"{d:+7.1%}{'*' if abs(d) > BOUND else ' '}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--runtime", type=int, default=30)
    parser.add_argument("--schemes", default=",".join(USERSPACE))
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--kernel", default=",".join(KERNEL_TWINS), help="kernel schemes to compare ('' for none)")
    parser.add_argument("--keep", type=Path, help="keep the data dirs here")
    args = parser.parse_args()
    schemes = [s for s in args.schemes.split(",") if s]
    kernel = [k for k in args.kernel.split(",") if k]
    twins = [KERNEL_TWINS[k] for k in kernel if KERNEL_TWINS[k] not in schemes]
    root = args.keep or Path(tempfile.mkdtemp(prefix="sim-fidelity-"))
    print(f"{args.runs} runs x {args.runtime} s per scheme and preset")
    print(f"{'scheme':<14} {'preset':<20} {'emu tput':>9} {'sim tput':>9} {'Δ':>9} {'emu p95':>8} {'sim p95':>8} {'Δ':>9}  runs")
    worst: list[tuple[float, str]] = []
    for preset in args.presets.split(","):
        t0 = time.monotonic()
        sim = campaign(["sim"], schemes + twins, preset, args.runs, args.runtime, root / preset / "sim")
        sim_s = time.monotonic() - t0
        emu = campaign(["test", "local"], schemes + kernel, preset, args.runs, args.runtime, root / preset / "emu")
        rows = [(s, s, "") for s in schemes] + [(k, KERNEL_TWINS[k], " kernel") for k in kernel]
        for emu_name, sim_name, note in rows:
            if emu_name not in emu or sim_name not in sim:
                print(f"{emu_name:<14} {preset:<20} missing: emu {'ok' if emu_name in emu else '-'}, "
                      f"sim {'ok' if sim_name in sim else '-'}")
                continue
            (et, ed, en), (st, sd, sn) = emu[emu_name], sim[sim_name]
            print(f"{emu_name:<14} {preset:<20} {et:9.2f} {st:9.2f} {delta(st, et)} {ed:8.1f} {sd:8.1f} {delta(sd, ed)}"
                  f"  {en}/{sn}{note}")
            worst.append((max(abs(st - et) / et, abs(sd - ed) / ed), f"{emu_name} on {preset}"))
        print(f"  ({preset}: simulated campaign {sim_s:.1f} s wall)")
    worst.sort(reverse=True)
    within = sum(1 for d, _ in worst if d <= BOUND)
    print(f"within {BOUND:.0%} on both metrics: {within}/{len(worst)}; largest: "
          + ", ".join(f"{what} {d:.0%}" for d, what in worst[:3]))
    if not args.keep:
        print(f"data: {root}")


if __name__ == "__main__":
    main()
