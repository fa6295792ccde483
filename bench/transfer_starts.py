#!/usr/bin/env python3
"""How late the transfer driver (pantheon.transfers) starts transfers at 100 and 200 arrivals a
second, against the same driver at 10 a second.

What is measured
    The driver in `--tcp` mode (a thread per transfer in one process, kernel TCP's finite sender)
    runs a Poisson schedule of COUNT transfers of BYTES each (10 kB) at each rate over loopback
    against a local `kernel_tcp receiver --transfers-log`; per rate the table shows how many began
    and how many the receiver logged complete, and the lateness of each start (the driver's log:
    began_epoch_us − scheduled_epoch_us, began stamped just before connect()), p50, p99 and max in
    ms, nearest rank; then p99 over the anchor's p99 (10 arrivals/s, where nothing queues).

Why
    A Poisson workload's FCTs count from the planned start only if the driver keeps up: contract
    of issue 35, >= 100 arrivals/s on time on a 2-core machine. Loopback leaves the path out, so
    the figures are the driver's own (a thread start, the GIL, a Python wake-up from
    sigtimedwait); the receiver shares the machine, as it does in an emulated run.

Run from the repository (no root, no namespaces; ~10 s):
    .venv/bin/python bench/transfer_starts.py [--rates 100,200] [--anchor-rate 10] [--seconds 3] [--bytes 10000]
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import support  # noqa: F401 - puts python/ on sys.path
from pantheon.analysis.metrics import nearest_rank
from support.transfers import poisson_schedule, run_driver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="100,200", help="comma-separated arrivals per second")
    parser.add_argument("--anchor-rate", type=float, default=10.0, help="arrivals per second of the anchor")
    parser.add_argument("--seconds", type=float, default=3.0, help="schedule length per rate")
    parser.add_argument("--bytes", type=int, default=10_000, help="bytes per transfer")
    parser.add_argument("--cc", default="cubic", help="kernel congestion control")
    parser.add_argument("--seed", type=int, default=1, help="the Poisson schedule's seed")
    args = parser.parse_args()

    rates = [args.anchor_rate] + [float(r) for r in args.rates.split(",")]
    print(f"driver --tcp {args.cc}, Poisson arrivals, {args.bytes} bytes each, {args.seconds:g} s per rate, loopback")
    print(f"{'arrivals/s':>10} {'planned':>7} {'began':>6} {'ended':>6} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'p99/anchor':>10}")
    anchor_p99_ms = None
    with tempfile.TemporaryDirectory(prefix="transfer-starts-") as tmp:
        for rate in rates:
            count = max(1, round(rate * args.seconds))
            schedule = poisson_schedule(rate, count, args.bytes, args.seed)
            run = run_driver(schedule, Path(tmp) / f"rate-{rate:g}", cc=args.cc, timeout_s=args.seconds + 30)
            late_ms = [us / 1000 for us in run.lateness_us()]
            if not late_ms:
                print(f"{rate:>10g} {count:>7} {0:>6} {len(run.ended):>6}  nothing began (driver exit {run.returncode})")
                continue
            p50, p99 = nearest_rank(late_ms, 50), nearest_rank(late_ms, 99)
            if anchor_p99_ms is None:
                anchor_p99_ms = p99
            ratio = f"{p99 / anchor_p99_ms:.2f}" if anchor_p99_ms > 0 else "-"
            print(f"{rate:>10g} {count:>7} {len(run.began):>6} {len(run.ended):>6} {p50:>7.2f} {p99:>7.2f} "
                  f"{late_ms[-1]:>7.2f} {ratio:>10}" + ("" if run.returncode == 0 else f"  (driver exit {run.returncode})"))


if __name__ == "__main__":
    main()
