#!/usr/bin/env python3
"""Where the emulator's acknowledgement-path latency comes from, and whether the simulator's host
model (crates/sim/src/host.rs) reproduces the queueing it causes (issue 15 §4).

What is measured
    A window-limited sender, `fixed:cwnd_packets=N` over pantheon-udp with N half the path's BDP,
    over a constant-rate path (12 and 48 Mbit/s, 20 ms each way, an infinite queue). Under the
    BDP a perfectly clocked sender would never queue; what queueing its data meets comes from
    acknowledgements that reach it late and then together, so that it sends in bursts.

    queueing      the data's one-way delay (records.parquet, data sent after the first 5 s) less
                  its minimum: p50/p90/p99/p99.9 in µs, for the emulator's runs and the
                  simulator's seeds (the current pantheon-sim, and --before-bin's if given), each
                  a mean over runs of the run's percentile
    ACK path      for the emulator only, each acknowledgement followed from its data's departure
                  from the uplink (the emulator's link log, model time) to the sender reading it
                  (`pantheon-udp send --log`), through the emulator's lateness in writing the
                  data out, the receiver's turnaround (tunnel logs), the receiver's tunnel to the
                  downlink, the emulator's lateness on the downlink and the sender's reading from
                  its tunnel's egress stamp; µs above each quantity's minimum (the sender's log is
                  on its flow clock, so the last step is known up to a constant per second: each
                  second's minimum is 0)
    late ACKs     for the acknowledgements more than 0.5 ms later than the path's median, which
                  steps carry the excess (the mean excess over the step's median)
    clumped       acknowledgements read within 50 µs of the previous one whose data left the
                  uplink ≥ 500 µs apart: several delivered at one wake-up

Why
    The simulator trains Indigo and calibrates presets; a sender that never meets the hosts'
    jitter learns a cleaner world than the emulator's (docs/indigo.md, docs/sim.md "The hosts").

Campaigns already in --data-dir are reused, not rerun (run the emulated part under the bench
lock: `flock /work/bench.lock python3 bench/host_latency.py ...`).

Run as root, from the repository (./setup.sh first):
    python3 bench/host_latency.py [--runs 2] [--sim-runs 4] [--runtime 20] [--rates 12,48]
        [--before-bin DIR] [--data-dir DIR]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
PANTHEON = REPO / ".venv" / "bin" / "pantheon"
UDP = REPO / "target" / "release" / "pantheon-udp"
DELAY_MS = 20
WARMUP_US = 5_000_000
QUANTILES = (50, 90, 99, 99.9)
DATA_PATH_BYTES = 1500
ACK_PATH_BYTES = 96


def window_packets(rate_mbps: int) -> int:
    """Half the BDP, in 1500-byte packets."""
    return rate_mbps * 1_000_000 // 8 * 2 * DELAY_MS // 1000 // DATA_PATH_BYTES // 2


def manifest(directory: Path, name: str, window: int, ack_log: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.toml").write_text(f'''name = "{name}"
display = "fixed {window}"
color = "#000000"
description = "a constant window of {window} packets over pantheon-udp"
run_first = "receiver"
receiver = ["{UDP}", "recv", "--bind", "{{local}}", "{{port}}"]
sender = ["{UDP}", "send", "--cc", "fixed:cwnd_packets={window}", "--log", "{ack_log}", "{{peer}}", "{{port}}"]
''')


def campaign(kind: str, rate_mbps: int, runs: int, runtime_s: int, seed: int, data_dir: Path, env: dict[str, str]) -> list[Path]:
    """The run dirs of one campaign of the fixed window at `rate_mbps`, run unless there."""
    name = f"fixed-{window_packets(rate_mbps)}"
    if not (data_dir / name).exists():
        head = ["test", "local"] if kind == "test" else ["sim", "--quiet"]
        argv = [str(PANTHEON), *head, "--schemes", name, "--delay", str(DELAY_MS), "--uplink-rate", str(rate_mbps),
                "--downlink-rate", str(rate_mbps), "--runtime", str(runtime_s), "--run-times", str(runs),
                "--seed", str(seed), "--data-dir", str(data_dir), "--no-analyze"]
        if kind == "test":
            argv.append("--quiet")
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            sys.exit(f"{kind} at {rate_mbps} Mbit/s failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return sorted((data_dir / name).glob("run*"))


def queueing_us(run: Path) -> np.ndarray:
    """One-way delay less its minimum of the data sent after the warm-up, µs."""
    t = pq.read_table(run / "records.parquet", columns=["direction", "send_us", "recv_us"]).to_pydict()
    delays = [r - s for d, s, r in zip(t["direction"], t["send_us"], t["recv_us"]) if d == "data" and r is not None and s > WARMUP_US]
    owd = np.array(delays, dtype=float)
    return owd - owd.min()


def log_base_us(path: Path) -> int:
    for line in path.open():
        if line.startswith("# base:"):
            return int(line.split()[5])
    raise ValueError(f"{path}: no base line")


def rows(path: Path) -> list[list[str]]:
    return [line.split() for line in path.open() if not line.startswith("#")]


def tunnel_us(path: Path) -> np.ndarray:
    base = log_base_us(path)
    return np.array([base + int(r[0]) for r in rows(path)])


def link_us(path: Path, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(entry, departure in model time, lateness) of the datagrams of `size` path bytes: µs since
    the epoch, and µs the emulator wrote the departure after its model time."""
    base = log_base_us(path)
    entries, departures, lateness = [], [], []
    for r in rows(path):
        if r[1] == "+" and int(r[3]) == size:
            entries.append(base + int(r[0]))
        elif r[1] == "-" and int(r[3]) == size:
            departures.append(base + int(r[0]))
            lateness.append(int(r[5]))
    return np.array(entries), np.array(departures), np.array(lateness)


