#!/usr/bin/env python3
"""ns-3's CoDel, PIE and FQ-CoDel against ours, on the same dumbbell, in the simulator (issue 34 §4).

What is run
    One bulk flow for --runtime simulated seconds (default 30) over a bottleneck of 12 and 100
    Mbit/s each way, 20 ms one-way delay each way (40 ms RTT), whose data-direction queue is
      codel     target 5 ms, interval 100 ms (RFC 8289)
      pie       qdelay_ref 15 ms, tupdate 15 ms, max_burst 150 ms (RFC 8033)
      fq-codel  the defaults (RFC 8290: target 5 ms, interval 100 ms, 1024 flows)
      droptail  (only with --queues ...,droptail) no AQM: the control, where both sides must agree
    each with a limit of 1000 packets and no ECN (ns-3's UseEcn false and TCP's ECN off; our
    controllers send Not-ECT unless told otherwise), so the AQM drops. The flow is ns-3's TcpCubic
    or TcpNewReno (1448-byte segments, 1500-byte IP packets, every segment acknowledged) in ns-3,
    and crates/cc's `cubic` or `reno` (1464-byte datagrams, 1500 bytes on the path, every datagram
    acknowledged) in `pantheon-sim run`. ns-3: bench/ns3/aqm_dumbbell.cc, Debian 12's ns-3.37
    (libns3-dev), installed and built into target/ns3/ by this script when missing, as
    bench/sim_speed.py does for dumbbell.cc. Ours: target/release/pantheon-sim (or $PANTHEON_BIN_DIR)
    with `--delay 20 --uplink-rate R --downlink-rate R --uplink-queue Q --uplink-queue-args
    packets=1000,...`, the downlink (the ACKs) unqueued in both.

What is printed, per rate, queue and scheme: ns-3, ours and ours/ns-3 of
    Mbit/s     IP bytes that left the bottleneck on the data direction (retransmissions included)
               per second, from --warmup (default 5 s, past slow start) to the end; ns-3's link also
               carries a 2-byte PPP header per packet, so its ceiling is rate × 1500/1502 (11.98 of 12)
    p50 p95 p99 mean   the queueing delay of those packets, in ms
    drops      packets the bottleneck queue dropped over the same time (the limit or the AQM)
    sojourn    ns-3 only: the median of the qdisc's own sojourn time, what ns-3's AQM acts on

The queueing delay, on both sides, is how long a packet waited at the bottleneck before its own
serialisation began: from reaching the bottleneck queue to its last bit leaving the link, less the
packet's serialisation time at the bottleneck rate (1500 bytes: 1 ms at 12 Mbit/s, 0.12 ms at 100).
    ns-3   per packet (bench/ns3/aqm_dumbbell.cc), keyed by the packet's uid: the root qdisc's
           Enqueue trace gives the arrival, the bottleneck device's PhyTxEnd trace the end of its
           transmission; delay = tx end − enqueue − (IP bytes + 2-byte PPP header) × 8 / rate. That is
           the qdisc's sojourn (its Enqueue to Dequeue traces, which is also what its SojournTime
           trace reports) plus the wait in the device's own queue below the qdisc, cut here to one
           packet, the least ns-3 allows: a dequeued packet waits there while the one before it is
           serialised.
    ours   the native uplink log pantheon-sim writes with --text-logs (crates/format/src/link_log.rs,
           `t_us - uid bytes delay_us lateness_us`): delay_us is the time since the packet entered
           the path, and the path is delay line → queue → link (crates/link/src/path.rs), so the
           packet reached the queue at entry + 20 ms exactly, and left at t_us, the delivery
           opportunity that carried its last byte (Mahimahi's link, crates/link/src/link.rs); delay =
           delay_us − 20 000 − 1500 × 8 / rate, floored at 0 (a packet reaching an idle link leaves at
           the next opportunity, up to one serialisation time later, which is its serialisation, not
           a wait). Drops are the log's `d` lines with cause `queue` or `aqm`; CE marks (`ce`) would
           mean ECN was on, and are counted and reported.
Both are sampled per departing packet, so a busy period weighs by its packets, as the AQMs see them.

Why
    ns-3's traffic-control queue discs are the reference most AQM papers simulate against. Ours are
    written from the RFCs; the same dumbbell, parameters and congestion controllers on both sides
    show whether they hold the queue where ns-3's do, at what throughput. What cannot match: the
    two TCPs (ns-3's TcpCubic has HyStart and SACK; ours is crates/cc over pantheon-udp's
    datagrams), and where each AQM takes its sojourn time (ns-3's at the qdisc's dequeue, a packet
    time before transmission; ours when the link takes the packet, the opportunity that carries it).

Reading the table (measured 2026-11-29, one run per case)
    - Where the sojourn is taken. For the same wait before serialisation, ns-3's AQM sees one packet
      time less (the dequeued packet still waits in the device queue) and ours one packet time more
      (our link dequeues at the opportunity that carries the packet's last byte): at 12 Mbit/s ours
      acts on a queue 2 ms shorter, 0.24 ms at 100. With Reno, whose drops agree (21 and 20 behind
      CoDel at 12 Mbit/s, 15 and 16 behind PIE), CoDel's p95 is 6.0 ms ours, 7.8 ms ns-3's; ns-3
      rebuilt with a target of 3 ms instead of 5 gives 5.8 ms, 10.12 Mbit/s (ours 10.14) and 22
      drops: the gap is the offset, not the control law.
    - Cubic. ns-3.37's TcpCubic has no Reno-friendly region (RFC 9438 §4.3, RFC 8312 §4.2's
      TCP-friendly region; ns-3 added it in 3.41, its merge request 1791); ours has it. At 40 ms RTT and tens of packets of window that region sets
      the growth after a loss, so ours refills the queue sooner and meets 3x as many drops behind
      CoDel and PIE (22 against 7 at 12 Mbit/s) and 1.5x behind the DropTail control.
    - p50 behind CoDel and FQ-CoDel with Cubic: ns-3's 0, ours 0.96 ms at 12 Mbit/s. On both sides
      the ACK-clocked arrivals make the delay come in steps of one packet time (ns-3's at 0.82 +
      k ms, ours at 0.96 + k ms, the phase of our arrivals against the link's opportunities); ns-3's
      queue is empty for 60 % of the packets, ours for 44 % (Cubic above), so the median falls on 0
      for one and on the first step for the other: less than one packet time apart.
    - FQ-CoDel with one flow is CoDel on both sides: the rows are identical.

    .venv/bin/python bench/aqm_ns3.py                       # ~2 min; as root if ns-3 must be installed
    .venv/bin/python bench/aqm_ns3.py --rates 12 --schemes cubic --queues codel,droptail --runs 3
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import support
from pantheon.binaries import MissingBinary, binary
from pantheon.sim.simulator import PROGRAM
from support import ns3
from support.figures import comma_list, number

REPO_ROOT = support.REPO

NS3_BINARY = ns3.binary("aqm_dumbbell")

DELAY_MS = 20
LIMIT_PACKETS = 1000
QUEUES = ("codel", "pie", "fq-codel", "droptail")
OUR_QUEUE_ARGS = {
    "codel": "target=5,interval=100",
    "pie": "qdelay_ref=15,tupdate=15,max_burst=150",
    "fq-codel": "",
}
"""Each queue's parameters in Mahimahi's form (beside packets=LIMIT); ns-3's are in aqm_dumbbell.cc."""
SCHEMES = ("cubic", "reno")
"""crates/cc specs; aqm_dumbbell.cc's --cc takes the same names (TcpCubic, TcpNewReno)."""
RATES_MBPS = (12, 100)
PPP_HEADER_BYTES = 2
DROP_CAUSES = ("queue", "aqm")
"""Our link log's drop causes that are the bottleneck queue's (not random loss, not the policer)."""


