#!/usr/bin/env python3
"""Indigo as a scheme over the emulator, on paths it was not trained on (issue 19 §3).

What is measured
    Indigo (and whatever other schemes --schemes names; Cubic by default, the paper's reference
    point) runs RUNS times over each path below in one `pantheon test local` campaign, and the
    same runs are simulated (`pantheon sim`, seeds 1..RUNS) so that the simulator's agreement with
    the emulator is read off the same table.

      util          mean over runs of the utilization (all flows' throughput / the link's rate)
      tput Mbit/s   mean over runs of the throughput of all flows
      p95q ms       mean over runs of the p95 one-way delay less the path's propagation delay:
                    the queueing the scheme causes
      jain          mean over runs of Jain's index of the flows' throughputs (two-flow paths)
      sim Δ         (simulated − emulated) / emulated of tput and of p95 one-way delay; `*` marks a
                    difference above 10% (the issue's bound)

Paths (the same both ways, a DropTail buffer on each). Indigo's training paths (docs/indigo.md)
are 5–200 Mbit/s × 10–80 ms one-way with an infinite buffer and no loss, and the calibrated
real-path presets; none of these is among them:
    1bdp-24       24 Mbit/s, 25 ms each way, one BDP (150 000 bytes): utilization (goal ≥ 85%)
    1bdp-60       60 Mbit/s, 15 ms each way, one BDP (225 000 bytes): utilization (goal ≥ 85%)
    deep-12       12 Mbit/s, 30 ms each way, five BDPs (450 000 bytes): p95 queueing far under
                  Cubic's, which fills the buffer (~300 ms)
    2flows-24     1bdp-24 with two flows started together: Jain's index (goal ≥ 0.9, the paper's
                  Fig. 7b)

Why
    Indigo is trained in the simulator on synthetic paths; this is where it meets the emulator, the
    real sockets and the tunnel, and paths it has not seen, and where the simulator that trained it
    is checked against the emulator for the scheme itself.

Campaigns already in --data-dir are reused, not rerun.

Run as root, from the repository (./setup.sh first):
    python3 bench/indigo_emulator.py [--runs 2] [--runtime 20] [--schemes indigo,cubic]
        [--paths 1bdp-24,1bdp-60,deep-12,2flows-24] [--data-dir DIR]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PANTHEON = REPO / ".venv" / "bin" / "pantheon"


@dataclass(frozen=True)
class PathSpec:
    rate_mbps: int
    delay_ms: int
    queue_bytes: int
    flows: int = 1

    def options(self) -> list[str]:
        return ["--delay", str(self.delay_ms), "--uplink-rate", str(self.rate_mbps),
                "--downlink-rate", str(self.rate_mbps), "--uplink-queue-bytes", str(self.queue_bytes),
                "--downlink-queue-bytes", str(self.queue_bytes), "--flows", str(self.flows)]


def bdp_bytes(rate_mbps: int, delay_ms: int) -> int:
    return rate_mbps * 1_000_000 // 8 * 2 * delay_ms // 1000


PATHS = {
    "1bdp-24": PathSpec(24, 25, bdp_bytes(24, 25)),
    "1bdp-60": PathSpec(60, 15, bdp_bytes(60, 15)),
    "deep-12": PathSpec(12, 30, 5 * bdp_bytes(12, 30)),
    "2flows-24": PathSpec(24, 25, bdp_bytes(24, 25), flows=2),
}
SIM_BOUND = 0.10


@dataclass(frozen=True)
class Cell:
    """One scheme's valid runs on one path: means over them."""

    utilization: float
    throughput_mbps: float
    delay_p95_ms: float
    jain: float | None
    runs: int


def cells(perf_path: Path) -> dict[str, Cell]:
    out = {}
    for name, scheme in json.loads(perf_path.read_text())["schemes"].items():
        runs = [run for run in scheme["runs"].values() if run["valid"]]
        if not runs:
            continue
        jains = [run["jain_index"] for run in runs if run.get("jain_index") is not None]
        out[name] = Cell(statistics.mean(run["utilization"] for run in runs),
                         statistics.mean(run["flows"]["all"]["throughput_mbps"] for run in runs),
                         statistics.mean(run["flows"]["all"]["delay_p95_ms"] for run in runs),
                         statistics.mean(jains) if jains else None, len(runs))
    return out


