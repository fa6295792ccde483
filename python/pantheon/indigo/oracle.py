"""The oracle of each training path: the best fixed window, which the expert steers towards.

Indigo's expert (Yan et al., ATC 2018, §6) knows the path: on an emulated path whose rate and
delay are known, the ideal window is near the bandwidth-delay product, and the expert's action is
the one that brings the window closest to it. The released code (StanfordSNR/indigo) keeps one
best window per path — dagger/best_cwnds.yml, rate × one-way delay, found beforehand by running
fixed windows over each emulated path, and a fixed number per calibrated path in
dagger/worker.py — and dagger/experts.py's TrueDaggerExpert picks the action whose result is
closest to it; the finder itself is not in the released code. Here it is a search in the
simulator, as the issue asks: from the bandwidth-delay product, fixed windows
(`fixed:cwnd_packets=N`, crates/cc) on a geometric grid of 0.5-2 BDP, then a finer grid between
the best coarse window's neighbours; the best maximises the paper's score, log(throughput) −
log(p95 one-way delay), averaged over seeds where the path is random (Poisson delivery, loss).

Oracles are cached (oracles.json in pantheon's cache directory), keyed by everything the search
depends on, since every training run of the same paths would otherwise repeat them.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pantheon.errors import PantheonError
from pantheon.indigo.paths import TrainingPath
from pantheon.sim.batch import FlowMetrics, FlowSpec, Job, Result

COARSE_RATIOS = tuple(2 ** (k / 4) for k in range(-4, 5))
"""Windows tried first, as multiples of the bandwidth-delay product: 0.5 to 2, nine steps."""
FINE_STEPS = 8
"""Windows tried between the best coarse window's two neighbours."""
RANDOM_PATH_SEEDS = 3
SEARCH_VERSION = 1
"""Part of the cache key: a change to the search makes new oracles."""


@dataclass(frozen=True)
class Oracle:
    cwnd_packets: int
    score: float
    """log(throughput in Mbit/s) − log(p95 one-way delay in ms) of the fixed window, seed mean."""


def score(flow: FlowMetrics) -> float:
    """The paper's score of a flow: log throughput − log delay (p95 one-way)."""
    if flow.throughput_mbps <= 0 or not flow.delay_p95_ms:
        return -math.inf
    return math.log(flow.throughput_mbps) - math.log(flow.delay_p95_ms)


def _cache_file() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "pantheon" / "indigo-oracles.json"


def _key(path: TrainingPath, runtime_s: float) -> str:
    about = {"options": list(path.options), "runtime_s": runtime_s, "random": path.random, "search": SEARCH_VERSION,
             "coarse": COARSE_RATIOS, "fine": FINE_STEPS, "seeds": RANDOM_PATH_SEEDS}
    return hashlib.sha256(json.dumps(about, sort_keys=True).encode()).hexdigest()[:16]


def _fine(coarse: list[int], best: int) -> list[int]:
    i = coarse.index(best)
    low, high = coarse[max(0, i - 1)], coarse[min(len(coarse) - 1, i + 1)]
    return sorted({round(low + (high - low) * k / FINE_STEPS) for k in range(FINE_STEPS + 1)} - set(coarse))


def _evaluate(paths: list[TrainingPath], windows: list[list[int]], runtime_s: float,
              run: Callable[[list[Job]], list[Result]]) -> list[dict[int, float]]:
    """Each path's windows' mean scores."""
    jobs, owners = [], []
    for p, (path, candidates) in enumerate(zip(paths, windows)):
        for cwnd in candidates:
            for seed in range(RANDOM_PATH_SEEDS if path.random else 1):
                jobs.append(Job([FlowSpec(f"fixed:cwnd_packets={cwnd}")], path.options, runtime_s, seed))
                owners.append((p, cwnd))
    results = run(jobs)
    sums: list[dict[int, list[float]]] = [{} for _ in paths]
    for (p, cwnd), result in zip(owners, results):
        if not result.ok:
            raise PantheonError(f"indigo oracle for {paths[p].name}: the simulator refused it: {result.error}")
        sums[p].setdefault(cwnd, []).append(score(result.flows[0]))
    return [{cwnd: sum(s) / len(s) for cwnd, s in found.items()} for found in sums]


def oracles(paths: list[TrainingPath], runtime_s: float, run: Callable[[list[Job]], list[Result]]) -> list[Oracle]:
    """Each path's best fixed window, from the cache or searched (all paths' candidates in one
    batch per stage)."""
    cache_file = _cache_file()
    try:
        cache = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        cache = {}
    keys = [_key(p, runtime_s) for p in paths]
    todo = [i for i, key in enumerate(keys) if key not in cache]
    if todo:
        todo_paths = [paths[i] for i in todo]
        coarse = [sorted({max(2, round(p.bdp_packets * r)) for r in COARSE_RATIOS}) for p in todo_paths]
        first = _evaluate(todo_paths, coarse, runtime_s, run)
        fine = [_fine(c, max(s, key=s.__getitem__)) for c, s in zip(coarse, first)]
        second = _evaluate(todo_paths, fine, runtime_s, run)
        for i, a, b in zip(todo, first, second):
            scores = {**a, **b}
            best = max(sorted(scores), key=scores.__getitem__)
            cache[keys[i]] = {"path": paths[i].name, "cwnd_packets": best, "score": scores[best],
                              "tried": {str(w): s for w, s in sorted(scores.items())}}
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_name(cache_file.name + ".tmp")
        tmp.write_text(json.dumps(cache, indent=1) + "\n")
        tmp.replace(cache_file)
    return [Oracle(int(cache[k]["cwnd_packets"]), float(cache[k]["score"])) for k in keys]
