"""Harm, as Ware, Mukerjee, Seshan and Sherry define it ("Beyond Jain's fairness index: setting the
bar for the deployment of congestion control algorithms", HotNets 2019, §3): what scheme A does to
the traffic B it shares a path with, measured against what B would get sharing with another B on
the same path and workload (the paper's baseline: a new algorithm should do no more harm to B than
B does to itself). For a metric of B measured with B, x, and with A, y:

    harm = (x − y) / x   where more is better (throughput)
    harm = (y − x) / y   where less is better (delay: B's 95th-percentile one-way delay)

Each is at most 1 (B lost everything, or all of its delay is added); where B did better with A
than with B the value is negative and counts as no harm, 0 (the paper's harm is in [0, 1]). Harm of
a scheme on itself is 0 by definition: x and y are then the same runs.

Over repeated runs: x is the mean of B's metric over its runs with B (every B flow of those runs is
one sample) and y the mean over its runs with A; harm is that of the means. Its 95% interval is
the Student-t interval of y's mean (ranking.describe) mapped through the harm, which is monotone
in y, with x held at its mean: it says how well the runs with A pin the harm down, not how well the
baseline is known (whose own spread `baseline_runs` and the data dir's runs show). Clipped to
[0, 1] as the harm is.

A `pantheon harm` campaign (metadata.json's arguments.command "harm") runs each pair of schemes
sharing the path, and each scheme with itself; its analysis (analyze.py) takes B's numbers from
those runs (pair_shares) and writes the matrix. harm.json, in the data dir, holds it: the harm A does to B
as {"A": {"B": {"throughput": h, "delay": h, "throughput_ci": [low, high], "delay_ci": [low,
high], "runs": n, "baseline_runs": n}}}; a value or an interval is null where it cannot be had
(no runs, fewer than two for an interval, a baseline of zero).
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pantheon import files
from pantheon.analysis.datadir import DataDirError, read_json
from pantheon.analysis.metrics import RunMetrics
from pantheon.analysis.ranking import describe

HARM_FILE = "harm.json"
METRICS = ("throughput", "delay")
"""The metrics of B harm is measured on: throughput_mbps (more is better), delay_p95_ms (less is)."""


@dataclass(frozen=True)
class Share:
    """B's numbers in one run (one flow of B): what harm compares."""
    throughput_mbps: float | None
    delay_p95_ms: float | None


@dataclass(frozen=True)
class Harm:
    """The harm A does to B on one metric: the value in [0, 1], its 95% interval, and the runs (B
    flows) each side had."""
    value: float | None
    ci: tuple[float, float] | None
    runs: int
    baseline_runs: int


def harm(baseline: float, shared: float, more_is_better: bool) -> float | None:
    """Ware et al.'s harm of one metric, baseline x (B with B) and shared y (B with A), in [0, 1];
    None where the divisor is not positive."""
    if more_is_better:
        value = (baseline - shared) / baseline if baseline > 0 else None
    else:
        value = (shared - baseline) / shared if shared > 0 else None
    return None if value is None else min(1.0, max(0.0, value))


def metric_harm(baseline: Sequence[float | None], shared: Sequence[float | None], more_is_better: bool) -> Harm:
    """Harm of the means over runs, and its interval (module header); None where a side has no run."""
    x, y = describe(baseline), describe(shared)
    value = ci = None
    if x["mean"] is not None and y["mean"] is not None:
        value = harm(float(x["mean"]), float(y["mean"]), more_is_better)
        if value is not None and y["ci_low"] is not None and y["ci_high"] is not None:
            ends = [harm(float(x["mean"]), float(end), more_is_better) for end in (y["ci_low"], y["ci_high"])]
            if None not in ends:
                ci = (min(e for e in ends if e is not None), max(e for e in ends if e is not None))
    return Harm(value, ci, int(y["n"] or 0), int(x["n"] or 0))


def pair_harm(with_other: Sequence[Share], with_itself: Sequence[Share]) -> dict[str, Harm]:
    """The harm A does to B: `with_other`, B's numbers in each run (each B flow) with A; `with_itself`,
    in each run with another B. {"throughput": Harm, "delay": Harm}."""
    return {"throughput": metric_harm([s.throughput_mbps for s in with_itself], [s.throughput_mbps for s in with_other], True),
            "delay": metric_harm([s.delay_p95_ms for s in with_itself], [s.delay_p95_ms for s in with_other], False)}