def ack_path(run: Path, ack_log: Path) -> dict[str, np.ndarray]:
    """The steps of each acknowledgement's way after the warm-up, µs above each step's minimum,
    and ("_read", "_left") when it was read and when its data left the uplink. The k-th datagram
    of each log is the flow's k-th (one flow over a constant path with an infinite queue: no loss,
    no reordering), and the sender's k-th log line is its k-th acknowledgement."""
    data_in = tunnel_us(run / "flow0.sender.ingress.log")
    data_out = tunnel_us(run / "flow0.receiver.egress.log")
    ack_in = tunnel_us(run / "flow0.receiver.ingress.log")
    ack_out = tunnel_us(run / "flow0.sender.egress.log")
    _, up_left, up_late = link_us(run / "uplink.log", DATA_PATH_BYTES)
    down_in, _, down_late = link_us(run / "downlink.log", ACK_PATH_BYTES)
    read_flow = np.array([int(r[0]) for r in rows(ack_log)])
    n = min(map(len, (data_in, data_out, ack_in, ack_out, up_left, down_in, down_late, read_flow)))
    # The flow clock (monotonic) against the epoch (realtime, which NTP may slew by some ppm: 400 µs
    # over a run was seen): the offset of each second, up to that second's shortest egress-to-read step.
    gap = read_flow[:n] - ack_out[:n]
    second = (ack_out[:n] - ack_out[0]) // 1_000_000
    offset = np.array([gap[second == s].min() for s in range(int(second[-1]) + 1)])
    read = read_flow[:n] - offset[second]
    keep = data_in[:n] - data_in[0] > WARMUP_US
    steps = {
        "uplink lateness": up_late[:n],
        "receiver turnaround": ack_in[:n] - data_out[:n],
        "receiver tunnel -> downlink": down_in[:n] - ack_in[:n],
        "downlink lateness": down_late[:n],
        "sender tunnel -> read": read - ack_out[:n],
        "whole: uplink departure -> read": read - up_left[:n],
    }
    return {k: v[keep] - v[keep].min() for k, v in steps.items()} | {"_read": read[keep], "_left": up_left[:n][keep]}


