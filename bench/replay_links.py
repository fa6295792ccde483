#!/usr/bin/env python3
"""An emulated run of the fidelity matrix against its replay in the simulator, link by link: what
each link dropped and why, how the drops group in time, and how long packets stayed in its queue
(docs/sim.md, "The matrix as it stands").

What is measured
    For each scheme of one place of the matrix (a path, a buffer, a flow count; seed 0), the
    emulated run in DIR (bench/sim_fidelity.py --keep DIR) and its replay (pantheon.sim.replay:
    the same path, seed and flow starts; a kernel row's replay is its userspace twin's), each from
    its native link logs (pantheon.link_log): per direction, the drops by cause, the episodes they
    come in (drops less than EPISODE_GAP_MS apart are one episode: a loss-based sender backs off
    once for them), and the p50 and p95 of the time between a packet's entering the link and its
    leaving it (queue and propagation).

Why
    A cell whose replay differs from its run as much as the simulator's seeds do (`hosts`) is one
    where the simulated hosts behave otherwise on the same draw; the links say where. Behind a
    one-packet downlink (the policer presets), how many acknowledgements it drops, and how they
    bunch, sets how often a pantheon-udp sender backs off.

Run from the repository (./setup.sh, cargo build --release, and the place's runs in DIR first):
    python3 bench/replay_links.py --keep DIR --path policer-12mbps-10ms --buffer deep --flows 2
        [--schemes reno-user,cubic-user]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

import support  # noqa: F401 - puts python/ on sys.path
from pantheon import link_log
from pantheon.schemes import registry
from pantheon.sim import replay
from pantheon.sim.simulable import simulable
from support.fidelity import KERNEL_TWINS

EPISODE_GAP_MS = 100.0
"""Drops closer than this are one episode (more than the paths' RTTs up to their deep buffers)."""
LINKS = ("uplink", "downlink")


def link_line(log_path: Path) -> str:
    """One link's drops by cause, their episodes, and the p50 and p95 of its packets' sojourn."""
    log = link_log.read(log_path)
    causes: dict[str, int] = {}
    for _t_us, _uid, _size, cause in log.drops:
        causes[cause] = causes.get(cause, 0) + 1
    drops_ms = np.sort(np.array([t_us for t_us, *_ in log.drops], dtype=float)) / 1e3
    episodes = int(1 + np.count_nonzero(np.diff(drops_ms) > EPISODE_GAP_MS)) if drops_ms.size else 0
    sojourn_ms = np.array([d.t_us - log.entries_us[d.uid] for d in log.departures if d.uid in log.entries_us]) / 1e3
    dropped = ", ".join(f"{n} {cause}" for cause, n in sorted(causes.items())) or "none"
    p50, p95 = np.percentile(sojourn_ms, [50, 95]) if sojourn_ms.size else (float("nan"), float("nan"))
    return f"{len(log.departures):>6} out, drops: {dropped:<10} in {episodes:>3} episodes, sojourn p50 {p50:5.1f} p95 {p95:5.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, required=True, help="the fidelity matrix's data dir")
    parser.add_argument("--path", required=True, help="a path of the matrix (demo or a preset)")
    parser.add_argument("--buffer", default="deep", help="shallow or deep (default deep)")
    parser.add_argument("--flows", type=int, default=2, help="1 or 2 (default 2)")
    parser.add_argument("--schemes", default="", help="the rows to show (default: every one emulated)")
    args = parser.parse_args()
    seed_dir = args.keep / args.path / args.buffer / f"{args.flows}flow" / "emu-10s" / "seed0"
    runs = {run.parent.name: run for run in sorted(seed_dir.glob("part*/*/run1"))}
    if not runs:
        sys.exit(f"replay_links: no emulated runs under {seed_dir}: run bench/sim_fidelity.py --keep {args.keep} first")
    specs = simulable(registry())
    chosen = [s for s in args.schemes.split(",") if s] or sorted(runs)
    for scheme in chosen:
        if scheme not in runs:
            sys.exit(f"replay_links: {scheme} has no emulated run under {seed_dir}; emulated: {', '.join(sorted(runs))}")
        run = runs[scheme]
        options = json.loads((run.parent.parent / "metadata.json").read_text())["emulator_options"]
        twin = KERNEL_TWINS.get(scheme, scheme)
        print(f"{scheme}" + (f" (replayed as {twin})" if twin != scheme else ""))
        with tempfile.TemporaryDirectory(prefix="replay-links-") as scratch:
            again = Path(scratch) / "replay"
            replay.run(replay.replay_of(run, options, specs[twin]), again, text_logs=True)
            for label, where in (("emulated", run), ("replay", again)):
                for link in LINKS:
                    print(f"  {label:<8} {link:<8} {link_line(where / f'{link}.log')}")


if __name__ == "__main__":
    main()