@dataclass(frozen=True)
class Case:
    rate_mbps: float
    queue: str
    scheme: str


@dataclass(frozen=True)
class Departure:
    t_us: int
    ip_bytes: int
    queue_delay_us: int
    qdisc_sojourn_us: int | None = None
    """ns-3 only: the qdisc's own sojourn time of the packet."""


@dataclass
class Run:
    """One side's packets at the bottleneck: what left, with its queueing delay, and what was dropped."""
    departures: list[Departure]
    drop_times_us: list[int]
    marked: int = 0
    """Ours: packets the link marked CE (none unless ECN was on)."""
    qdisc: str = ""
    """ns-3: the qdisc's type and the attributes it ran with, as aqm_dumbbell.cc prints them."""


@dataclass(frozen=True)
class Summary:
    throughput_mbps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    drops: int
    packets: int
    qdisc_sojourn_p50_ms: float | None


def quantile(sorted_values: list[int], q: float) -> float:
    """The q-quantile by linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        return float("nan")
    at = q * (len(sorted_values) - 1)
    low = int(at)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (at - low)


def summarise(runs: list[Run], start_us: int, end_us: int) -> Summary:
    """Throughput, queueing-delay distribution and drops of the packets that left in [start, end),
    pooled over runs (throughput: their mean)."""
    delays: list[int] = []
    sojourns: list[int] = []
    bytes_total = 0
    drops = 0
    for run in runs:
        kept = [d for d in run.departures if start_us <= d.t_us < end_us]
        delays += [d.queue_delay_us for d in kept]
        sojourns += [d.qdisc_sojourn_us for d in kept if d.qdisc_sojourn_us is not None]
        bytes_total += sum(d.ip_bytes for d in kept)
        drops += sum(start_us <= t < end_us for t in run.drop_times_us)
    delays.sort()
    sojourns.sort()
    seconds = (end_us - start_us) / 1e6 * len(runs)
    return Summary(
        throughput_mbps=bytes_total * 8 / seconds / 1e6,
        p50_ms=quantile(delays, 0.50) / 1e3,
        p95_ms=quantile(delays, 0.95) / 1e3,
        p99_ms=quantile(delays, 0.99) / 1e3,
        mean_ms=sum(delays) / len(delays) / 1e3 if delays else float("nan"),
        drops=round(drops / len(runs)),
        packets=len(delays),
        qdisc_sojourn_p50_ms=quantile(sojourns, 0.5) / 1e3 if sojourns else None,
    )


def serialisation_us(ip_bytes: int, rate_mbps: float) -> float:
    return ip_bytes * 8 / rate_mbps


def read_our_uplink_log(path: Path, rate_mbps: float) -> Run:
    """Our native link log (crates/format/src/link_log.rs) → departures with their queueing delay."""
    run = Run([], [])
    propagation_us = DELAY_MS * 1000
    with path.open() as log:
        for line in log:
            fields = line.split()
            if len(fields) < 3 or line.startswith("#"):
                continue
            if fields[1] == "-":
                ip_bytes, delay_us = int(fields[3]), int(fields[4])
                waited_us = delay_us - propagation_us - serialisation_us(ip_bytes, rate_mbps)
                run.departures.append(Departure(int(fields[0]), ip_bytes, max(0, round(waited_us))))
                run.marked += len(fields) > 6 and fields[6] == "ce"
            elif fields[1] == "d" and fields[4] in DROP_CAUSES:
                run.drop_times_us.append(int(fields[0]))
    return run


def read_ns3_log(path: Path) -> Run:
    """aqm_dumbbell.cc's --log: `t_us - ip_bytes queue_delay_us qdisc_sojourn_us`, `t_us d ip_bytes`."""
    run = Run([], [])
    with path.open() as log:
        for line in log:
            fields = line.split()
            if fields[1] == "-":
                run.departures.append(Departure(int(fields[0]), int(fields[2]), max(0, int(fields[3])), int(fields[4])))
            else:
                run.drop_times_us.append(int(fields[0]))
    return run


