#!/usr/bin/env python3
"""What the observatory's orchestration costs (issue 21 §3): one round of 4 presets x 4 schemes x 2
runs x 10 s on a 2-worker LocalCluster, its wall time against the experiments it ran.

What is measured
    A LocalCluster of two workers, each one thread and `emulation=1` (two experiments at a time),
    started here; `pantheon observe SCHEDULE --once --scheduler ADDRESS` as a process of its own,
    timed from its start to its exit (Dask client, journal, the tasks' data dirs coming back and
    being verified, the status page). Each task records when its `pantheon test local` started and
    ended (observatory.json's ran_on: emulator, schemes, analysis of its 2 runs). Then
        ideal wall  = sum of the experiments' durations / 2 workers
        overhead    = wall / ideal wall - 1      (goal: at most 10 %)
    and, apart, what the harness adds to the experiments' 2 x 10 s of traffic each (namespaces,
    scheme start-up, analysis): sum of durations / (16 x 20 s) - 1, and the size of the data dirs
    that crossed the cluster. No archive: uploads are the
    archive's cost, not orchestration's. Two experiments share the machine's cores at a time, as the
    issue asks; on a 2-core machine the durations are longer than alone, and both sides of the ratio
    include that.

Run as root, from the repository (after cargo build --release), under the bench lock:
    flock /work/bench.lock .venv/bin/python bench/observatory_overhead.py [--runtime 10] [--runs 2]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRESETS = ["nepal-wifi", "india-wired", "china-wired", "mexico-wired"]
SCHEMES = ["cubic", "bbr", "copa", "reno"]
WORKERS = 2
GOAL = 0.10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", type=float, default=10.0, help="seconds per run (default 10)")
    parser.add_argument("--runs", type=int, default=2, help="runs per experiment (default 2)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "python"))
    from distributed import LocalCluster

    with tempfile.TemporaryDirectory(prefix="observatory-bench-") as tmp, \
            LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
                         resources={"emulation": 1},
                         dashboard_address="127.0.0.1:0") as cluster:
        plan = Path(tmp) / "schedule.toml"
        plan.write_text(f"runtime_s = {args.runtime:g}\nruns = {args.runs}\n\n[[matrix]]\n"
                        f"presets = {json.dumps(PRESETS)}\nschemes = {json.dumps(SCHEMES)}\nflows = [1]\n")
        state = Path(tmp) / "state"
        start, start_t = time.monotonic(), time.time()
        done = subprocess.run([sys.executable, "-m", "pantheon.cli", "observe", str(plan), "--once", "--state",
                               str(state), "--scheduler", cluster.scheduler_address, "--retries", "0"],
                              env={**os.environ, "PYTHONPATH": str(REPO / "python")})
        wall_s = time.monotonic() - start
        end_t = time.time()
        lines = [json.loads(text) for text in (state / "journal.jsonl").read_text().splitlines()]
        data_bytes = [sum(f.stat().st_size for f in Path(line["data_dir"]).rglob("*") if f.is_file())
                      for line in lines if line["event"] == "done"]
    finished = [line for line in lines if line["event"] in ("done", "failed") and line.get("ran_on")]
    durations_s = [line["ran_on"]["ended_t"] - line["ran_on"]["started_t"] for line in finished]
    experiments = len(PRESETS) * len(SCHEMES)
    failed = [line["experiment"] for line in finished if line["event"] == "failed"]
    total_s = sum(durations_s)
    ideal_s = total_s / WORKERS
    traffic_s = experiments * args.runs * args.runtime
    print(f"observatory exit status {done.returncode}; {len(finished)}/{experiments} experiments finished"
          + (f", failed: {', '.join(failed)}" if failed else ""))
    print(f"experiments: {len(durations_s)}, each {min(durations_s):.1f} to {max(durations_s):.1f} s "
          f"(mean {total_s / len(durations_s):.1f} s; {args.runs} x {args.runtime:g} s of traffic)")
    print(f"sum of experiments {total_s:.1f} s; / {WORKERS} workers = ideal wall {ideal_s:.1f} s")
    print(f"wall {wall_s:.1f} s; orchestration overhead {100 * (wall_s / ideal_s - 1):+.1f} % (goal <= {100 * GOAL:.0f} %)")
    first_t = min(line["ran_on"]["started_t"] for line in finished)
    last_t = max(line["ran_on"]["ended_t"] for line in finished)
    print(f"of the wall: {first_t - start_t:.1f} s before the first experiment started (start-up), "
          f"{end_t - last_t:.1f} s after the last ended; busy workers {100 * total_s / (WORKERS * (last_t - first_t)):.1f} % "
          "of the time between")
    if data_bytes:
        print(f"data dirs sent back: mean {sum(data_bytes) / len(data_bytes) / 1e6:.1f} MB, "
              f"largest {max(data_bytes) / 1e6:.1f} MB (unpacked)")
    print(f"harness per experiment: {total_s:.1f} s for {traffic_s:.0f} s of traffic ({100 * (total_s / traffic_s - 1):+.1f} %)")
    return 0 if done.returncode == 0 and wall_s <= (1 + GOAL) * ideal_s else 1


if __name__ == "__main__":
    sys.exit(main())