def pair_shares(runs: Iterable[tuple[Sequence[str], RunMetrics]]) -> dict[tuple[str, str], list[Share]]:
    """The shares harm_matrix takes, from runs of two flows (a `pantheon harm` campaign: each pair of
    schemes sharing the path, each scheme with itself): each run as (its flows' schemes, in flow
    order; its metrics). A valid run of A and B gives B's flow to (A, B) and A's to (B, A); one of B
    and B both flows to (B, B). Invalid runs and runs of other than two flows give nothing."""
    shares: dict[tuple[str, str], list[Share]] = {}
    for schemes, run in runs:
        if not run.valid or len(schemes) != 2:
            continue
        flows = {m.flow: m for m in run.flows}
        for doer, harmed, flow in ((schemes[0], schemes[1], "2"), (schemes[1], schemes[0], "1")):
            if flow in flows:
                shares.setdefault((doer, harmed), []).append(Share(flows[flow].throughput_mbps, flows[flow].delay_p95_ms))
    return shares


def harm_matrix(shares: Mapping[tuple[str, str], Sequence[Share]]) -> dict[str, dict[str, dict[str, Harm]]]:
    """Every ordered pair (A, B) of `shares` whose baseline (B, B) is there too: shares[(A, B)] is B's
    numbers in the runs of A with B (for (B, B), every B flow of B's runs with B). Returns
    matrix[A][B][metric]; the diagonal is 0 by definition (pair_harm of the same runs)."""
    matrix: dict[str, dict[str, dict[str, Harm]]] = {}
    for (a, b), runs in shares.items():
        if (b, b) in shares:
            matrix.setdefault(a, {})[b] = pair_harm(runs, shares[(b, b)])
    return matrix


def to_json(matrix: Mapping[str, Mapping[str, Mapping[str, Harm]]]) -> dict:
    """The matrix as harm.json holds it (module header)."""
    def entry(pair: Mapping[str, Harm]) -> dict:
        out: dict = {}
        for name in METRICS:
            out[name] = pair[name].value
        for name in METRICS:
            ci = pair[name].ci
            out[f"{name}_ci"] = None if ci is None else [ci[0], ci[1]]
        out["runs"], out["baseline_runs"] = pair["throughput"].runs, pair["throughput"].baseline_runs
        return out
    return {a: {b: entry(pair) for b, pair in row.items()} for a, row in matrix.items()}


def write_harm_json(matrix: Mapping[str, Mapping[str, Mapping[str, Harm]]], path: Path) -> Path:
    """harm.json, atomically."""
    files.write_atomic(path, files.json_text(to_json(matrix)))
    return path


def _number(value: object, where: str, path: Path) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DataDirError(f"{path}: {where} is {json.dumps(value)[:40]}, not a number or null; is it one pantheon harm wrote?")
    return float(value)


def read_harm_json(path: Path) -> dict[str, dict[str, dict[str, Harm]]]:
    """harm.json as the matrix (harm_matrix's shape); a DataDirError in one line where it is not one.
    An entry without intervals or run counts (written by hand: only "throughput" and "delay") reads
    with none."""
    document = read_json(path)
    matrix: dict[str, dict[str, dict[str, Harm]]] = {}
    if not isinstance(document, dict):
        raise DataDirError(f"{path} is not an object of schemes; is it one pantheon harm wrote?")
    for a, row in document.items():
        if not isinstance(row, dict) or not all(isinstance(pair, dict) for pair in row.values()):
            raise DataDirError(f"{path}: {a} is not an object of schemes, each an object of harms")
        for b, pair in row.items():
            runs = [_number(pair.get(k, 0), f"{a}.{b}.{k}", path) for k in ("runs", "baseline_runs")]
            entry = {}
            for name in METRICS:
                ci = pair.get(f"{name}_ci")
                if ci is not None and not (isinstance(ci, list) and len(ci) == 2):
                    raise DataDirError(f"{path}: {a}.{b}.{name}_ci is not a pair [low, high] or null")
                ends = None if ci is None else (_number(ci[0], f"{a}.{b}.{name}_ci", path), _number(ci[1], f"{a}.{b}.{name}_ci", path))
                entry[name] = Harm(_number(pair.get(name), f"{a}.{b}.{name}", path),
                                   None if ends is None or None in ends else (float(ends[0] or 0), float(ends[1] or 0)),
                                   int(runs[0] or 0), int(runs[1] or 0))
            matrix.setdefault(a, {})[b] = entry
    return matrix
