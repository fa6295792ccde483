"""What calibration replicates: per scheme and flow setting, the mean throughput and the mean 95th-
percentile one-way delay over the valid runs of a data dir, per flow, exactly as `pantheon analyze`
computes them (the runs go through the analysis's own `analyse_run` and `scheme_summary`, so
perf.json's means and these are the same numbers).

A flow setting is a run's plan (harness/plan.py: the label's flows, each a scheme with its start
and duration, and the run's length): a data dir made
with one `--flows` setting has one per scheme; a scenario (schemes mixed in a run) is one setting
whose flows have different schemes. Per flow, because a simulated run gives per-flow metrics (and
for one flow, flow 1's figures are the run's).

Also from the data: what bounds the search (space.py) and the checks of §3 of issue 17 (no valid
run, one scheme only, runs of different paths mixed).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pantheon.analysis.analyze import analyse_run
from pantheon.analysis.datadir import open_data_dir
from pantheon.analysis.metrics import RunMetrics, scheme_summary
from pantheon.analysis.series import DEFAULT_BIN_MS
from pantheon.errors import PantheonError
from pantheon.harness.plan import Flow, Plan

MIXED_CAPACITY_RATIO = 1.10
"""Runs whose measured capacities (delivery opportunities, where the path was emulated) differ by
more than this factor were not over one path. A constant-rate path's capacity is exact; a Poisson
one's 30 s capacity varies by 1/sqrt(opportunities): 2.6% at 0.57 Mbit/s (nepal-wifi), so 10% is
nearly four standard deviations from a false alarm."""


class CalibrationError(PantheonError):
    """The data or the options cannot be calibrated on; the message says why."""


@dataclass
class Target:
    setting: Plan
    """The runs' plan: label, flows (scheme, start, duration) and length."""
    runs: list[RunMetrics]
    """The valid runs, in run order."""
    run_numbers: list[int]

    def means(self, runs: list[RunMetrics] | None = None) -> tuple[dict[str, float | None], dict[str, float | None]]:
        """Per flow number ("1", ...): the mean throughput (Mbit/s) and mean p95 delay (ms) of
        `runs` (default: all of the target's), by the analysis's scheme_summary."""
        flows = scheme_summary(self.runs if runs is None else runs)["flows"]
        return ({f: m["throughput_mbps"]["mean"] for f, m in flows.items()},
                {f: m["delay_p95_ms"]["mean"] for f, m in flows.items()})


@dataclass(frozen=True)
class Observed:
    """What the valid runs show of the path, for the search's bounds (space.py)."""
    min_throughput_mbps: float
    """The lowest throughput of all flows of a run."""
    max_throughput_mbps: float
    max_mean_throughput_mbps: float
    """The highest mean throughput of a target: the rate must reach it."""
    min_median_delay_ms: float
    """The smallest median one-way delay of a run: the propagation delay is below it."""
    max_p95_delay_ms: float
    min_mean_loss: float
    """The smallest mean loss rate of a target: the path's random loss is about this or below."""
    max_loss: float


@dataclass
class Data:
    path: Path
    targets: list[Target]
    observed: Observed
    left_out: dict[str, str]
    """Runs not used ("LABEL run K") and why."""


def read(data_dir: Path, schemes: list[str] | None = None) -> Data:
    """The targets of a data dir (only labels in `schemes`, where given); a CalibrationError when
    there is nothing to calibrate on."""
    data = open_data_dir(data_dir)
    groups: dict[Plan, Target] = {}
    left_out: dict[str, str] = {}
    capacities: list[tuple[float, str]] = []
    wanted = set(schemes) if schemes else None
    if wanted and (missing := sorted(wanted - {r.label for r in data.runs})):
        raise CalibrationError(f"{data_dir} has no runs of {', '.join(missing)} "
                               f"(it has {', '.join(sorted({r.label for r in data.runs}))})")
    for source in data.runs:
        if wanted is not None and source.label not in wanted:
            continue
        if not source.flows or not source.runtime_s:
            left_out[source.name] = "its flows' times are unknown (an original Pantheon data dir needs " \
                                    "pantheon_metadata.json with its runtime)"
            continue
        metrics = analyse_run(data, source, DEFAULT_BIN_MS, draw=False)
        if not metrics.metrics.valid:
            left_out[source.name] = "; ".join(metrics.metrics.flags)
            continue
        if metrics.metrics.capacity_mbps:
            capacities.append((metrics.metrics.capacity_mbps, source.name))
        setting = Plan(source.label, tuple(Flow(f.scheme, f.start_s, f.duration_s) for f in source.flows),
                       float(source.runtime_s))
        target = groups.setdefault(setting, Target(setting, [], []))
        target.runs.append(metrics.metrics)
        target.run_numbers.append(source.number)
    targets = list(groups.values())
    if not targets:
        why = f" (e.g. {next(iter(left_out.items()))[0]}: {next(iter(left_out.values()))})" if left_out else ""
        raise CalibrationError(f"{data_dir} has no valid run to calibrate on{why}")
    labels = sorted({t.setting.label for t in targets})
    if len(labels) < 2:
        raise CalibrationError(f"calibration needs valid runs of at least two schemes, {data_dir} has only {labels[0]}: "
                               "one scheme's throughput and delay are matched by many paths")
    if capacities:
        low, high = min(capacities), max(capacities)
        if high[0] > MIXED_CAPACITY_RATIO * low[0]:
            raise CalibrationError(f"{data_dir} mixes runs of different paths: capacity {low[0]:.3g} Mbit/s in {low[1]}, "
                                   f"{high[0]:.3g} in {high[1]}; calibrate one path's runs at a time")
    return Data(Path(data_dir), targets, _observed(targets), left_out)


def _observed(targets: list[Target]) -> Observed:
    runs = [r for t in targets for r in t.runs]
    mean_throughputs = [v for t in targets for v in t.means()[0].values() if v is not None]
    mean_losses = [sum(r.all.loss_rate or 0.0 for r in t.runs) / len(t.runs) for t in targets]
    return Observed(
        min_throughput_mbps=min(r.all.throughput_mbps for r in runs),
        max_throughput_mbps=max(r.all.throughput_mbps for r in runs),
        max_mean_throughput_mbps=max(mean_throughputs),
        min_median_delay_ms=min(r.all.delay_median_ms for r in runs if r.all.delay_median_ms is not None),
        max_p95_delay_ms=max(r.all.delay_p95_ms for r in runs if r.all.delay_p95_ms is not None),
        min_mean_loss=min(mean_losses),
        max_loss=max(r.all.loss_rate or 0.0 for r in runs),
    )
