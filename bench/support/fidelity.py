"""The fidelity matrix's cells: which paths, which buffers, and how a cell's runs are gathered in
the simulator and in the emulator (bench/sim_fidelity.py prints the matrix, tests/test_sim_fidelity.py
checks a few of its cells).

A cell is a scheme, a path, a buffer and a number of flows. Its metrics, the same in both drivers:
the flows' total throughput (the sum of each flow's, Mbit/s) and the mean of the flows' p95
one-way delays (ms), each flow's as `pantheon analyze` computes it (docs/analysis.md); with one
flow, that flow's.

Paths: the demo's (python/pantheon/demo.py: 12 Mbit/s each way, 20 ms one way, 60 000-byte
DropTail queues, the microsecond clock) and every preset in presets/. Buffers, of the uplink (where
the data queues; the downlink, which carries acknowledgements, keeps the path's own):
    shallow   half the path's bandwidth-delay product (uplink mean rate x twice the one-way
              delay), at least 4 packets
    deep      four bandwidth-delay products, at least 16 packets
    own       the path as shipped (not in the standing matrix; the Indigo cell and older tables)
in whole 1500-byte packets, given in bytes. The queue's discipline stays the path's: CoDel,
FQ-CoDel and DualPI2 keep their parameters with the limit scaled, DropTail stays DropTail, and the
policers' one-packet buffers become the shallow and deep buffers (their own one packet is `own`).
Paths that differ only in their uplink buffer are one path once it is scaled (the buffer sweep's
four presets): the matrix keeps the first, by the presets' listing order, and says so.
"""
from __future__ import annotations

import dataclasses
import json
import math
import statistics
import subprocess
from collections.abc import Iterable
from pathlib import Path

import support  # noqa: F401 - puts python/ on sys.path
from pantheon import presets
from pantheon.analysis.ranking import t_quantile
from pantheon.presets import Direction, Preset
from pantheon.sim.batch import FlowSpec, Job, run_batch

PANTHEON = support.PANTHEON
PACKET_BYTES = 1500
DEMO = Preset("demo", "demo", 20.0, Direction(12.0, queue_bytes=60_000), Direction(12.0, queue_bytes=60_000),
              timing="us", description="pantheon demo's path (python/pantheon/demo.py, PATH_OPTIONS)")
BUFFERS = {"shallow": (0.5, 4), "deep": (4.0, 16)}
"""Buffer name -> (bandwidth-delay products, at least this many packets)."""
OWN = "own"
KERNEL_TWINS = {"cubic": "cubic-user", "bbr": "bbr-user", "reno": "reno-user"}
"""Kernel schemes run in the emulator, compared with their userspace twins in the simulator."""
RECORD = support.REPO / "data" / "fidelity" / "emulated.json"
"""Every emulated run of the matrix: its figures and its replay (bench/sim_fidelity.py's Record)."""

Pair = tuple[float, float]
"""A run's (throughput Mbit/s, p95 one-way delay ms)."""


def simulated_seeds_file(place_dir: Path, runtime_s: float, build: str) -> Path:
    """Where a place of the matrix keeps its simulated seeds of one pantheon-sim build (the simulator
    is deterministic, so a build's seeds are computed once): {scheme: {seed: [Mbit/s, p95 ms]}}."""
    return place_dir / f"sim-{runtime_s:g}s-{build}.json"


def all_paths() -> dict[str, Preset]:
    """The demo's path, then every preset in the listing's order."""
    return {"demo": DEMO, **presets.PRESETS}


def uplink_rate_mbps(direction: Direction) -> float:
    rate = direction.mean_rate_mbps()
    assert rate is not None
    return rate


def bdp_bytes(path: Preset) -> float:
    """The uplink's mean rate times the base RTT (twice the one-way delay)."""
    return uplink_rate_mbps(path.uplink) * 1e6 / 8 * 2 * path.delay_ms / 1000


def buffer_bytes(path: Preset, buffer: str) -> int:
    if buffer == OWN:
        up = path.uplink
        return up.queue_bytes or (up.queue_packets or 0) * PACKET_BYTES
    bdps, at_least = BUFFERS[buffer]
    return max(at_least, round(bdps * bdp_bytes(path) / PACKET_BYTES)) * PACKET_BYTES


def scaled(path: Preset, buffer: str) -> Preset:
    """The path with its uplink buffer set to `buffer`'s size, its discipline kept."""
    if buffer == OWN:
        return path
    up = dataclasses.replace(path.uplink, queue_packets=None, queue_bytes=buffer_bytes(path, buffer))
    return dataclasses.replace(path, uplink=up)


def same_path_key(path: Preset) -> tuple:
    return (path.delay_ms, path.uplink, path.downlink, path.timing)