def campaign(kind: str, schemes: list[str], path: PathSpec, runs: int, runtime_s: int, data_dir: Path) -> dict[str, Cell]:
    """{scheme: Cell} of `schemes` on `path`, emulated (`kind` "test") or simulated ("sim"); run
    unless `data_dir` has it."""
    perf_path = data_dir / "perf.json"
    if not perf_path.exists():
        head = ["test", "local"] if kind == "test" else ["sim", "--seed", "1"]
        argv = [str(PANTHEON), *head, "--schemes", ",".join(schemes), *path.options(),
                "--run-times", str(runs), "--runtime", str(runtime_s), "--data-dir", str(data_dir), "--quiet"]
        done = subprocess.run(argv, capture_output=True, text=True)
        if not perf_path.exists():
            sys.exit(f"{kind} on {data_dir.name} wrote no perf.json (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return cells(perf_path)


def simulable(schemes: list[str]) -> list[str]:
    """The schemes `pantheon sim` can run: the kernel's TCP cannot be simulated."""
    sys.path.insert(0, str(REPO / "python"))
    from pantheon.schemes import registry
    from pantheon.sim.simulable import simulable as by_name

    known = by_name(registry())
    return [s for s in schemes if s in known]


def delta(sim: float, emu: float) -> str:
    r = (sim - emu) / emu if emu else float("inf")
    return f"{r:+6.1%}{'*' if abs(r) > SIM_BOUND else ' '}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs of each scheme per path (default 2)")
    parser.add_argument("--runtime", type=int, default=20, help="seconds per run (default 20)")
    parser.add_argument("--schemes", default="indigo,cubic", help="schemes to run (default indigo,cubic)")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"some of {', '.join(PATHS)}")
    parser.add_argument("--data-dir", type=Path, help="where campaigns go, and are reused from")
    args = parser.parse_args()
    schemes = [s for s in args.schemes.split(",") if s]
    paths = [p for p in args.paths.split(",") if p]
    if unknown := [p for p in paths if p not in PATHS]:
        sys.exit(f"unknown path: {', '.join(unknown)} (paths: {', '.join(PATHS)})")
    root = args.data_dir or Path(tempfile.mkdtemp(prefix="indigo-emulator-"))
    in_sim = simulable(schemes)
    print(f"{args.runs} runs x {args.runtime} s per scheme and path (campaigns already in {root} are reused)")
    print(f"{'path':<10} {'scheme':<18} {'util':>6} {'tput Mbit/s':>11} {'p95q ms':>8} {'jain':>6} "
          f"{'sim Δ tput':>11} {'sim Δ p95':>10}  runs")
    for name in paths:
        path = PATHS[name]
        emulated = campaign("test", schemes, path, args.runs, args.runtime, root / name / "emulator")
        simulated = campaign("sim", in_sim, path, args.runs, args.runtime, root / name / "sim") if in_sim else {}
        for scheme in schemes:
            e = emulated.get(scheme)
            if e is None:
                print(f"{name:<10} {scheme:<18} no valid run")
                continue
            s = simulated.get(scheme)
            sim_cols = (f"{delta(s.throughput_mbps, e.throughput_mbps):>11} {delta(s.delay_p95_ms, e.delay_p95_ms):>10}"
                        if s else f"{'-':>11} {'-':>10}")
            jain = f"{e.jain:6.3f}" if e.jain is not None else f"{'-':>6}"
            print(f"{name:<10} {scheme:<18} {e.utilization:6.1%} {e.throughput_mbps:11.2f} "
                  f"{e.delay_p95_ms - path.delay_ms:8.1f} {jain} {sim_cols}  {e.runs}")
    print(f"data: {root}")


if __name__ == "__main__":
    main()
