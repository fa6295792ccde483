#!/usr/bin/env python3
"""Random-loss tolerance: utilization of a scheme against the rate of random (non-congestion) loss,
over many seeds in the simulator.

What is measured
    One flow for RUNTIME simulated seconds over 12 Mbit/s, 20 ms each way, a one-BDP (60 kB) DropTail
    buffer and i.i.d. loss p on the uplink, for each loss rate and SEEDS seeds (the path's seed: which
    packets are lost). Per scheme and loss rate the table shows the mean utilization over seeds and the
    worst seed's (throughput over 12 Mbit/s, pantheon.sim.batch's metrics, docs/analysis.md).

Why
    Both PCC papers claim a utility-driven sender keeps the link busy under random loss where TCP's
    loss-driven window collapses (Allegro NSDI 2015 §4.1.3; Vivace NSDI 2018 §5; Mathis et al. CCR 1997
    for TCP's 1.22·MSS/(RTT·√p)). Four simulated seeds at 1% (tests/test_behaviour.py) say whether it
    holds; the spread over many seeds and loss rates says how reliably, which is what a change to an algorithm's noise
    handling moves (crates/cc/src/vivace.rs, deviations 8 and 9). Simulated, so twenty 30 s runs per
    cell take seconds.

Run from the repository (cargo build --release first):
    python3 bench/random_loss.py [--schemes pcc-vivace,pcc-allegro,cubic-user] [--loss 0,0.01,0.02] [--seeds 20]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import support
from pantheon import schemes
from pantheon.sim.batch import FlowSpec, Job, link_options, run_batch
from pantheon.sim.simulable import cc_spec

REPO = support.REPO

RATE_MBPS = 12.0
DELAY_MS = 20.0
QUEUE_BYTES = 60_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schemes", default="pcc-vivace,pcc-allegro,cubic-user")
    parser.add_argument("--loss", default="0,0.01,0.02,0.03,0.05", help="comma-separated loss probabilities")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--runtime", type=float, default=30.0, help="simulated seconds per run")
    args = parser.parse_args()

    registry = schemes.registry()
    specs = {}
    for name in args.schemes.split(","):
        spec = cc_spec(registry.schemes[name]) if name in registry.schemes else None
        if spec is None:
            sys.exit(f"{name}: not a scheme the simulator runs (pantheon sim --help lists how to tell)")
        specs[name] = spec
    losses = [float(p) for p in args.loss.split(",")]

    cells = [(name, loss) for name in specs for loss in losses]
    jobs = [Job([FlowSpec(specs[name])],
                link_options(rate_mbps=RATE_MBPS, delay_ms=DELAY_MS, queue_bytes=QUEUE_BYTES, loss=loss),
                runtime_s=args.runtime, seed=seed)
            for name, loss in cells for seed in range(args.seeds)]
    started = time.monotonic()
    results = run_batch(jobs)  # in the jobs' order
    wall_s = time.monotonic() - started

    print(f"{RATE_MBPS:g} Mbit/s, {DELAY_MS:g} ms each way, {QUEUE_BYTES} B DropTail, {args.runtime:g} s simulated, "
          f"seeds 0..{args.seeds - 1}; utilization mean (worst seed)")
    print(f"{'scheme':<14}" + "".join(f"{f'loss {p:.0%}':>18}" for p in losses))
    for i, name in enumerate(specs):
        row = f"{name:<14}"
        for j in range(len(losses)):
            chunk = results[(i * len(losses) + j) * args.seeds:(i * len(losses) + j + 1) * args.seeds]
            errors = [r.error for r in chunk if r.error]
            if errors:
                sys.exit(f"{name}: {errors[0]}")
            util = [r.flows[0].throughput_mbps / RATE_MBPS for r in chunk]
            row += f"{f'{statistics.mean(util):.1%} ({min(util):.1%})':>18}"
        print(row)
    print(f"{len(jobs)} runs in {wall_s:.1f} s of wall time")


if __name__ == "__main__":
    main()