def canonical(name: str, buffer: str) -> str:
    """The first path, by the listing's order, that is the same as `name`'s once its buffer is
    scaled (a buffer sweep's preset scales to its first)."""
    paths = all_paths()
    key = same_path_key(scaled(paths[name], buffer))
    return next(other for other, p in paths.items() if same_path_key(scaled(p, buffer)) == key)


def pair(flows: Iterable[tuple[float, float | None]]) -> Pair | None:
    """A run's (total throughput, mean of the flows' p95) from each flow's (throughput, p95); None
    when a flow delivered nothing (no p95)."""
    flows = list(flows)
    if not flows or any(p95 is None for _, p95 in flows):
        return None
    return sum(t for t, _ in flows), statistics.mean(p for _, p in flows if p is not None)


def simulated(path: Preset, specs: dict[str, str], flows: int, runtime_s: float, seeds: Iterable[int],
              traces_dir: Path) -> dict[str, dict[int, Pair | None]]:
    """Each scheme's simulated runs, seed by seed (pantheon-sim batch: no files; the same runs as
    `pantheon sim --flows F --run-times N --seed 0` would make, run K on seed K - 1)."""
    options = path.options(traces_dir)
    keys = [(name, seed) for name in specs for seed in seeds]
    jobs = [Job([FlowSpec(specs[name])] * flows, options, runtime_s=runtime_s, seed=seed) for name, seed in keys]
    out: dict[str, dict[int, Pair | None]] = {}
    for (name, seed), result in zip(keys, run_batch(jobs), strict=True):
        if not result.ok:
            raise RuntimeError(f"pantheon-sim batch, {name} seed {seed}: {result.error}")
        out.setdefault(name, {})[seed] = pair((f.throughput_mbps, f.delay_p95_ms) for f in result.flows)
    return out


def emulated(path_file: Path, schemes: list[str], flows: int, runtime_s: float, seed: int, data_dir: Path,
             timeout_s: float, runs: int = 1) -> dict[str, list[Pair | None]]:
    """`runs` `pantheon test local` runs of each scheme, run K on the emulator's seed `seed` + K − 1
    (then `pantheon analyze` without plots); each scheme's pairs, None for a run the analysis marked
    invalid."""
    argv = [str(PANTHEON), "test", "local", "--schemes", ",".join(schemes), "--emulator", str(path_file), "--flows",
            str(flows), "--run-times", str(runs), "--seed", str(seed), "--runtime", f"{runtime_s:g}", "--data-dir",
            str(data_dir), "--quiet", "--no-analyze"]
    for command in (argv, [str(PANTHEON), "analyze", str(data_dir), "--no-plots", "--quiet"]):
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command[1:3])} in {data_dir} exited {done.returncode}: "
                               f"{done.stderr.strip()[-500:]}")
    return perf_pairs(data_dir / "perf.json")


def steal_pcts(perf_json: Path) -> dict[str, list[float | None]]:
    """Each scheme's runs' host steal (perf.json's host_steal_pct, harness/steal.py), in the runs'
    order; None where it was not measured."""
    return {name: [scheme["runs"][k].get("host_steal_pct") for k in sorted(scheme["runs"], key=int)]
            for name, scheme in json.loads(perf_json.read_text())["schemes"].items()}


def perf_pairs(perf_json: Path) -> dict[str, list[Pair | None]]:
    """Each scheme's runs in a perf.json (docs/analysis.md) as pairs, in the runs' order."""
    out: dict[str, list[Pair | None]] = {}
    for name, scheme in json.loads(perf_json.read_text())["schemes"].items():
        runs = [scheme["runs"][k] for k in sorted(scheme["runs"], key=int)]
        out[name] = [pair((f["throughput_mbps"], f["delay_p95_ms"]) for key, f in run["flows"].items() if key != "all")
                     if run["valid"] else None for run in runs]
    return out


def t_975(df: float) -> float:
    """Student's t, two-sided 95%, on df degrees of freedom (Welch's are fractional: floored, the
    wider interval); the analysis's own quantile (pantheon.analysis.ranking)."""
    return t_quantile(max(1, math.floor(df)))


def half_width(values: list[float]) -> float:
    """Half-width of the 95% confidence interval of the mean (inf with one value)."""
    if len(values) < 2:
        return math.inf
    return t_975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def difference_half_width(a: list[float], b: list[float]) -> float:
    """Half-width of Welch's 95% interval of mean(a) − mean(b). With one run on a side, that run's
    spread is taken to be the other side's (one emulated run against many simulated seeds: the
    interval of a draw from the simulator's distribution), on the other side's degrees of freedom."""
    if len(a) < 2 and len(b) < 2:
        return math.inf
    if len(a) < 2 or len(b) < 2:
        many = a if len(a) > 1 else b
        return t_975(len(many) - 1) * math.sqrt(statistics.variance(many) * (1 / len(a) + 1 / len(b)))
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return 0.0
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return t_975(df) * math.sqrt(va + vb)
