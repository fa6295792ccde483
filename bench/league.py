#!/usr/bin/env python3
"""How long a ccBench-sized league takes, where the time goes, and how it scales over Dask workers
(issue 36 §4).

What is measured
    1. End to end, as a user runs it: `pantheon league MATRIX --data-dir DIR` (default
       leagues/ccbench-single.toml: 630 environments x every available crates/cc scheme x 1 seed x
       30 s), from the command's start to its exit, the report included, on a LocalCluster of one
       thread per core. Where the time goes: the simulator's own time (the table's wall_s, summed;
       per scheme, the largest first), and the rest (Python, Dask, the batch API, process starts).
       The anchor, measured in the same run: that simulator time spread perfectly over the cores
       (Σ wall_s / cores), the least any driver of these simulations could take here; the ratio
       wall / anchor is the league's overhead and idle cores together. Peak RSS: the command's and
       its children's largest (getrusage), against a 600 s run's records held in memory.
    2. Scaling over a cluster of real processes: `dask scheduler` and N `dask worker --nthreads 1`
       processes (N = 1, 2, 4), worker i pinned to core i mod cores (taskset: each limited to its
       share), running `pantheon league --scheduler` on every --sample-th environment of the matrix.
       Speed-up against one worker, and the tables compared bit for bit (every column but wall_s,
       the simulator's own clock) against the LocalCluster's of the same sample.

    .venv/bin/python bench/league.py                       # ~15 minutes on a 2-core machine
    .venv/bin/python bench/league.py --no-e2e --workers 1,2 --sample 20
"""
from __future__ import annotations

import argparse
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import support  # noqa: F401  (puts python/ on sys.path)
from pantheon.league import table
from pantheon.repository import ROOT
from support.processes import stop

CORES = len(os.sched_getaffinity(0))
VOLATILE = ("wall_s",)


def league(matrix: Path, data_dir: Path, extra: list[str]) -> float:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pantheon.cli", "league", str(matrix), "--data-dir", str(data_dir),
                           "--quiet", *extra], capture_output=True, text=True, env=_env())
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        sys.exit(f"pantheon league failed ({done.returncode}): {done.stderr.strip()}")
    return wall


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "python")}


