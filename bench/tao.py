#!/usr/bin/env python3
"""Tao (a RemyCC) against Cubic, Copa and Vegas, inside and outside the prior it was trained for
(issue 37 §4), and TCP ex Machina's dumbbell reproduced (issue 37 §5, `--dumbbell`).

What is measured
    Prior mode (the default). Networks of Tao-100x's prior (data/tao/tao-100x.toml: the 2014
    learnability paper's "100x" range, 3.16-316 Mbit/s drawn log-uniformly, 150 ms RTT, 1-2 senders
    switching on and off, exponential times of mean 1 s each, an infinite buffer), drawn with
    seed EVAL_SEED, which no training uses (`pantheon remy train` draws (its --seed, generation)),
    and without the prior's four corners, which training always evaluates: paths training never
    saw. Then paths outside it: the same RTT and workload at rates ten times below its low end
    (0.316 Mbit/s) and above its high end (3160 Mbit/s), where the learnability paper (§4, Figure
    2) shows a RemyCC's performance fall off. Every scheme runs on the same on/off draws (--seeds of
    them per path), in the simulator (`pantheon-sim batch`).

      tput        each sender's data delivered over its time on (Remy's throughput), Mbit/s,
                  the mean over senders and seeds
      delay, p95  each sender's mean one-way delay (its p95: the delivered-weighted mean of its
                  flows'), ms, the mean over senders and seeds
      objective   Remy's, log(tput) − log(delay) per sender (δ = 1, the prior's), the mean
      frontier    whether a comparator gets at least Tao's throughput at no more mean delay
                  (bench/support/frontier.py: dominators), and which

    Dumbbell mode (--dumbbell). TCP ex Machina (Winstein & Balakrishnan, SIGCOMM 2013), §5.2 and
    Figure 4: a 15 Mbit/s dumbbell, 150 ms RTT, n = 8 senders, each switching between a flow of
    exponentially distributed length (mean 100 kB) and an exponentially distributed off time
    (mean 0.5 s); the figure plots each scheme's median over senders of throughput and of queueing
    delay. Our deviations: the simulator runs flows of a duration, not of a length, so an on-period
    lasts an exponential time of mean 100 kB at the fair share (15/8 Mbit/s: 0.427 s); the buffer is
    1000 packets of 1500 bytes (not checked against the paper's text); Compound, NewReno, XCP and
    Cubic over sfqCoDel are not among crates/cc's controllers and queues (Cubic's and Vegas's
    user-space twins are). The paper's plotted medians are not printed beside ours: they were not
    read off its Figure 4 yet.

Anchors, in the same run: the three comparators (cubic-user, copa, vegas-user: their crates/cc
specs from schemes/), and in the dumbbell mode also the 2013 paper's published RemyCC when given
with --tree. Speed: simulated seconds per wall second of the whole batch.

    .venv/bin/python bench/tao.py                            # the built-in tree tao-100x (~1 min)
    .venv/bin/python bench/tao.py --tree /tmp/remy-100x.dna  # an original RemyCC file
    .venv/bin/python bench/tao.py --dumbbell --tree /tmp/remy-2013-d1.dna
    python3 bench/tao.py --emulator [--tree FILE]            # as root: a few cells over pantheon-emu

--emulator runs the inside paths of at most EMULATED_MAX_MBPS (2 cores carry that much) over the
real emulator, one bulk flow each (`pantheon test local`), after the simulator's table. With
--tree the tree runs as a scheme `tao-tree` declared in a temporary manifest directory
(`pantheon remy scheme`; PANTHEON_SCHEMES_PATH, docs/adding-a-scheme.md), whose sender is
`pantheon-udp send --cc tao:tree=FILE`.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import support
from pantheon import schemes
from pantheon.remy import prior as priors
from pantheon.remy import scheme as remy_scheme
from pantheon.remy.networks import Network, on_periods
from pantheon.sim.batch import Job, Result, run_batch
from support.frontier import FlowPart, Point, dominators, mean_point, median_point, objective, sender_points

PRIOR = support.REPO / "data" / "tao" / "tao-100x.toml"
BUILT_IN_TREE = support.REPO / "data" / "tao" / "tao-100x.pb"
COMPARATORS = ["cubic-user", "copa", "vegas-user"]
EVAL_SEED = 1437
"""The draws' seed: training draws from SeedSequence([--seed, generation]), one entry longer."""
OUTSIDE_FACTOR = 10.0
EMULATED_MAX_MBPS = 60.0

