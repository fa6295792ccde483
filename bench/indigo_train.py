#!/usr/bin/env python3
"""How long Indigo's training takes on this machine and how well the trained network tracks its
oracles (issue 19 §3).

What is measured
    1. Training: the whole `pantheon indigo train` (synthetic paths; --with-calibrated adds the
       calibrated presets), from an empty oracle cache and work directory, wall time start to end,
       split into the oracles' search, the rollouts and the network's training (the summary JSON
       the command writes). Episodes per hour against the original's: 26 workers each running a
       10-second episode in real time over Mahimahi, about 26 × 360 = 9 360 an hour.
    2. Tracking, on the training paths: the trained weights rolled out once more on every training
       path (10 s, policy=network, the oracle given so that the windows are recorded), and per path
       the mean |window − oracle| / oracle over the episode's last half (the first is the ramp from
       10 packets) and over the whole episode; the paper's score log(throughput) − log(p95 delay)
       of the episode against the oracle's fixed window's. The issue's target: ≤ 15%.
    --weights FILE --no-train evaluates an existing weights file (its summary FILE.json beside it)
    without training.

Timing depends on load: run it alone, `flock /work/bench.lock .venv/bin/python bench/indigo_train.py`.
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

import numpy as np

import support
from pantheon.indigo import dagger
from pantheon.indigo.oracle import Oracle, score
from pantheon.sim.batch import FlowSpec, Job, run_batch

ROOT = support.REPO

ORIGINAL_EPISODES_PER_HOUR = 26 * 3600 / 10


def train(args: argparse.Namespace, out: Path) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache"), "PYTHONPATH": str(ROOT / "python")}
        argv = [sys.executable, "-m", "pantheon.cli", "indigo", "train", "--out", str(out),
                "--work-dir", str(Path(tmp) / "work"),
                *(["--with-calibrated"] if args.with_calibrated else [])]
        started = time.monotonic()
        subprocess.run(argv, env=env, check=True)
        return time.monotonic() - started


def evaluate(weights: Path, summary: dict) -> None:
    trained = [p for p in summary["paths"] if not p["validation"]]
    runtime_s = summary["settings"]["runtime_s"]
    jobs = [Job([FlowSpec(dagger.spec("network", Oracle(p["oracle_cwnd_packets"], p["oracle_score"]), str(weights)))],
                p["options"], runtime_s) for p in trained]
    results = run_batch(jobs)
    print(f"{'path':<22} {'oracle':>7} {'last half %':>11} {'whole %':>8} {'score':>7} {'oracle score':>12}")
    halves, wholes = [], []
    for p, r in zip(trained, results):
        assert r.ok and r.flows[0].decisions is not None, r.error
        cwnd = np.asarray(r.flows[0].decisions.cwnd_packets)
        off = np.abs(cwnd - p["oracle_cwnd_packets"]) / p["oracle_cwnd_packets"]
        half, whole = float(off[len(off) // 2:].mean()), float(off.mean())
        halves.append(half)
        wholes.append(whole)
        print(f"{p['name']:<22} {p['oracle_cwnd_packets']:>7} {100 * half:>11.1f} {100 * whole:>8.1f} "
              f"{score(r.flows[0]):>7.3f} {p['oracle_score']:>12.3f}")
    print(f"mean |cwnd - oracle| / oracle over {len(trained)} training paths: {100 * np.mean(halves):.1f}% over "
          f"episodes' last half, {100 * np.mean(wholes):.1f}% over whole episodes (target <= 15%); "
          f"median path {100 * np.median(halves):.1f}%, worst {100 * max(halves):.1f}%")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--with-calibrated", action="store_true", help="train the variant with the calibrated presets")
    parser.add_argument("--weights", type=Path, help="the weights file written (default: a temporary one)")
    parser.add_argument("--no-train", action="store_true", help="evaluate --weights (and its .json) only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        weights = args.weights or Path(tmp) / "indigo.safetensors"
        wall_s = None if args.no_train else train(args, weights)
        summary = json.loads(weights.with_suffix(".json").read_text())
        wall_s = wall_s or summary["wall_s"]
        episodes = summary["episodes"]
        simulated_s = episodes * summary["settings"]["runtime_s"]
        print(f"training: {wall_s:.0f} s wall ({summary['oracle_s']:.0f} s oracles, {summary['rollout_s']:.0f} s "
              f"rollouts, {summary['train_s']:.0f} s network), {len(summary['history'])} iterations, chosen "
              f"{summary['chosen_iteration']}; {episodes} episodes of {summary['settings']['runtime_s']:g} s "
              f"({simulated_s:.0f} simulated s)")
        print(f"episodes per hour: {episodes / wall_s * 3600:.0f} end to end, {episodes / summary['rollout_s'] * 3600:.0f} "
              f"counting rollouts only; the original: ~{ORIGINAL_EPISODES_PER_HOUR:.0f} (26 workers x 10 s episodes)")
        evaluate(weights, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
