"""The replication error (Yan et al., ATC 2018, §5): how far an emulator's results are from a real
path's, as the mean over schemes of the relative errors of the mean throughput and of the mean
95th-percentile one-way delay,

    error = mean over schemes s of  ½ (|T_emu(s) − T_real(s)| / T_real(s) + |D_emu(s) − D_real(s)| / D_real(s)),

in percent (the paper's "mean replication error", Fig. 4; a scheme's own error is its term). Where
a scheme has several flows or flow settings, its term is the mean over them.

The noise floor is what the real runs themselves reach: the same error between the means of the
first and the second half of each scheme's runs (run order), so an emulator whose error is at the
floor is as close as another set of the path's own runs would be. With three runs the halves are
two runs and one: it overstates the spread of a three-run mean, which is the point of a floor.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pantheon.calibrate.targets import Target

Figures = tuple[dict[str, float | None], dict[str, float | None]]
"""Per flow number: the mean throughput (Mbit/s) and the mean p95 one-way delay (ms)."""
MISSING_PCT = 100.0
"""The error of a figure the other side does not have (nothing was delivered)."""


def relative_pct(real: float, other: float | None) -> float:
    """|other − real| / real in percent."""
    if other is None:
        return MISSING_PCT
    return 100.0 * abs(other - real) / real


@dataclass(frozen=True)
class Errors:
    overall_pct: float
    per_scheme_pct: dict[str, float]
    """Target label -> its error."""


def errors(targets: Sequence[Target], real: Sequence[Figures], other: Sequence[Figures]) -> Errors:
    """The replication error of `other` against `real`, aligned with `targets`."""
    terms: dict[str, list[float]] = {}
    for target, (real_t, real_d), (other_t, other_d) in zip(targets, real, other):
        for flow, throughput in real_t.items():
            delay = real_d.get(flow)
            if not throughput or delay is None or delay <= 0:
                continue  # a flow that delivered nothing has nothing to replicate
            terms.setdefault(target.setting.label, []).append(
                (relative_pct(throughput, other_t.get(flow)) + relative_pct(delay, other_d.get(flow))) / 2)
    per_scheme = {label: sum(v) / len(v) for label, v in terms.items()}
    overall = sum(per_scheme.values()) / len(per_scheme) if per_scheme else MISSING_PCT
    return Errors(overall, per_scheme)


def noise_floor(targets: Sequence[Target]) -> Errors | None:
    """The replication error of each target's second half of runs against its first; None when
    no target has two runs."""
    halved = [t for t in targets if len(t.runs) >= 2]
    if not halved:
        return None
    first = [t.means(t.runs[: (len(t.runs) + 1) // 2]) for t in halved]
    second = [t.means(t.runs[(len(t.runs) + 1) // 2:]) for t in halved]
    return errors(halved, first, second)