DUMBBELL_RATE_MBPS = 15.0
DUMBBELL_RTT_MS = 150.0
DUMBBELL_SENDERS = 8
DUMBBELL_MEAN_ON_S = 100e3 * 8 / (DUMBBELL_RATE_MBPS * 1e6 / DUMBBELL_SENDERS)
"""100 kB at the fair share of 15 Mbit/s among 8: 0.427 s."""
DUMBBELL_MEAN_OFF_S = 0.5
DUMBBELL_BUFFER_BYTES = 1000 * 1500


class BenchError(Exception):
    """A user's mistake: one line, exit 2."""


@dataclass(frozen=True)
class EvalPath:
    label: str
    where: str
    """"inside" or "outside" the prior."""
    rate_mbps: float
    rtt_ms: float
    senders: int
    buffer_bytes: int | None


def tao_spec(tree: Path | None) -> str:
    if tree is not None:
        if not tree.is_file():
            raise BenchError(f"--tree {tree}: no such file")
        return f"tao:tree={tree.resolve()}"
    if not BUILT_IN_TREE.is_file():
        raise BenchError(f"no built-in tree {BUILT_IN_TREE.relative_to(support.REPO)} yet (`pantheon remy train` makes "
                         "it): give a RemyCC file with --tree PATH")
    return "tao"


def comparator_specs() -> dict[str, str]:
    registry = schemes.registry()
    out = {}
    for name in COMPARATORS:
        spec = registry.schemes[name].cc_spec() if name in registry.schemes else None
        if spec is None:
            raise BenchError(f"scheme {name} has no crates/cc spec (schemes/{name}.toml)")
        out[name] = spec
    return out


def prior_paths(count: int) -> list[EvalPath]:
    prior = priors.load(PRIOR)
    rng = np.random.default_rng(np.random.SeedSequence([EVAL_SEED]))
    lo, hi = prior.rate_mbps.lo, prior.rate_mbps.hi
    inside = []
    for i in range(count):
        rate = float(rng.uniform(lo, hi)) if prior.rate_draw == "uniform" else float(
            math.exp(rng.uniform(math.log(lo), math.log(hi))))
        rtt = float(rng.uniform(prior.min_rtt_ms.lo, prior.min_rtt_ms.hi))
        senders = int(rng.integers(prior.senders[0], prior.senders[1], endpoint=True))
        inside.append(EvalPath(f"in{i + 1}", "inside", rate, rtt, senders, None))
    rtt, senders = prior.min_rtt_ms.hi, prior.senders[1]
    outside = [EvalPath("below", "outside", lo / OUTSIDE_FACTOR, rtt, senders, None),
               EvalPath("above", "outside", hi * OUTSIDE_FACTOR, rtt, senders, None)]
    return sorted(inside, key=lambda p: p.rate_mbps) + outside


def networks_of(path: EvalPath, seeds: int, runtime_s: float, mean_on_s: float, mean_off_s: float) -> list[Network]:
    """`seeds` draws of the path's on/off workload, the same for every scheme."""
    out = []
    for seed in range(1, seeds + 1):
        rng = np.random.default_rng(np.random.SeedSequence([EVAL_SEED, round(path.rate_mbps * 1000), seed]))
        periods = on_periods(rng, path.senders, mean_on_s, mean_off_s, runtime_s)
        out.append(Network(path.rate_mbps, path.rtt_ms, path.buffer_bytes, path.senders, periods, runtime_s, seed))
    return out


def points_of(network: Network, result: Result) -> list[Point]:
    if not result.ok:
        raise RuntimeError(f"pantheon-sim batch: {result.error}")
    parts = [FlowPart(p.sender, p.duration_s, f.delivered_packets, f.delay_mean_ms, f.delay_p95_ms)
             for p, f in zip(network.on_periods, result.flows)]
    return list(sender_points(parts).values())


def simulate(cells: list[tuple[EvalPath, str, Network]]) -> tuple[list[list[Point]], float, float]:
    """Each cell's sender points; the simulated and the wall seconds."""
    jobs: list[Job] = [net.job(spec) for _, spec, net in cells]
    done = [0]

    def progress(_: int, __: Result) -> None:
        done[0] += 1
        print(f"\r  simulated {done[0]}/{len(jobs)}", end="", file=sys.stderr, flush=True)

    start = time.monotonic()
    results = run_batch(jobs, on_result=progress)
    wall_s = time.monotonic() - start
    print(file=sys.stderr)
    return [points_of(net, r) for (_, _, net), r in zip(cells, results)], sum(j.runtime_s for j in jobs), wall_s


