#!/usr/bin/env python3
"""What a hypervisor that steals the VM's CPUs does to an emulated run, against the simulator's
quiet host (harness/steal.py, docs/sim.md "The host's hypervisor: steal time").

What is measured
    One scheme over the demo's path (12 Mbit/s, 20 ms each way, 60 kB DropTail), one campaign a
    run (seeds 0..N-1, one after the other), each run's steal (run.json's host_steal_pct), its
    throughput and p95 one-way delay, and the share of the emulator's departures (both links' logs)
    written more than 0.5 ms after their model time; then the runs on a quiet host
    (analyze.host_was_stolen false) and the others side by side, with the simulator's mean over
    --sim-runs seeds as the anchor measured in the same run.

Why
    The tests that hold the simulator to the emulator compare quiet runs only; this shows what
    the runs they leave out differ by, on whatever the machine is doing now.

Run as root, from the repository (./setup.sh first), under the bench lock:
    flock /work/bench.lock python3 bench/host_steal.py [--scheme indigo] [--runs 24] [--runtime 10]
        [--sim-runs 20] [--data-dir DIR]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import support  # noqa: F401 - puts python/ on sys.path
from pantheon import link_log
from pantheon.analysis.analyze import host_was_stolen
from pantheon.schemes import registry
from pantheon.sim.simulable import cc_spec
from support import fidelity

LATE_US = 500


def late_pct(path: Path) -> float:
    """The share of a link log's departures written more than LATE_US after their model time, %."""
    departures = link_log.read(path).departures
    return 100 * sum(d.lateness_us > LATE_US for d in departures) / max(len(departures), 1)


def summary(label: str, runs: list[tuple[float, float, float | None, float | None]]) -> str:
    """Runs as (Mbit/s, p95 ms, steal %, late departures %); the last two None where not measured."""
    if not runs:
        return f"{label:<22} none"
    tput, p95 = [r[0] for r in runs], [r[1] for r in runs]
    steal = [r[2] for r in runs if r[2] is not None]
    late = [r[3] for r in runs if r[3] is not None]
    return (f"{label:<22} {len(runs):>3} runs  {statistics.mean(tput):6.2f} Mbit/s ({min(tput):.2f}-{max(tput):.2f})"
            f"  p95 {statistics.mean(p95):6.2f} ms ({min(p95):.1f}-{max(p95):.1f})"
            + (f"  stolen {min(steal):.2f}-{max(steal):.2f}%" if steal else "")
            + (f"  late {min(late):.2f}-{max(late):.2f}%" if late else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scheme", default="indigo")
    parser.add_argument("--runs", type=int, default=24)
    parser.add_argument("--runtime", type=float, default=10.0)
    parser.add_argument("--sim-runs", type=int, default=20)
    parser.add_argument("--data-dir", type=Path)
    args = parser.parse_args()
    root = args.data_dir or Path(tempfile.mkdtemp(prefix="host-steal-"))
    root.mkdir(parents=True, exist_ok=True)
    path = fidelity.all_paths()["demo"]
    path_file = root / "path.toml"
    path_file.write_text(path.toml())
    spec = cc_spec(registry().schemes[args.scheme])
    if spec is None:
        raise SystemExit(f"host_steal: {args.scheme} does not run in the simulator; pick one that does")
    simulated = [p for p in fidelity.simulated(path, {args.scheme: spec}, 1, args.runtime, range(args.sim_runs),
                                               root)[args.scheme].values() if p is not None]
    quiet, stolen = [], []
    print(f"{args.scheme} over the demo's path, {args.runtime:g} s runs; data in {root}")
    for seed in range(args.runs):
        data_dir = root / f"seed{seed}"
        if not (data_dir / "perf.json").exists():
            fidelity.emulated(path_file, [args.scheme], 1, args.runtime, seed, data_dir, timeout_s=240)
        pair = fidelity.perf_pairs(data_dir / "perf.json")[args.scheme][0]
        if pair is None:
            print(f"seed {seed:>2}: invalid run")
            continue
        steal = fidelity.steal_pcts(data_dir / "perf.json")[args.scheme][0]
        run_dir = data_dir / args.scheme / "run1"
        late = max(late_pct(run_dir / "uplink.log"), late_pct(run_dir / "downlink.log"))
        print(f"seed {seed:>2}: {pair[0]:6.2f} Mbit/s  p95 {pair[1]:6.1f} ms  stolen "
              f"{'-' if steal is None else f'{steal:.2f}%'}  departures > 0.5 ms late {late:.2f}%", flush=True)
        (stolen if host_was_stolen(steal) else quiet).append((*pair, steal, late))
    print(summary("quiet host", quiet))
    print(summary("stolen host", stolen))
    print(summary(f"simulator ({len(simulated)} seeds)", [(*p, None, None) for p in simulated]))


if __name__ == "__main__":
    main()
