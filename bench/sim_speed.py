#!/usr/bin/env python3
"""How much faster than real time pantheon-sim is, against ns-3 on the same path, in one invocation.

What is measured
    1. Speed. One flow of the userspace Cubic (cubic-user's controller, crates/cc spec `cubic`)
       for 30 simulated seconds over a path of 12, 100 and 1000 Mbit/s each way, 20 ms one-way
       delay each way (40 ms RTT), a DropTail buffer of one bandwidth-delay product on the data
       direction (60 000, 500 000 and 5 000 000 bytes), each case twice: "files", `pantheon-sim
       run` writing what `pantheon sim` keeps of a run (records.parquet, datalink.log,
       acklink.log: about 125 bytes per data packet; before issue 14 it wrote the 4 tunnel logs and
       2 link logs that are now --text-logs, and Python merged them into those files afterwards),
       and "metrics", the same simulation as one `pantheon-sim batch` job, which writes nothing
       (what calibration and training use). Per case:
         wall s        the process's wall time, start to exit (everything included)
         x real time   simulated seconds / wall seconds
         Mevents/s     the simulator's event count (its JSON) / its own wall time
         peak MiB      the process's maximum resident set (its wait4 rusage, read by GNU time)
         us/packet     wall time / data packets sent: the cost of one packet
    2. Cost against packets: the 100 Mbit/s case for 10, 30 and 300 simulated seconds, both ways. A
       discrete-event simulator's cost is linear in events, so us/packet should stay about constant
       (the 10 s case carries the process start and the slow start in fewer packets).
    3. ns-3 (Debian 12's ns-3.37, libns3-dev) on the same path: bench/ns3/dumbbell.cc, BulkSend over
       ns-3's TcpCubic across a dumbbell whose bottleneck has the same rate, RTT and DropTail buffer,
       every segment acknowledged; its x real time is of Simulator::Run alone and is printed beside
       ours with the ratios and the targets. ns-3 at 1 Gbit/s runs --ns3-gbit-seconds simulated seconds (default 5;
       30 take about 4 minutes on a 2-core machine): the ratio is per simulated second, and the
       slow start is over in the first 0.4 s.
    4. The batch API's overhead per job (pantheon.sim.batch): 200 jobs of 0.2 simulated seconds at
       12 Mbit/s through one `pantheon-sim batch --jobs 1`, wall time minus the jobs' own, per job;
       and, for comparison, one `pantheon-sim run` process per job (files written) for 20 of them.
    5. End to end, as a user runs it: the whole `pantheon sim --schemes cubic-user --runtime 600
       --no-analyze` command (Python's start, the path check, the campaign's worker, pantheon-sim
       writing records.parquet, datalink.log and acklink.log, run.json and sim.json: a data dir
       `pantheon analyze` reads) at 12 and 100 Mbit/s, its wall time against the 600 simulated
       seconds; the analysis is left out (--no-analyze: it is `pantheon analyze`'s cost, not the
       simulator's). Also at 12 Mbit/s with --text-logs (the tunnel and link logs kept too).
       --e2e-runtime sets the seconds; --no-e2e skips it.
    6. The cost of each queue discipline (issue 34 §5): the 100 Mbit/s metrics case with the uplink
       queue DropTail (1 BDP, the anchor), CoDel, PIE, FQ-CoDel, RED and DualPI2 (their defaults, a
       limit of 1 BDP in bytes), us/packet and its ratio to DropTail's in the same invocation. The
       controller sees a different queue, so the packet counts differ; us/packet is the comparable
       figure. --only-queues runs this section alone.

Why
    Calibration (paper §4) and Indigo's training need thousands of runs; the issue's targets are
    >= 1000x real time at 12 Mbit/s, >= 100x at 100 Mbit/s, >= 10x at 1 Gbit/s, and end to end
    (issue 14 §6) >= 1000x at 12 Mbit/s and >= 100x at 100 Mbit/s for one 600 s run. Figures measured
    for ns-3 before this bench existed, for reference: 19x at 12, 2.9x at 100, 0.026x at 1000.

ns-3 is not part of ./setup.sh (benches are not); when pkg-config does not find it, this script
installs libns3-dev with apt-get (as root; it says so first) and builds dumbbell.cc into
target/ns3/. --no-ns3 skips it. Timings depend on the machine and its load: on a shared 2-core
machine run it when it is otherwise idle; --repeat N keeps the fastest of N runs of each of our
cases (ns-3's run once).

    cargo build --release                               # builds target/release/pantheon-sim
    .venv/bin/python bench/sim_speed.py                 # ~2 minutes here, ns-3 most of it
    .venv/bin/python bench/sim_speed.py --no-ns3 --repeat 5
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import support
from pantheon.binaries import MissingBinary, binary
from pantheon.sim.batch import FlowSpec, Job, link_options, run_batch
from pantheon.sim.simulator import PROGRAM
from support import ns3

REPO_ROOT = support.REPO

GNU_TIME = "/usr/bin/time"
NS3_BINARY = ns3.binary("dumbbell")
CC = "cubic"
DELAY_MS = 20
RATES_MBPS = (12, 100, 1000)
SIM_S = 30.0
LINEAR_RATE_MBPS = 100
LINEAR_SIM_S = (10.0, 30.0, 300.0)
TARGET_X = {12: 1000, 100: 100, 1000: 10}
NS3_BEFORE_X = {12: 19, 100: 2.9, 1000: 0.026}
BATCH_JOBS = 200
BATCH_JOB_S = 0.2
PROCESS_JOBS = 20
E2E_RATES_MBPS = (12, 100)
E2E_TARGET_X = {12: 1000, 100: 100}
QUEUES = ("droptail", "codel", "pie", "fq-codel", "red", "dualpi2")
"""Section 6's disciplines; DropTail first, the anchor."""
E2E_SCHEME = "cubic-user"
"""The scheme whose controller is crates/cc's `cubic`, the CC of the cases above."""