def checked(argv: list[str], what: str) -> str:
    """Runs argv; its stdout, or the bench ends with the program's own message."""
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"aqm_ns3: {what} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return done.stdout


def run_ns3(case: Case, runtime_s: float, seed: int, scratch: Path) -> Run:
    log = scratch / f"ns3-{case.rate_mbps:g}-{case.queue}-{case.scheme}-{seed}.log"
    stdout = checked([str(NS3_BINARY), f"--rate-mbps={case.rate_mbps:g}", f"--delay-ms={DELAY_MS}", f"--queue={case.queue}",
             f"--limit-packets={LIMIT_PACKETS}", f"--cc={case.scheme}", f"--seconds={runtime_s:g}", f"--run={seed}",
             f"--log={log}"], f"ns-3 ({case.queue}, {case.scheme})")
    run = read_ns3_log(log)
    log.unlink()
    report = json.loads(stdout.strip().splitlines()[-1])
    run.qdisc = report["qdisc"] + " " + ", ".join(f"{k}={v}" for k, v in report["attributes"].items())
    return run


def our_path_options(case: Case) -> list[str]:
    path = ["--delay", str(DELAY_MS), "--uplink-rate", f"{case.rate_mbps:g}", "--downlink-rate", f"{case.rate_mbps:g}"]
    if case.queue == "droptail":
        # The limit flag every build of pantheon-sim takes, with or without --uplink-queue-args.
        return [*path, "--uplink-queue", "droptail", "--uplink-queue-packets", str(LIMIT_PACKETS)]
    args = ",".join(filter(None, [f"packets={LIMIT_PACKETS}", OUR_QUEUE_ARGS[case.queue]]))
    return [*path, "--uplink-queue", case.queue, "--uplink-queue-args", args]


