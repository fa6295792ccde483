#!/usr/bin/env python3
"""Calibration against a known truth: does `pantheon calibrate` recover the emulator a data dir was
made on (issue 17 §2)?

What is measured
    Data is made over one of our own five-parameter emulators (the truth: by default 20 Mbit/s
    constant, 25 ms, a 75 000-byte DropTail buffer, no loss), RUNS runs of RUNTIME seconds per
    scheme, by `pantheon sim` (--source sim, seconds) or over the real emulator by `pantheon test
    local` (--source local: root, real time; the issue's target). Then `pantheon calibrate` runs on
    it once per sampler seed, and the table gives per seed:

      rate, delay, buffer   what it found, and the error against the truth in %
      loss, delivery        what it found
      error %               the replication error of the best trial, in the simulator
      floor %               the noise floor (run halves against each other)
      wall s                the calibration's wall time

    followed by the per-scheme table of the last seed's calibration.

Why
    A calibration that cannot find a path the five parameters describe exactly says nothing about
    paths they describe approximately (cellular traces, cross traffic: issue 17 §2).

The data dir is reused when --data-dir already holds one, so seeds and trial counts can be compared
on the same data.

Run from the repository (cargo build --release and ./setup.sh first):
    python3 bench/calibration.py [--source sim|local] [--runs 3] [--runtime 10] [--trials 200]
        [--seeds 1,2,3,4] [--schemes cubic-user,bbr-user,copa,vegas-user] [--data-dir DIR]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PANTHEON = REPO / ".venv" / "bin" / "pantheon"
TRUTH = {"rate_mbps": 20.0, "delay_ms": 25.0, "buffer_bytes": 75_000}


def truth_toml(rate_mbps: float, delay_ms: float, buffer_bytes: int) -> str:
    return (f'kind = "truth"\ndelay_ms = {delay_ms!r}\n[uplink]\nrate_mbps = {rate_mbps!r}\n'
            f"queue_bytes = {buffer_bytes}\n[downlink]\nrate_mbps = {rate_mbps!r}\n")


def make_data(args: argparse.Namespace, data: Path) -> None:
    if (data / "metadata.json").exists():
        print(f"reusing the data in {data}", file=sys.stderr)
        return
    data.parent.mkdir(parents=True, exist_ok=True)
    truth = data.parent / "truth.toml"
    truth.write_text(truth_toml(args.rate, args.delay, args.buffer))
    command = ["sim", "--seed", "100"] if args.source == "sim" else ["test", "local"]
    done = subprocess.run([str(PANTHEON), *command, "--schemes", args.schemes, "--run-times", str(args.runs),
                           "--runtime", str(args.runtime), "--emulator", str(truth), "--data-dir", str(data),
                           "--no-analyze", "--quiet"], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"making the data failed: {done.stderr.strip()}")


def calibrate(args: argparse.Namespace, data: Path, seed: int, out: Path) -> tuple[dict, str, float]:
    shutil.rmtree(data / "calibration", ignore_errors=True)
    started = time.monotonic()
    done = subprocess.run([str(PANTHEON), "calibrate", str(data), "--trials", str(args.trials), "--seed", str(seed),
                           "--out", str(out), "--quiet"], capture_output=True, text=True)
    wall_s = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"calibration failed: {done.stderr.strip()}")
    return json.loads(out.with_suffix(".json").read_text()), done.stdout, wall_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", choices=("sim", "local"), default="sim")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--runtime", type=float, default=10.0)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seeds", default="1,2,3,4")
    parser.add_argument("--schemes", default="cubic-user,bbr-user,copa,vegas-user")
    parser.add_argument("--rate", type=float, default=TRUTH["rate_mbps"])
    parser.add_argument("--delay", type=float, default=TRUTH["delay_ms"])
    parser.add_argument("--buffer", type=int, default=TRUTH["buffer_bytes"])
    parser.add_argument("--data-dir", type=Path)
    args = parser.parse_args()
    root = args.data_dir or Path(tempfile.mkdtemp(prefix="calibration-bench-")) / "data"
    make_data(args, root)
    truth = {"rate_mbps": args.rate, "delay_ms": args.delay, "buffer_bytes": args.buffer}
    print(f"truth: {args.rate:g} Mbit/s constant, {args.delay:g} ms, {args.buffer} B, no loss; data: {args.source}, "
          f"{args.runs} x {args.runtime:g} s of {args.schemes}; {args.trials} trials")
    print(f"{'seed':>4} {'rate':>8} {'err%':>5} {'delay':>7} {'err%':>5} {'buffer':>8} {'err%':>5} {'loss':>9} "
          f"{'delivery':>8} {'error%':>6} {'floor%':>6} {'wall s':>6}")
    stdout = ""
    for seed in (int(s) for s in args.seeds.split(",")):
        summary, stdout, wall_s = calibrate(args, root, seed, root / f"bench-calibrated-seed{seed}.toml")
        path = summary["path"]
        off = {k: 100 * (path[k] - v) / v for k, v in truth.items()}
        print(f"{seed:>4} {path['rate_mbps']:8.3f} {off['rate_mbps']:+5.1f} {path['delay_ms']:7.2f} "
              f"{off['delay_ms']:+5.1f} {path['buffer_bytes']:8d} {off['buffer_bytes']:+5.1f} {path['loss']:9.2e} "
              f"{'Poisson' if path['poisson'] else 'constant':>8} {summary['replication_error_pct']:6.2f} "
              f"{summary['noise_floor_pct'] or 0:6.2f} {wall_s:6.1f}", flush=True)
    print()
    print(stdout, end="")


if __name__ == "__main__":
    main()