def bdp_bytes(rate_mbps: float) -> int:
    return round(rate_mbps * 1e6 / 8 * 2 * DELAY_MS / 1e3)


@dataclass(frozen=True)
class Timed:
    wall_s: float
    peak_mib: float
    report: dict


def timed(argv: list[str], stdin: str | None = None) -> Timed:
    """Runs argv alone (`stdin` written to it) under GNU time: its wall time, its peak RSS and its
    last JSON line. A failure ends the bench with the program's message.

    The peak is wait4's rusage of the program, read by GNU time rather than by this script: a
    child's ru_maxrss counts the memory of the process it was forked from at its exec (the kernel
    keeps the larger of the old and new image's high-water mark), which from this Python process
    adds 12 to 20 MiB; GNU time's own image adds about 1 MiB."""
    with tempfile.NamedTemporaryFile("r", prefix="sim-speed-rss-") as rss:
        started = time.perf_counter()
        done = subprocess.run([GNU_TIME, "-f", "%M", "-o", rss.name, *argv], input=stdin, capture_output=True, text=True)
        wall_s = time.perf_counter() - started
        peak_kib = int(rss.read().split()[-1]) if done.returncode == 0 else 0
    if done.returncode != 0:
        sys.exit(f"sim_speed: {Path(argv[0]).name} failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if report.get("ok") is False:
        sys.exit(f"sim_speed: the batch job failed: {report.get('error')}")
    return Timed(wall_s, peak_kib / 1024, report)


def best(argv: list[str], repeat: int, stdin: str | None = None) -> Timed:
    return min((timed(argv, stdin) for _ in range(repeat)), key=lambda t: t.wall_s)


def path_options(rate_mbps: float) -> list[str]:
    return link_options(rate_mbps=rate_mbps, delay_ms=DELAY_MS, queue_bytes=bdp_bytes(rate_mbps))


def simulate_files(sim: Path, rate_mbps: float, sim_s: float, repeat: int, scratch: Path) -> Timed:
    """`pantheon-sim run`, its files written (what `pantheon sim` runs for each run)."""
    out = scratch / f"{rate_mbps:g}-{sim_s:g}"
    out.mkdir()
    try:
        return best([str(sim), "run", "--out", str(out), "--seed", "0", "--runtime-s", f"{sim_s:g}", "--flow", CC,
                     *path_options(rate_mbps)], repeat)
    finally:
        shutil.rmtree(out)


def simulate_metrics(sim: Path, rate_mbps: float, sim_s: float, repeat: int, queue: str = "droptail") -> Timed:
    """The same simulation as one job of `pantheon-sim batch`: metrics only, no files; the uplink's
    queue `queue` with its defaults and a limit of 1 BDP."""
    options = [*link_options(rate_mbps=rate_mbps, delay_ms=DELAY_MS), "--uplink-queue", queue,
               "--uplink-queue-bytes", str(bdp_bytes(rate_mbps))]
    job = Job([FlowSpec(CC)], options, runtime_s=sim_s, seed=0)
    return best([str(sim), "batch", "--jobs", "1"], repeat, stdin=job.line(0) + "\n")


def print_queue_costs(sim: Path, repeat: int) -> None:
    """Section 6: each discipline's us/packet against DropTail's."""
    print(f"\nqueue disciplines at {LINEAR_RATE_MBPS} Mbit/s, {SIM_S:g} s, metrics (limit 1 BDP): us/packet against DropTail")
    print(f"{'queue':<10} {'wall s':>8} {'packets':>10} {'us/packet':>9} {'x DropTail':>10}")
    anchor_us = None
    for queue in QUEUES:
        t = simulate_metrics(sim, LINEAR_RATE_MBPS, SIM_S, repeat, queue)
        packets = sum(f["sent_packets"] for f in t.report["flows"])
        us_per_packet = t.wall_s * 1e6 / packets
        anchor_us = anchor_us or us_per_packet
        print(f"{queue:<10} {t.wall_s:8.3f} {packets:10,} {us_per_packet:9.3f} {us_per_packet / anchor_us:10.2f}", flush=True)


def run_ns3(rate_mbps: float, sim_s: float) -> Timed:
    """Once: its runs last seconds to minutes, long enough that a best-of adds little but time."""
    return best([str(NS3_BINARY), f"--rate-mbps={rate_mbps:g}", f"--delay-ms={DELAY_MS}",
                 f"--queue-bytes={bdp_bytes(rate_mbps)}", f"--seconds={sim_s:g}"], 1)


def row(label: str, t: Timed, sim_s: float) -> str:
    n = sum(f["sent_packets"] for f in t.report["flows"])
    return (f"{label:<28} {t.wall_s:8.3f} {sim_s / t.wall_s:11,.0f} {t.report['events'] / t.report['wall_s'] / 1e6:9.2f} "
            f"{t.peak_mib:8.1f} {n:>10,} {t.wall_s / n * 1e6:9.3f}")


def verdict(speed_x: float, target_x: float) -> str:
    return "ok" if speed_x >= target_x else "MISSED"


def batch_overhead() -> tuple[float, float]:
    """Per-job overhead of the batch API and of one `pantheon-sim run` process per job, in ms."""
    path = path_options(12)
    jobs = [Job([FlowSpec(CC)], path, runtime_s=BATCH_JOB_S, seed=i) for i in range(BATCH_JOBS)]
    started = time.perf_counter()
    results = run_batch(jobs, jobs_parallel=1)
    total_s = time.perf_counter() - started
    if failed := [r.error for r in results if not r.ok]:
        sys.exit(f"sim_speed: a batch job failed: {failed[0]}")
    batch_ms = (total_s - sum(r.wall_s for r in results)) / BATCH_JOBS * 1e3
    per_process = []
    with tempfile.TemporaryDirectory(prefix="sim-speed-", dir=REPO_ROOT / "target") as scratch:
        for i in range(PROCESS_JOBS):
            out = Path(scratch) / str(i)
            out.mkdir()
            t = timed([str(binary(PROGRAM)), "run", "--out", str(out), "--seed", str(i), "--runtime-s", f"{BATCH_JOB_S:g}",
                       "--flow", CC, *path])
            per_process.append(t.wall_s - t.report["wall_s"])
    return batch_ms, sum(per_process) / PROCESS_JOBS * 1e3


def end_to_end(rate_mbps: float, sim_s: float, repeat: int, scratch: Path, text_logs: bool = False) -> float:
    """The fastest wall time of the whole `pantheon sim` command of one run, analysis left out."""
    argv = [sys.executable, "-c", "import sys; from pantheon.cli import main; sys.exit(main())", "sim",
            "--schemes", E2E_SCHEME, "--runtime", f"{sim_s:g}", "--no-analyze", "--quiet",
            *(["--text-logs"] if text_logs else []), *path_options(rate_mbps)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT / "python"), os.environ.get("PYTHONPATH")]))}
    walls = []
    for i in range(repeat):
        data = scratch / f"e2e-{rate_mbps:g}-{text_logs}-{i}"
        started = time.perf_counter()
        done = subprocess.run([*argv, "--data-dir", str(data)], capture_output=True, text=True, env=env)
        walls.append(time.perf_counter() - started)
        if done.returncode != 0:
            sys.exit(f"sim_speed: pantheon sim failed ({done.returncode}): {done.stderr.strip()[-300:]}")
        if not (data / E2E_SCHEME / "run1" / "records.parquet").is_file():
            sys.exit(f"sim_speed: pantheon sim left no records.parquet in {data}")
        shutil.rmtree(data)
    return min(walls)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="run each of our cases this many times, keep the fastest (default 3)")
    parser.add_argument("--no-ns3", action="store_true", help="skip ns-3")
    parser.add_argument("--ns3-gbit-seconds", type=float, default=5.0, help="simulated seconds of ns-3 at 1 Gbit/s (default 5)")
    parser.add_argument("--no-e2e", action="store_true", help="skip the end-to-end pantheon sim rows")
    parser.add_argument("--e2e-runtime", type=float, default=600.0, help="simulated seconds of the end-to-end run (default 600)")
    parser.add_argument("--only-e2e", action="store_true", help="the end-to-end rows alone")
    parser.add_argument("--only-queues", action="store_true", help="the queue disciplines' rows alone (section 6)")
    args = parser.parse_args()
    try:
        sim = binary(PROGRAM)
    except MissingBinary as e:
        sys.exit(f"sim_speed: {e}")
    if args.only_e2e:
        return print_end_to_end(args)
    if args.only_queues:
        print_queue_costs(sim, args.repeat)
        return 0
    if not Path(GNU_TIME).exists() and (why := ns3.install(["time"], f"{GNU_TIME} (GNU time, for peak memory) is missing", "sim_speed")):
        sys.exit(f"sim_speed: {why}")
    why_no_ns3 = "skipped (--no-ns3)" if args.no_ns3 else ns3.ready("dumbbell", "sim_speed")

    header = f"{'case':<28} {'wall s':>8} {'x real time':>11} {'Mevents/s':>9} {'peak MiB':>8} {'packets':>10} {'us/packet':>9}"
    files_x, metrics_x = {}, {}
    print(f"pantheon-sim ({sim}): one flow of {CC} (crates/cc), {DELAY_MS} ms each way, DropTail 1 BDP")
    print("files: pantheon-sim run writing records.parquet, datalink.log, acklink.log (as pantheon sim does); "
          "metrics: one batch job, no files")
    with tempfile.TemporaryDirectory(prefix="sim-speed-", dir=REPO_ROOT / "target") as scratch:
        print(header)
        for rate in RATES_MBPS:
            t = simulate_files(sim, rate, SIM_S, args.repeat, Path(scratch))
            files_x[rate] = SIM_S / t.wall_s
            print(row(f"{rate} Mbit/s, {SIM_S:g} s, files", t, SIM_S), flush=True)
            t = simulate_metrics(sim, rate, SIM_S, args.repeat)
            metrics_x[rate] = SIM_S / t.wall_s
            print(row(f"{rate} Mbit/s, {SIM_S:g} s, metrics", t, SIM_S), flush=True)
        print(f"\ncost against packets at {LINEAR_RATE_MBPS} Mbit/s: us/packet should stay about constant")
        print(header)
        for sim_s in LINEAR_SIM_S:
            t = simulate_files(sim, LINEAR_RATE_MBPS, sim_s, args.repeat, Path(scratch))
            print(row(f"{LINEAR_RATE_MBPS} Mbit/s, {sim_s:g} s, files", t, sim_s), flush=True)
        for sim_s in LINEAR_SIM_S:
            t = simulate_metrics(sim, LINEAR_RATE_MBPS, sim_s, args.repeat)
            print(row(f"{LINEAR_RATE_MBPS} Mbit/s, {sim_s:g} s, metrics", t, sim_s), flush=True)

    print("\nns-3 (bench/ns3/dumbbell.cc: TcpCubic, same rate, RTT and buffer; x real time of Simulator::Run) "
          "and pantheon-sim, x real time")
    if why_no_ns3:
        print(f"ns-3: {why_no_ns3}")
    print(f"{'Mbit/s':<7} {'ns-3 sim s':>10} {'ns-3 wall s':>11} {'ns-3':>8} {'ns-3 Mbit/s':>11} {'ours files':>10} "
          f"{'ours metrics':>12} {'files/ns-3':>10} {'metrics/ns-3':>12} {'target':>7} {'files':>6} {'metrics':>7} {'ns-3 before':>11}")
    for rate in RATES_MBPS:
        ours = f"{files_x[rate]:10,.0f} {metrics_x[rate]:12,.0f}"
        goal = (f"{TARGET_X[rate]:>7} {verdict(files_x[rate], TARGET_X[rate]):>6} {verdict(metrics_x[rate], TARGET_X[rate]):>7} "
                f"{NS3_BEFORE_X[rate]:>11}")
        if why_no_ns3:
            print(f"{rate:<7} {'-':>10} {'-':>11} {'-':>8} {'-':>11} {ours} {'-':>10} {'-':>12} {goal}")
            continue
        sim_s = args.ns3_gbit_seconds if rate >= 1000 else SIM_S
        t = run_ns3(rate, sim_s)
        ns3_x = sim_s / t.report["wall_s"]
        print(f"{rate:<7} {sim_s:10g} {t.report['wall_s']:11.2f} {ns3_x:8.3f} {t.report['throughput_mbps']:11.2f} {ours} "
              f"{files_x[rate] / ns3_x:10,.0f} {metrics_x[rate] / ns3_x:12,.0f} {goal}", flush=True)

    print_queue_costs(sim, args.repeat)
    batch_ms, process_ms = batch_overhead()
    print(f"\nbatch API overhead ({BATCH_JOBS} jobs of {BATCH_JOB_S:g} s at 12 Mbit/s, --jobs 1): {batch_ms:.3f} ms per job; "
          f"one pantheon-sim run process per job: {process_ms:.2f} ms per job")
    return 0 if args.no_e2e else print_end_to_end(args)


def print_end_to_end(args: argparse.Namespace) -> int:
    sim_s = args.e2e_runtime
    print(f"\nend to end: pantheon sim --schemes {E2E_SCHEME} --runtime {sim_s:g} --no-analyze (one run, data dir "
          f"written, analysis left out), fastest of {args.repeat}")
    print(f"{'case':<34} {'wall s':>8} {'x real time':>11} {'target':>7} {'':>6}")
    with tempfile.TemporaryDirectory(prefix="sim-speed-e2e-", dir=REPO_ROOT / "target") as scratch:
        cases = [(rate, False) for rate in E2E_RATES_MBPS] + [(E2E_RATES_MBPS[0], True)]
        for rate, text_logs in cases:
            wall_s = end_to_end(rate, sim_s, args.repeat, Path(scratch), text_logs)
            label = f"{rate} Mbit/s, {sim_s:g} s" + (", --text-logs" if text_logs else "")
            target = "" if text_logs else f"{E2E_TARGET_X[rate]:>7} {verdict(sim_s / wall_s, E2E_TARGET_X[rate]):>6}"
            print(f"{label:<34} {wall_s:8.3f} {sim_s / wall_s:11,.0f} {target}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
