#!/usr/bin/env python3
"""How many environment steps per second pantheon.gym takes, and what stepping costs over
simulating, in one invocation (issue 19 §4's goal: >= 20 000 steps/s on one core).

What is measured, on two paths (12 and 100 Mbit/s each way, 20 ms one-way delay, a DropTail buffer
of one bandwidth-delay product on the data direction), with a policy that holds the window near
the bandwidth-delay product (x2 up to half of it, then +10 / -10 / +0 around it: one flow keeping
the link busy, so each step carries a full 10 ms of packets):
  single   CongestionEnv: --episodes episodes of --steps steps of 10 ms, resets included.
  vector   CongestionVectorEnv of --envs environments: --steps vector steps (envs x steps).
  gym-only `pantheon-sim gym` alone, reading the single environment's requests (its first
           episode's actions, --episodes times) from a file and writing its replies to another:
           the simulator and its protocol without Python and without a round trip per step.
  batch    the same simulated time as one `pantheon-sim batch` job (--jobs 1): the simulation
           with nothing stepping it, under `fixed:cwnd_packets=BDP` when crates/cc has that
           controller (Indigo's baseline), else cubic (the nearest: one flow filling the same
           buffer); the line says which.
Per case: steps/s (environment steps; for batch, simulated seconds / 10 ms / wall s), and x batch,
how many times the batch job's cost per simulated second the case pays.

"One core": by default this process and the simulator it starts are pinned to one CPU
(sched_setaffinity, inherited by the child), so the figure is what one core gives; --cores 2 lets
them run on two (the round trip then pays cross-core wake-ups instead of context switches).
Timings depend on the machine's load: run it under the shared lock on a shared machine; each
figure is the best of --repeat runs (default 5), as other processes only ever slow a run down.

    cargo build --release                        # target/release/pantheon-sim
    flock /work/bench.lock .venv/bin/python bench/gym_speed.py
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import support
from pantheon.binaries import binary
from pantheon.gym import CongestionEnv, CongestionVectorEnv, Ranges
from pantheon.gym.process import EpisodeConfig
from pantheon.sim.batch import FlowSpec, Job, link_options, run_batch
from pantheon.sim.simulator import PROGRAM

REPO_ROOT = support.REPO

DELAY_MS = 20
RATES_MBPS = (12, 100)
STEP_MS = 10.0
PATH_BYTES = 1500
GOAL_STEPS_PER_S = 20_000


def bdp_packets(rate_mbps: float) -> float:
    return rate_mbps * 1e6 / 8 * 2 * DELAY_MS / 1e3 / PATH_BYTES


def hold(cwnd_packets: float, bdp: float) -> int:
    """x2 up to half the BDP, then +10 / -10 toward it, +0 within 5 packets of it. Plain Python: a
    numpy expression per step would cost more than the step (~3 us of Python in env.step)."""
    if cwnd_packets * 2 <= bdp:
        return 4
    if cwnd_packets < bdp - 5:
        return 3
    return 1 if cwnd_packets > bdp + 5 else 2


def paths(rate_mbps: float) -> Ranges:
    return Ranges(rate_mbps=(rate_mbps, rate_mbps), delay_ms=(DELAY_MS, DELAY_MS), queue_bdp=(1, 1))


def single(rate_mbps: float, episodes: int, steps: int) -> tuple[float, list[int]]:
    """Steps/s of one CongestionEnv, and the actions of its first episode."""
    env = CongestionEnv(paths=paths(rate_mbps), episode_steps=steps)
    bdp = bdp_packets(rate_mbps)
    first: list[int] = []
    started = time.perf_counter()
    for episode in range(episodes):
        env.reset(seed=episode)
        cwnd = 10.0
        for _ in range(steps):
            action = hold(cwnd, bdp)
            if episode == 0:
                first.append(action)
            cwnd = env.step(action)[4]["cwnd_packets"]
    wall_s = time.perf_counter() - started
    env.close()
    return episodes * steps / wall_s, first


def vector(rate_mbps: float, envs: int, steps: int) -> float:
    env = CongestionVectorEnv(envs, paths=paths(rate_mbps), episode_steps=steps)
    bdp = bdp_packets(rate_mbps)
    started = time.perf_counter()
    env.reset(seed=0)
    cwnd = [10.0] * envs
    for _ in range(steps):
        cwnd = env.step(np.array([hold(c, bdp) for c in cwnd]))[4]["cwnd_packets"].tolist()
    wall_s = time.perf_counter() - started
    env.close()
    return envs * steps / wall_s


def gym_only(rate_mbps: float, actions: list[int], episodes: int) -> float:
    """Steps/s of `pantheon-sim gym` reading `episodes` episodes of requests from a file."""
    options = link_options(rate_mbps=rate_mbps, delay_ms=DELAY_MS, queue_bytes=round(bdp_packets(rate_mbps) * PATH_BYTES))
    episode = "".join(f"step {a}\n" for a in actions)
    with tempfile.TemporaryFile("w+") as requests, tempfile.TemporaryFile() as replies:
        for seed in range(episodes):
            requests.write(EpisodeConfig(options, seed, STEP_MS, len(actions), 10_000).request(0) + "\n" + episode)
        requests.seek(0)
        started = time.perf_counter()
        done = subprocess.run([str(binary(PROGRAM)), "gym"], stdin=requests, stdout=replies, stderr=subprocess.PIPE)
        wall_s = time.perf_counter() - started
        replies.seek(0)
        if done.returncode != 0 or b"\nerror " in replies.read():
            sys.exit(f"gym_speed: pantheon-sim gym failed: {done.stderr.decode()[-300:]}")
    return episodes * len(actions) / wall_s


def batch(rate_mbps: float, sim_s: float) -> tuple[float, str]:
    """Equivalent steps/s of one batch job of `sim_s` (its own wall time), and its controller."""
    options = link_options(rate_mbps=rate_mbps, delay_ms=DELAY_MS, queue_bytes=round(bdp_packets(rate_mbps) * PATH_BYTES))
    for cc in (f"fixed:cwnd_packets={round(bdp_packets(rate_mbps))}", "cubic"):
        result = run_batch([Job([FlowSpec(cc)], options, runtime_s=sim_s)], jobs_parallel=1)[0]
        if result.ok and result.wall_s:
            return sim_s * 1e3 / STEP_MS / result.wall_s, cc.split(":")[0]
    sys.exit(f"gym_speed: the batch job failed: {result.error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=5, help="single-environment episodes (default 5)")
    parser.add_argument("--steps", type=int, default=1000, help="steps per episode (default 1000: 10 s simulated)")
    parser.add_argument("--envs", type=int, default=16, help="environments in the vector (default 16)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per case, the fastest kept (default 5)")
    parser.add_argument("--cores", type=int, choices=(1, 2), default=1, help="CPUs for Python and the simulator (default 1)")
    args = parser.parse_args()
    if args.cores == 1:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    print(f"pantheon.gym steps/s, {STEP_MS:g} ms steps, {DELAY_MS} ms one way, 1-BDP DropTail, on "
          f"{len(os.sched_getaffinity(0))} core(s); goal >= {GOAL_STEPS_PER_S} steps/s")
    print(f"{'Mbit/s':>7} {'case':<22} {'steps/s':>10} {'x batch':>8}")
    for rate_mbps in RATES_MBPS:
        singles = [single(rate_mbps, args.episodes, args.steps) for _ in range(args.repeat)]
        actions = singles[0][1]
        batches = [batch(rate_mbps, args.steps * STEP_MS / 1e3) for _ in range(args.repeat)]
        batch_rate, cc = max(batches)
        rows = [
            ("single", max(rate for rate, _ in singles)),
            (f"vector x{args.envs}", max(vector(rate_mbps, args.envs, args.steps) for _ in range(args.repeat))),
            ("gym-only (no Python)", max(gym_only(rate_mbps, actions, args.episodes) for _ in range(args.repeat))),
            (f"batch job ({cc})", batch_rate),
        ]
        for name, rate in rows:
            print(f"{rate_mbps:>7} {name:<22} {rate:>10.0f} {batch_rate / rate:>8.2f}")


if __name__ == "__main__":
    main()
