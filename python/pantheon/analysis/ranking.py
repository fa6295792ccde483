"""The ranking of a data dir's schemes, and the statistics it and the archive's pages show of a
scheme's runs: mean, sample standard deviation and the 95% confidence interval of the mean,
mean ± t·sd/√n with t the 97.5th percentile of Student's t with n − 1 degrees of freedom
("Student", Biometrika 6(1), 1908). The t quantile is found by bisection on the distribution's
closed form for integer degrees of freedom (Abramowitz and Stegun, Handbook of Mathematical
Functions, 1964, 26.7.3 and 26.7.4), so no statistics library is needed.

The score that orders the schemes is the archive's: Kleinrock's power of the means,
ln(mean throughput in Mbit/s / mean 95th-percentile one-way delay in ms) over the scheme's valid
runs, as the original Pantheon archive ranked schemes (metrics.power). Higher is better. Schemes
without a valid run have no score and come last.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pantheon.analysis.metrics import RunMetrics, power

CONFIDENCE = 0.95


def t_within(t: float, df: int) -> float:
    """P(|T| ≤ t) for Student's t with df degrees of freedom (A&S 26.7.3, 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 0:  # sinθ (1 + ½cos²θ + (1·3)/(2·4)cos⁴θ + ... up to cos^(df−2)θ)
        term, total = 1.0, 1.0
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        return math.sin(theta) * total
    if df == 1:
        return 2 * theta / math.pi
    term, total = 1.0, 1.0  # (2/π)(θ + sinθ cosθ (1 + (2/3)cos²θ + ... up to cos^(df−3)θ))
    for k in range(1, (df - 1) // 2):
        term *= c2 * (2 * k) / (2 * k + 1)
        total += term
    return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    """The t with P(|T| ≤ t) = confidence (12.706 for df 1, 2.262 for df 9, → 1.960 as df grows)."""
    low, high = 0.0, 1.0
    while t_within(high, df) < confidence:
        high *= 2
    for _ in range(100):
        middle = (low + high) / 2
        if t_within(middle, df) < confidence:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def describe(values: Sequence[float | None]) -> dict[str, float | int | None]:
    """n, mean, sd (sample, n − 1) and the 95% confidence interval [ci_low, ci_high] of the mean;
    None where n is too small (sd and the interval need two values)."""
    x = [v for v in values if v is not None and math.isfinite(v)]
    n = len(x)
    mean = sum(x) / n if n else None
    sd = math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1)) if n > 1 and mean is not None else None
    half = t_quantile(n - 1) * sd / math.sqrt(n) if sd is not None else None
    return {"n": n, "mean": mean, "sd": sd,
            "ci_low": mean - half if half is not None and mean is not None else None,
            "ci_high": mean + half if half is not None and mean is not None else None}


@dataclass(frozen=True)
class Ranked:
    """One scheme's row of the ranking: its score and the statistics (describe()) of its valid
    runs' all-flows throughput, 95th-percentile delay, loss rate and CE-mark rate (fractions; the
    CE rate's n is 0 where no run used ECN)."""
    label: str
    score: float | None
    throughput_mbps: dict
    delay_p95_ms: dict
    loss_rate: dict
    valid_runs: int
    runs: int
    ce_rate: dict


def rank_key(valid_runs: int, score: float | None) -> tuple[bool, bool, float]:
    """The ranking's order, as a sort key: best score first; then the schemes with valid runs but
    no score (nothing delivered), then those without a valid run (the report's and the archive's)."""
    return valid_runs == 0, score is None, -(score or 0.0)


def rank(runs_by_label: dict[str, list[RunMetrics]]) -> list[Ranked]:
    """Every scheme, best score first; then the schemes with valid runs but no score (nothing
    delivered), then those without a valid run, each group in the order given."""
    rows = []
    for label, runs in runs_by_label.items():
        valid = [r for r in runs if r.valid]
        throughput = describe([r.all.throughput_mbps for r in valid])
        delay = describe([r.all.delay_p95_ms for r in valid])
        loss = describe([r.all.loss_rate for r in valid])
        score = power(throughput["mean"], delay["mean"])
        rows.append(Ranked(label, score, throughput, delay, loss, len(valid), len(runs),
                           describe([r.all.ce_rate for r in valid])))
    return sorted(rows, key=lambda r: rank_key(r.valid_runs, r.score))