def prior_mode(tao: str, args: argparse.Namespace) -> None:
    prior = priors.load(PRIOR)
    specs = {"tao": tao, **comparator_specs()}
    paths = prior_paths(args.paths)
    cells = [(path, name, net) for path in paths for net in networks_of(path, args.seeds, args.runtime, prior.mean_on_s,
                                                                         prior.mean_off_s)
             for name in specs]
    points, sim_s, wall_s = simulate([(p, specs[n], net) for p, n, net in cells])
    by: dict[tuple[str, str], list[Point]] = {}
    for (path, name, _), pts in zip(cells, points):
        by.setdefault((path.label, name), []).extend(pts)
    print(f"Tao = {tao}; prior {PRIOR.relative_to(support.REPO)}; {args.seeds} on/off draws per path of "
          f"{args.runtime:g} s; eval seed {EVAL_SEED}")
    print(f"{len(cells)} simulations, {sim_s:.0f} simulated s in {wall_s:.1f} s wall ({sim_s / wall_s:.0f}x real time)\n")
    print(f"{'path':<6} {'where':<7} {'Mbit/s':>7} {'n':>2}  {'scheme':<11} {'tput':>8} {'delay':>7} {'p95':>7} "
          f"{'objective':>9}  frontier")
    summary: dict[str, dict[str, list[float]]] = {}
    for path in paths:
        means = {n: mean_point(by[(path.label, n)]) for n in specs if by.get((path.label, n))}
        for name in specs:
            pts = by.get((path.label, name), [])
            if not pts:
                print(f"{path.label:<6} {path.where:<7} {path.rate_mbps:>7.2f} {path.senders:>2}  {name:<11} nothing delivered")
                continue
            m = means[name]
            obj = statistics.fmean(objective(p.throughput_mbps, p.delay_mean_ms) for p in pts)
            summary.setdefault(path.where, {}).setdefault(name, []).append(obj)
            note = ""
            if name == "tao":
                beaten = dominators(m, {k: v for k, v in means.items() if k != "tao"})
                note = "dominated by " + ", ".join(beaten) if beaten else "on the frontier"
            print(f"{path.label:<6} {path.where:<7} {path.rate_mbps:>7.2f} {path.senders:>2}  {name:<11} "
                  f"{m.throughput_mbps:>8.2f} {m.delay_mean_ms:>7.1f} {m.delay_p95_ms:>7.1f} {obj:>9.3f}  {note}")
        print()
    for where, objs in summary.items():
        print(f"mean objective, {where} paths: " + ", ".join(f"{n} {statistics.fmean(v):.3f}" for n, v in objs.items()))
    if args.emulator:
        emulator_cells(args, [p for p in paths if p.where == "inside" and p.rate_mbps <= EMULATED_MAX_MBPS])


def emulator_cells(args: argparse.Namespace, paths: list[EvalPath]) -> None:
    if os.geteuid() != 0:
        raise BenchError("--emulator runs flows over pantheon-emu: run as root")
    if not paths:
        print(f"\nno inside path at or below {EMULATED_MAX_MBPS:g} Mbit/s to emulate; try more --paths")
        return
    with tempfile.TemporaryDirectory(prefix="bench-tao-") as tmp:
        env = dict(os.environ)
        name = "tao"
        if args.tree is not None:
            env["PANTHEON_SCHEMES_PATH"] = tmp
            name = "tao-tree"
            remy_scheme.write(args.tree, name, Path(tmp))
        names = [name, *COMPARATORS]
        print(f"\nover the emulator: one bulk flow, {args.emu_runtime:g} s, `pantheon test local`")
        print(f"{'path':<6} {'Mbit/s':>7}  {'scheme':<11} {'tput':>8} {'delay':>7} {'p95':>7} {'objective':>9}  frontier")
        for path in paths:
            path_file = Path(tmp) / f"{path.label}.toml"
            path_file.write_text(f'delay_ms = {path.rtt_ms / 2!r}\n[uplink]\nrate_mbps = {path.rate_mbps:.3f}\n'
                                 f'delivery = "constant"\n[downlink]\nrate_mbps = {path.rate_mbps:.3f}\n'
                                 'delivery = "constant"\n')
            data = Path(tmp) / path.label
            command = [str(support.PANTHEON), "test", "local", "--schemes", ",".join(names), "--emulator",
                       str(path_file), "--runtime", f"{args.emu_runtime:g}", "--data-dir", str(data), "--quiet"]
            done = subprocess.run(command, capture_output=True, text=True, env=env,
                                  timeout=len(names) * (args.emu_runtime + 60))
            if done.returncode != 0:
                raise RuntimeError(f"pantheon test local exited {done.returncode}: {done.stderr.strip()[-500:]}")
            perf = json.loads((data / "perf.json").read_text())["schemes"]
            means = {n: Point(s["throughput_mbps"]["mean"], s["delay_mean_ms"]["mean"], s["delay_p95_ms"]["mean"])
                     for n in names for s in [perf[n]["summary"]["all"]]}
            for n in names:
                m = means[n]
                note = ""
                if n == name:
                    beaten = dominators(m, {k: v for k, v in means.items() if k != name})
                    note = "dominated by " + ", ".join(beaten) if beaten else "on the frontier"
                print(f"{path.label:<6} {path.rate_mbps:>7.2f}  {n:<11} {m.throughput_mbps:>8.2f} {m.delay_mean_ms:>7.1f} "
                      f"{m.delay_p95_ms:>7.1f} {objective(m.throughput_mbps, m.delay_mean_ms):>9.3f}  {note}")
            print()