def run_ours(sim: Path, case: Case, runtime_s: float, seed: int, scratch: Path) -> Run:
    out = scratch / f"ours-{case.rate_mbps:g}-{case.queue}-{case.scheme}-{seed}"
    checked([str(sim), "run", "--out", str(out), "--text-logs", "--runtime-s", f"{runtime_s:g}", "--seed", str(seed),
             "--flow", case.scheme, *our_path_options(case)], f"pantheon-sim ({case.queue}, {case.scheme})")
    run = read_our_uplink_log(out / "uplink.log", case.rate_mbps)
    for file in out.iterdir():
        file.unlink()
    out.rmdir()
    return run


def ours_accepts(sim: Path, queue: str) -> str | None:
    """None when pantheon-sim takes `--uplink-queue queue` with its arguments, else its one-line refusal."""
    case = Case(12, queue, SCHEMES[0])
    with tempfile.TemporaryDirectory(prefix="aqm-ns3-") as scratch:
        done = subprocess.run([str(sim), "run", "--out", scratch, "--runtime-s", "0.01", "--flow", case.scheme,
                               *our_path_options(case)], capture_output=True, text=True)
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["failed"])[-1]


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if theirs else "-"


def print_case(case: Case, ns3: Summary, ours: Summary | None) -> None:
    label = f"{case.queue:<9} {case.scheme:<6}"
    print(f"{label} {'ns-3':<10} {ns3.throughput_mbps:7.2f} {ns3.p50_ms:7.2f} {ns3.p95_ms:7.2f} {ns3.p99_ms:7.2f} "
          f"{ns3.mean_ms:7.2f} {ns3.drops:6d} {number(ns3.qdisc_sojourn_p50_ms, 2):>8}")
    if ours is None:
        return
    blank = " " * len(label)
    print(f"{blank} {'ours':<10} {ours.throughput_mbps:7.2f} {ours.p50_ms:7.2f} {ours.p95_ms:7.2f} {ours.p99_ms:7.2f} "
          f"{ours.mean_ms:7.2f} {ours.drops:6d}")
    cells = [ratio(o, n) for o, n in ((ours.throughput_mbps, ns3.throughput_mbps), (ours.p50_ms, ns3.p50_ms),
                                      (ours.p95_ms, ns3.p95_ms), (ours.p99_ms, ns3.p99_ms), (ours.mean_ms, ns3.mean_ms),
                                      (ours.drops, ns3.drops))]
    print(f"{blank} {'ours/ns-3':<10} {cells[0]:>7} {cells[1]:>7} {cells[2]:>7} {cells[3]:>7} {cells[4]:>7} {cells[5]:>6}",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default=",".join(str(r) for r in RATES_MBPS),
                        help="bottleneck rates, Mbit/s each way, comma-separated (default 12,100)")
    parser.add_argument("--queues", type=comma_list(QUEUES), default=list(QUEUES[:3]),
                        help="of codel,pie,fq-codel,droptail (default codel,pie,fq-codel)")
    parser.add_argument("--schemes", type=comma_list(SCHEMES), default=list(SCHEMES), help="of cubic,reno (default both)")
    parser.add_argument("--runtime", type=float, default=30.0, help="simulated seconds per run (default 30)")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds left out at the start of each run (default 5)")
    parser.add_argument("--runs", type=int, default=1, help="runs per case, seeds 1..N, packets pooled (default 1)")
    parser.add_argument("--no-ours", action="store_true", help="ns-3's figures only")
    args = parser.parse_args()
    try:
        rates = [float(r) for r in args.rates.split(",") if r.strip()]
    except ValueError:
        sys.exit(f"aqm_ns3: --rates takes numbers in Mbit/s, comma-separated; got {args.rates!r}")
    if not rates or min(rates) <= 0 or args.runs < 1 or not 0 <= args.warmup < args.runtime:
        sys.exit("aqm_ns3: need rates > 0, --runs >= 1 and 0 <= --warmup < --runtime")

    if why := ns3.ready("aqm_dumbbell", "aqm_ns3"):
        sys.exit(f"aqm_ns3: ns-3: {why}")
    sim = None
    refused: dict[str, str] = {}
    if not args.no_ours:
        try:
            sim = binary(PROGRAM)
        except MissingBinary as e:
            sys.exit(f"aqm_ns3: {e} (or --no-ours)")
        refused = {q: why for q in args.queues if (why := ours_accepts(sim, q))}

    start_us, end_us = round(args.warmup * 1e6), round(args.runtime * 1e6)
    print(f"one bulk flow, {DELAY_MS} ms one-way delay each way, queue limit {LIMIT_PACKETS} packets, no ECN; "
          f"figures over {args.warmup:g}-{args.runtime:g} s of simulated time, {args.runs} run(s) per case")
    print("Mbit/s: IP bytes leaving the bottleneck; p50..mean: queueing delay before serialisation, ms; "
          "drops: the queue's; sojourn: ns-3's qdisc sojourn p50, ms")
    for queue, why in refused.items():
        print(f"ours left out for {queue}: {sim} refuses it: {why}")
    cases = [Case(rate, queue, scheme) for rate in rates for queue in args.queues for scheme in args.schemes]
    started = time.perf_counter()
    marked = 0
    qdiscs: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="aqm-ns3-", dir=REPO_ROOT / "target") as scratch_dir:
        scratch = Path(scratch_dir)
        for i, case in enumerate(cases):
            if i == 0 or case.rate_mbps != cases[i - 1].rate_mbps:
                print(f"\n{case.rate_mbps:g} Mbit/s (one 1500-byte packet serialises in "
                      f"{serialisation_us(1500, case.rate_mbps) / 1e3:.2f} ms)")
                print(f"{'queue':<9} {'scheme':<6} {'side':<10} {'Mbit/s':>7} {'p50':>7} {'p95':>7} {'p99':>7} "
                      f"{'mean':>7} {'drops':>6} {'sojourn':>8}", flush=True)
            print(f"[{i + 1}/{len(cases)}] {case.rate_mbps:g} Mbit/s {case.queue} {case.scheme} ...", end="\r",
                  file=sys.stderr, flush=True)
            seeds = range(1, args.runs + 1)
            ns3_runs = [run_ns3(case, args.runtime, seed, scratch) for seed in seeds]
            qdiscs[case.queue] = ns3_runs[0].qdisc
            ours = None
            if sim is not None and case.queue not in refused:
                our_runs = [run_ours(sim, case, args.runtime, seed, scratch) for seed in seeds]
                marked += sum(r.marked for r in our_runs)
                ours = summarise(our_runs, start_us, end_us)
            print(" " * 60, end="\r", file=sys.stderr, flush=True)
            print_case(case, summarise(ns3_runs, start_us, end_us), ours)
    print("\nns-3's qdiscs as they ran:")
    for queue, qdisc in qdiscs.items():
        print(f"  {queue:<9} {qdisc}")
    if marked:
        print(f"\nnote: our link marked {marked} packets CE: ECN was on, so those AQM signals were not drops")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