def percentiles(samples: list[np.ndarray]) -> list[float]:
    """Each quantile's mean over runs."""
    return [statistics.mean(float(np.percentile(s, q)) for s in samples) for q in QUANTILES]


def row(label: str, values: list[float], extra: str = "") -> str:
    return f"  {label:<34} " + " ".join(f"{v:8.0f}" for v in values) + f"  {extra}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="emulated runs per rate (default 2)")
    parser.add_argument("--sim-runs", type=int, default=4, help="simulated seeds per rate (default 4)")
    parser.add_argument("--runtime", type=int, default=20, help="seconds per run (default 20)")
    parser.add_argument("--rates", default="12,48", help="constant rates, Mbit/s (default 12,48)")
    parser.add_argument("--before-bin", type=Path, help="a directory with another pantheon-sim, to compare")
    parser.add_argument("--data-dir", type=Path, help="where campaigns go, and are reused from")
    args = parser.parse_args()
    root = args.data_dir or Path(tempfile.mkdtemp(prefix="host-latency-"))
    env = dict(os.environ, PANTHEON_SCHEMES_PATH=str(root / "schemes"))
    print(f"{args.runs} emulated runs, {args.sim_runs} simulated seeds of {args.runtime} s per rate; "
          f"{DELAY_MS} ms each way, infinite queues (campaigns in {root} are reused)")
    head = "  " + " " * 34 + " " + " ".join(f"{'p' + format(q, 'g'):>8}" for q in QUANTILES)
    for rate in (int(r) for r in args.rates.split(",") if r):
        window = window_packets(rate)
        print(f"\n{rate} Mbit/s, fixed:cwnd_packets={window} (half the BDP); µs")
        emulated, paths = [], []
        for k in range(args.runs):
            run_dir = root / f"emu-{rate}-run{k}"
            ack_log = run_dir / "ack.log"
            manifest(root / "schemes", f"fixed-{window}", window, ack_log)
            run_dir.mkdir(parents=True, exist_ok=True)
            runs = campaign("test", rate, 1, args.runtime, k, run_dir, env)
            emulated += [queueing_us(r) for r in runs]
            paths += [ack_path(r, ack_log) for r in runs]
        simulated = {"simulator": [queueing_us(r) for r in campaign("sim", rate, args.sim_runs, args.runtime, 1, root / f"sim-{rate}", env)]}
        if args.before_bin:
            before = dict(env, PANTHEON_BIN_DIR=str(args.before_bin))
            simulated["simulator, --before-bin"] = [queueing_us(r) for r in campaign("sim", rate, args.sim_runs, args.runtime, 1, root / f"sim-before-{rate}", before)]
        print(" queueing (one-way delay less its minimum)\n" + head)
        print(row("emulator", percentiles(emulated)))
        for label, samples in simulated.items():
            print(row(label, percentiles(samples)))
        print(" emulator, ACK path (above each step's minimum)\n" + head)
        for step in paths[0]:
            if not step.startswith("_"):
                print(row(step, percentiles([p[step] for p in paths])))
        whole = [p["whole: uplink departure -> read"] for p in paths]
        late = [w - np.median(w) > 500 for w in whole]
        print(" ACKs > 0.5 ms later than the median: "
              f"{statistics.mean(float(m.mean()) for m in late):.2%}; the steps' mean excess over their median, µs:")
        for step in paths[0]:
            if not step.startswith("_") and not step.startswith("whole"):
                excess = statistics.mean(float(np.mean(p[step][m] - np.median(p[step]))) for p, m in zip(paths, late) if m.any())
                print(f"    {step:<32} {excess:6.0f}")
        clumped = [float(np.mean((np.diff(p["_read"]) < 50) & (np.diff(p["_left"]) >= 500))) for p in paths]
        print(f" clumped: {statistics.mean(clumped):.2%} of ACKs read within 50 µs of the previous, their data ≥ 0.5 ms apart")


if __name__ == "__main__":
    main()