def dumbbell_mode(tao: str, args: argparse.Namespace) -> None:
    specs = {"tao": tao, **{n: s for n, s in comparator_specs().items() if n != "copa"}}
    path = EvalPath("dumbbell", "-", DUMBBELL_RATE_MBPS, DUMBBELL_RTT_MS, DUMBBELL_SENDERS, DUMBBELL_BUFFER_BYTES)
    nets = networks_of(path, args.seeds, args.runtime, DUMBBELL_MEAN_ON_S, DUMBBELL_MEAN_OFF_S)
    cells = [(path, name, net) for net in nets for name in specs]
    points, sim_s, wall_s = simulate([(p, specs[n], net) for p, n, net in cells])
    by: dict[str, list[Point]] = {}
    for (_, name, _), pts in zip(cells, points):
        by.setdefault(name, []).extend(pts)
    propagation_ms = DUMBBELL_RTT_MS / 2
    print(f"TCP ex Machina §5.2 / Figure 4 dumbbell: {DUMBBELL_RATE_MBPS:g} Mbit/s, {DUMBBELL_RTT_MS:g} ms RTT, "
          f"n = {DUMBBELL_SENDERS}, on exp(mean {DUMBBELL_MEAN_ON_S:.3f} s) off exp(mean {DUMBBELL_MEAN_OFF_S} s), "
          f"buffer {DUMBBELL_BUFFER_BYTES} B; {args.seeds} draws of {args.runtime:g} s; Tao = {tao}")
    print(f"{len(cells)} simulations, {sim_s:.0f} simulated s in {wall_s:.1f} s wall ({sim_s / wall_s:.0f}x real time)\n")
    print("medians over sender-draws (the figure's), with the interquartile range of each")
    print(f"{'scheme':<11} {'senders':>7} {'tput Mbit/s':>12} {'IQR':>13} {'queueing ms':>12} {'IQR':>13} {'objective':>9}")
    medians = {}
    for name, pts in by.items():
        med = median_point(pts)
        medians[name] = med
        tq = statistics.quantiles([p.throughput_mbps for p in pts], n=4)
        dq = statistics.quantiles([p.delay_mean_ms - propagation_ms for p in pts], n=4)
        obj = statistics.fmean(objective(p.throughput_mbps, p.delay_mean_ms) for p in pts)
        print(f"{name:<11} {len(pts):>7} {med.throughput_mbps:>12.3f} {tq[0]:>6.2f}-{tq[2]:<6.2f} "
              f"{med.delay_mean_ms - propagation_ms:>12.1f} {dq[0]:>6.1f}-{dq[2]:<6.1f} {obj:>9.3f}")
    print()
    for name in by:
        if name != "tao":
            t = medians["tao"].throughput_mbps / medians[name].throughput_mbps
            q = (medians[name].delay_mean_ms - propagation_ms) / max(medians["tao"].delay_mean_ms - propagation_ms, 1e-3)
            print(f"tao against {name}: median throughput x{t:.2f}, median queueing delay ÷{q:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path, help="a RemyCC rule-tree file (remy's .dna; default: the built-in tao-100x)")
    parser.add_argument("--seeds", type=int, default=4, help="on/off draws per path (default 4)")
    parser.add_argument("--paths", type=int, default=6, help="paths drawn inside the prior (default 6)")
    parser.add_argument("--runtime", type=float, default=30.0, help="simulated seconds per run (default 30)")
    parser.add_argument("--emulator", action="store_true", help="also a few inside cells over the emulator (root)")
    parser.add_argument("--emu-runtime", type=float, default=15.0, help="seconds per emulated run (default 15)")
    parser.add_argument("--dumbbell", action="store_true", help="TCP ex Machina's dumbbell (§5.2, Figure 4) instead")
    args = parser.parse_args(argv)
    try:
        tao = tao_spec(args.tree)
        if args.dumbbell:
            dumbbell_mode(tao, args)
        else:
            prior_mode(tao, args)
    except BenchError as e:
        print(f"bench/tao.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