def end_to_end(matrix: Path, work: Path, schemes: list[str]) -> None:
    data_dir = work / "e2e"
    wall = league(matrix, data_dir, schemes)
    rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    rows = table.read(data_dir / table.TABLE_FILE)
    per_scheme: dict[str, float] = defaultdict(float)
    for r in rows:
        per_scheme[r["scheme"]] += r["wall_s"] or 0.0
    simulated = sum(per_scheme.values())
    anchor = simulated / CORES
    envs = len({r["environment"] for r in rows})
    print(f"1. end to end: {matrix.name}, {envs} environments, {len(rows)} runs of {rows[0]['duration_s']:g} s, "
          f"{CORES} cores")
    print(f"   wall {wall:.0f} s ({wall / 60:.1f} min), {len(rows) / wall:.1f} runs/s, "
          f"{len(rows) * rows[0]['duration_s'] / wall:,.0f} simulated s per s")
    print(f"   simulator's own time {simulated:.0f} s; anchor (that over {CORES} cores) {anchor:.0f} s; "
          f"wall / anchor {wall / anchor:.2f}")
    print(f"   the rest (Python, Dask, batch API, starts, idle cores): {wall - anchor:.0f} s; peak RSS {rss_mib:.0f} MiB")
    print("   simulator time per scheme:")
    for scheme, seconds in sorted(per_scheme.items(), key=lambda kv: -kv[1]):
        print(f"     {scheme:<20} {seconds:7.1f} s  {seconds / simulated:5.1%}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sampled(matrix: Path, every: int, work: Path) -> Path:
    """The matrix with every `every`-th environment, as a matrix file of one grid per environment."""
    from pantheon.league import matrix as matrices

    m = matrices.load(matrix)
    lines = [f'name = "{m.name}-sample{every}"', f"duration_s = {m.duration_s!r}", f"seeds = {list(m.seeds)}",
             *([f"window_s = {m.window_s!r}"] if m.window_s else [])]
    for env in m.environments[::every]:
        lines += ["[[grid]]", f"rate_mbps = [{env.rate_mbps!r}]", f"rtt_ms = [{env.rtt_ms!r}]",
                  f"buffer_bdp = [{env.buffer_bdp!r}]" if env.buffer_bdp is not None else 'buffer_bdp = ["infinite"]',
                  f'queue = ["{env.queue}"]', f"loss = [{env.loss!r}]", f'flows = ["{env.flows}"]']
        if env.step_factor is not None:
            lines += [f"step_factor = [{env.step_factor!r}]", f"step_at_s = {env.step_at_s!r}"]
    path = work / f"sample{every}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def scaling(matrix: Path, work: Path, workers: list[int], every: int, schemes: list[str]) -> None:
    sample = sampled(matrix, every, work)
    local = work / "local"
    local_s = league(sample, local, schemes)
    expected = [{k: v for k, v in r.items() if k not in VOLATILE} for r in table.read(local / table.TABLE_FILE)]
    print(f"2. scaling: every {every}th environment, {len(expected)} runs; LocalCluster of {CORES} threads: {local_s:.0f} s")
    base = None
    for n in workers:
        address = f"tcp://127.0.0.1:{_free_port()}"
        procs = []
        logs = work / f"dask{n}"
        logs.mkdir()
        try:
            procs.append(_start([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port",
                                 address.rsplit(":", 1)[1], "--dashboard-address", "127.0.0.1:0"], logs / "scheduler.log"))
            procs += [_start(["taskset", "-c", str(i % CORES), sys.executable, "-m", "dask", "worker", address,
                              "--nthreads", "1", "--dashboard-address", "127.0.0.1:0"], logs / f"worker{i}.log")
                      for i in range(n)]
            _wait_for_workers(address, n)
            out = work / f"workers{n}"
            wall = league(sample, out, [*schemes, "--scheduler", address])
        finally:
            for proc in reversed(procs):
                stop(proc)
        got = [{k: v for k, v in r.items() if k not in VOLATILE} for r in table.read(out / table.TABLE_FILE)]
        base = base or wall
        same = "identical" if got == expected else "DIFFERENT"
        print(f"   {n} worker{'s' if n > 1 else ''}: {wall:6.1f} s, speed-up {base / wall:4.2f}x; table {same} to the "
              "LocalCluster's")


def _start(argv: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=_env(), start_new_session=True)


def _wait_for_workers(address: str, n: int) -> None:
    from distributed import Client

    with Client(address, timeout="30s") as client:
        client.wait_for_workers(n, timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matrix", type=Path, default=ROOT / "leagues" / "ccbench-single.toml")
    parser.add_argument("--schemes", help="comma-separated (default: every available crates/cc scheme)")
    parser.add_argument("--workers", default="1,2,4", help="Dask worker counts for section 2 (default 1,2,4)")
    parser.add_argument("--sample", type=int, default=8, help="section 2 runs every SAMPLE-th environment (default 8)")
    parser.add_argument("--no-e2e", action="store_true", help="skip section 1")
    parser.add_argument("--no-scaling", action="store_true", help="skip section 2")
    args = parser.parse_args()
    schemes = ["--schemes", args.schemes] if args.schemes else []
    with tempfile.TemporaryDirectory(prefix="pantheon-league-bench-") as tmp:
        work = Path(tmp)
        if not args.no_e2e:
            end_to_end(args.matrix, work, schemes)
        if not args.no_scaling:
            scaling(args.matrix, work, [int(n) for n in args.workers.split(",")], args.sample, schemes)


if __name__ == "__main__":
    main()
