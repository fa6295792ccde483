#!/usr/bin/env python3
"""How fast the analysis is, on a run the size of a 30 s flow at 100 Mbit/s (~250 000 packets each
way, ~750 000 lines of the original Pantheon's datalink log with its delivery opportunities).

Times, in one invocation on the same file:
  1. metric extraction from the text log (pantheon.analysis: read the log, compute every metric
     of the run), in log lines per second;
  2. the same metrics by a straightforward line-by-line Python loop over the file (how the
     original Pantheon's analysis read its logs, Yan et al., ATC 2018, §3.2) — the ratio of 1 to 2
     is the speed-up, and both must agree on the numbers;
  3. the whole `pantheon analyze` of a data dir holding that run (records.parquet + datalink.log):
     metrics, time series, every plot, perf.json and the table, report.html and report.pdf.
Targets: 1 at >= 2 million lines/s; 3 under 5 s. Steps 1 and 2 report the fastest of --repeat
runs each (the machine may be shared); step 3 runs once, as a user would, in a fresh process's
first analysis.

    .venv/bin/python bench/analysis_speed.py                       # synthetic 30 s, 100 Mbit/s run
    .venv/bin/python bench/analysis_speed.py --log path/to/datalink.log   # time 1 and 2 on a real log
The synthetic run: one flow sending at 105 % of a constant 100 Mbit/s bottleneck (1500-byte
opportunities every 120 us) through a 20 ms path and a 375 kB DropTail queue, so it has queueing
delay and losses; written to a temporary directory, removed afterwards (--keep DIR to keep it).
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import support  # noqa: F401 - puts python/ on sys.path
from pantheon.analysis.analyze import analyze
from pantheon.analysis.logs import read_text_log
from pantheon.analysis.metrics import run_metrics

PACKET_BYTES = 1464
OPPORTUNITY_BYTES = 1500
DELAY_US = 20_000
QUEUE_BYTES = 375_000


def synthesise(run_dir: Path, seconds: float, rate_mbps: float) -> int:
    """Writes records.parquet, datalink.log and run.json of one synthetic run; returns log lines."""
    gap_us = OPPORTUNITY_BYTES * 8 / rate_mbps
    opportunities = np.round(np.arange(0, seconds * 1e6, gap_us)).astype(np.int64)
    send_gap_us = PACKET_BYTES * 8 / (rate_mbps * 1.05)
    sends = np.round(np.arange(0, seconds * 1e6, send_gap_us)).astype(np.int64)
    recv = np.full(sends.size, -1, dtype=np.int64)
    queue: list[int] = []
    head, next_send = 0, 0
    for t in opportunities:  # a FIFO DropTail queue behind the propagation delay
        while next_send < sends.size and sends[next_send] + DELAY_US <= t:
            if (len(queue) - head + 1) * PACKET_BYTES <= QUEUE_BYTES:
                queue.append(next_send)
            next_send += 1
        if head < len(queue):
            recv[queue[head]] = t
            head += 1
    got = recv >= 0
    pq.write_table(pa.table({
        "flow": pa.array(np.zeros(sends.size, dtype=np.uint16)), "direction": ["data"] * sends.size,
        "uid": pa.array(np.arange(sends.size, dtype=np.uint64)), "size_bytes": pa.array(np.full(sends.size, PACKET_BYTES, np.uint32)),
        "send_us": pa.array(sends), "recv_us": pa.array(np.where(got, recv, 0), mask=~got),
    }), run_dir / "records.parquet")
    lines = [(t, f"{t / 1000:.3f} # {OPPORTUNITY_BYTES}") for t in opportunities.tolist()]
    lines += [(t, f"{t / 1000:.3f} + {PACKET_BYTES} 1") for t in sends.tolist()]
    lines += [(r, f"{r / 1000:.3f} - {PACKET_BYTES} {(r - s) / 1000:.3f} 1") for s, r in zip(sends[got].tolist(), recv[got].tolist())]
    lines.sort(key=lambda item: item[0])
    with open(run_dir / "datalink.log", "w") as f:
        f.write("# init timestamp: 0.000\n")
        f.writelines(f"{line}\n" for _, line in lines)
    (run_dir / "run.json").write_text(json.dumps({
        "ok": True, "failures": [], "label": "cubic", "repetition": 1, "runtime_s": seconds, "t0_epoch_s": 0,
        "flows": [{"scheme": "cubic", "start_s": 0, "duration_s": seconds}]}))
    return len(lines) + 1


def line_by_line(path: Path) -> dict:
    """The straightforward way: one Python split per line, totals in dicts, delays in lists."""
    sent, delivered, first, last, delays = {}, {}, {}, {}, {}
    capacity_bits, first_opp, last_opp = 0, None, None
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            items = line.split()
            t, kind, bits = float(items[0]), items[1], int(items[2]) * 8
            if kind == "#":
                capacity_bits += bits
                first_opp = t if first_opp is None else first_opp
                last_opp = t
            elif kind == "+":
                flow = int(items[3]) if len(items) > 3 else 1
                sent[flow] = sent.get(flow, 0) + bits
            elif kind == "-":
                flow = int(items[4]) if len(items) > 4 else 1
                delivered[flow] = delivered.get(flow, 0) + bits
                first.setdefault(flow, t)
                last[flow] = t
                delays.setdefault(flow, []).append(float(items[3]))
    out = {}
    for flow, bits in delivered.items():
        d = sorted(delays[flow])
        out[flow] = {"throughput_mbps": bits / (1000 * (last[flow] - first[flow])),
                     "delay_p95_ms": d[math.ceil(0.95 * len(d)) - 1], "loss_rate": 1 - bits / sent[flow]}
    out["capacity_mbps"] = capacity_bits / (1000 * (last_opp - first_opp))
    return out


def best_of(repeat: int, work):
    """The fastest of `repeat` runs (a shared machine's other load only ever adds time), and the result."""
    best, result = math.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the synthetic run (default 30)")
    parser.add_argument("--rate-mbps", type=float, default=100.0, help="bottleneck rate of the synthetic run (default 100)")
    parser.add_argument("--log", type=Path, help="time steps 1 and 2 on this datalink log instead")
    parser.add_argument("--keep", type=Path, help="write the synthetic data dir here and keep it")
    parser.add_argument("--repeat", type=int, default=3, help="time steps 1 and 2 this many times, report the fastest (default 3)")
    args = parser.parse_args()

    scratch = None
    if args.log:
        with open(args.log, "rb") as text:
            lines = sum(1 for _ in text)
        log, data_dir = args.log, None
    else:
        data_dir = args.keep or Path(tempfile.mkdtemp(prefix="pantheon-analysis-bench-"))
        scratch = None if args.keep else data_dir
        run_dir = data_dir / "cubic" / "run1"
        run_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "metadata.json").write_text(json.dumps({
            "arguments": {"runtime": args.seconds, "flows": 1, "run_times": 1},
            "emulator_options": ["--delay", "20", "--uplink-rate", f"{args.rate_mbps:g}"],
            "schemes": {"cubic": {"display": "TCP Cubic (synthetic)"}}, "trials": [{"label": "cubic", "repetition": 1}]}))
        print(f"synthesising a {args.seconds:g} s run at {args.rate_mbps:g} Mbit/s ...", file=sys.stderr)
        lines = synthesise(run_dir, args.seconds, args.rate_mbps)
        log = run_dir / "datalink.log"
    try:
        size_mb = log.stat().st_size / 1e6
        print(f"log: {log} ({lines:,} lines, {size_mb:.1f} MB)")

        ours_s, ours = best_of(args.repeat, lambda: run_metrics(read_text_log(log)[0]))
        theirs_s, theirs = best_of(args.repeat, lambda: line_by_line(log))

        flow = ours.flows[0]
        agree = (math.isclose(flow.throughput_mbps, theirs[1]["throughput_mbps"], rel_tol=1e-6)
                 and math.isclose(flow.delay_p95_ms, theirs[1]["delay_p95_ms"], rel_tol=1e-9)
                 and math.isclose(flow.loss_rate, theirs[1]["loss_rate"], rel_tol=1e-9, abs_tol=1e-12)
                 and math.isclose(ours.capacity_mbps, theirs["capacity_mbps"], rel_tol=1e-6))
        print(f"flow 1: {flow.throughput_mbps:.3f} Mbit/s, p95 delay {flow.delay_p95_ms:.3f} ms, loss {100 * flow.loss_rate:.3f} %, "
              f"capacity {ours.capacity_mbps:.3f} Mbit/s; line-by-line agrees: {'yes' if agree else 'NO'}")
        print(f"metric extraction, pantheon.analysis: {ours_s:6.3f} s  {lines / ours_s / 1e6:6.2f} M lines/s  (target >= 2)")
        print(f"metric extraction, line by line:      {theirs_s:6.3f} s  {lines / theirs_s / 1e6:6.2f} M lines/s")
        print(f"speed-up: {theirs_s / ours_s:.1f}x")
        if data_dir is not None:
            full_s, analysis = best_of(1, lambda: analyze(data_dir, quiet=True))
            print(f"pantheon analyze (records, every plot, perf.json, table, HTML and PDF report): {full_s:.2f} s "
                  f"(target < 5), {len(analysis.files)} files")
        return 0 if agree else 1
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
