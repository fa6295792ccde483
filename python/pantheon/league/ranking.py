"""The league's standings from its table: ccBench's leagues (Abbasloo, "Internet Congestion Control
Benchmarking", arXiv:2307.10054, 2023): in each contest, the schemes within a margin (10 %) of the
best score are its winners; a scheme's standing is the share of its contests it won.

A contest is an environment, or with the matrix's `window_s` each time window of each environment
(ccBench compares schemes window by window). A scheme's score in a contest is the mean of its rows'
scores over the seeds (table.py defines the score); a contest whose best score is 0 (nobody moved
data) has no winner and does not count. Ranked: by win share, then by the mean of the scheme's score
relative to each contest's best ("how close it came", 1 when it won everything outright).

Per dimension (rate, RTT, buffer, queue, loss, step, flows, preset, topology), the same win share over the
contests with each value: where each scheme wins and where it loses. Where flows compete, the
median Jain index and the median harm to the competitor; over seeds, each environment's spread.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

WIN_MARGIN = 0.1
"""ccBench's: a scheme within 10 % of the best score wins the contest with it."""
DIMENSIONS = ("rate_mbps", "rtt_ms", "buffer_bdp", "buffer_bytes", "queue", "loss", "step_factor", "flows", "preset",
              "topology")


@dataclass(frozen=True)
class Standing:
    scheme: str
    wins: int
    contests: int
    mean_relative_score: float
    stand_in: str | None
    medians: dict[str, float | None]
    """throughput_mbps, utilization, delay_p95_ms, loss_rate, jain, harm_throughput, slowdown_p99 (workload
    cells): their medians over the scheme's rows."""
    harm: dict[str, float | None]
    """Over the scheme's `vs:` rows: throughput_mean, throughput_p90 (the harm a bad case does, which
    Ware et al. ask to look at beside the typical one: a median of 0 hides a scheme that starves its
    competitor in a tenth of the cells) and delay_mean."""

    @property
    def win_share(self) -> float:
        return self.wins / self.contests if self.contests else 0.0


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def contest_scores(rows: Sequence[dict]) -> dict[tuple[str, int], dict[str, float]]:
    """(environment, window or -1) -> scheme -> its mean score over the seeds."""
    sums: dict[tuple[str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if not r["ok"] or r["score"] is None:
            continue
        windows = r.get("window_score")
        if windows:
            for k, value in enumerate(windows):
                sums[(r["environment"], k)][r["scheme"]].append(value)
        else:
            sums[(r["environment"], -1)][r["scheme"]].append(r["score"])
    return {contest: {s: sum(v) / len(v) for s, v in by.items()} for contest, by in sums.items()}


def winners(scores: dict[str, float], margin: float = WIN_MARGIN) -> set[str]:
    best = max(scores.values(), default=0.0)
    if best <= 0:
        return set()
    return {s for s, v in scores.items() if v >= (1 - margin) * best}


def standings(rows: Sequence[dict], schemes: Sequence[str], margin: float = WIN_MARGIN) -> list[Standing]:
    """The ranked schemes (best first); rows of other schemes (harm baselines) take no part."""
    ranked = set(schemes)
    rows = [r for r in rows if r["scheme"] in ranked]
    wins: dict[str, int] = defaultdict(int)
    contests: dict[str, int] = defaultdict(int)
    relative: dict[str, list[float]] = defaultdict(list)
    for scores in contest_scores(rows).values():
        best = max(scores.values(), default=0.0)
        if best <= 0:
            continue
        won = winners(scores, margin)
        for scheme, value in scores.items():
            contests[scheme] += 1
            wins[scheme] += scheme in won
            relative[scheme].append(value / best)
    by_scheme: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_scheme[r["scheme"]].append(r)
    found = []
    for scheme in schemes:
        mine = [r for r in by_scheme[scheme] if r["ok"]]
        medians = {key: _median([r.get(key) for r in mine])
                   for key in ("throughput_mbps", "utilization", "delay_p95_ms", "loss_rate", "jain", "harm_throughput",
                               "slowdown_p99")}
        stand_in = next((r["stand_in"] for r in by_scheme[scheme]), None)
        found.append(Standing(scheme, wins[scheme], contests[scheme],
                              statistics.fmean(relative[scheme]) if relative[scheme] else 0.0, stand_in, medians,
                              _harm(mine)))
    return sorted(found, key=lambda s: (-s.win_share, -s.mean_relative_score, s.scheme))


def _harm(rows: Sequence[dict]) -> dict[str, float | None]:
    throughput = sorted(r["harm_throughput"] for r in rows if r.get("harm_throughput") is not None)
    delay = [r["harm_delay"] for r in rows if r.get("harm_delay") is not None]
    return {"throughput_mean": statistics.fmean(throughput) if throughput else None,
            "throughput_p90": throughput[math.ceil(0.9 * len(throughput)) - 1] if throughput else None,
            "delay_mean": statistics.fmean(delay) if delay else None}


def breakdown(rows: Sequence[dict], schemes: Sequence[str], margin: float = WIN_MARGIN) -> dict[str, dict[str, dict[str, float]]]:
    """dimension -> value (as text) -> scheme -> its win share in the contests with that value;
    only dimensions that take more than one value in the matrix."""
    ranked = set(schemes)
    env_values: dict[str, dict[str, object]] = {}
    for r in rows:
        env_values.setdefault(r["environment"], {d: r.get(d) for d in DIMENSIONS})
    tally: dict[str, dict[str, dict[str, list[int]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(lambda: [0, 0])))
    for (env, _), scores in contest_scores([r for r in rows if r["scheme"] in ranked]).items():
        won = winners(scores, margin)
        if not won:
            continue
        for dim, value in env_values[env].items():
            if value is None:
                continue
            for scheme in scores:
                counts = tally[dim][_text(value)][scheme]
                counts[0] += scheme in won
                counts[1] += 1
    return {dim: {value: {s: w / n for s, (w, n) in by.items()} for value, by in sorted(values.items(), key=_order)}
            for dim, values in tally.items() if len(values) > 1}


def _text(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _order(item: tuple[str, object]) -> tuple:
    try:
        return (0, float(item[0]), "")
    except ValueError:
        return (1, 0.0, item[0])


def spread(rows: Sequence[dict]) -> list[tuple[str, str, float]]:
    """(environment, scheme, coefficient of variation of the score over seeds), for cells with at
    least two seeds and a positive mean score, the most spread first."""
    scores: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        if r["ok"] and r["score"] is not None:
            scores[(r["environment"], r["scheme"])].append(r["score"])
    found = [(env, scheme, statistics.stdev(v) / statistics.fmean(v)) for (env, scheme), v in scores.items()
             if len(v) > 1 and statistics.fmean(v) > 0]
    return sorted(found, key=lambda x: -x[2])
