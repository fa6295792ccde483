"""What calibration replicates: per scheme and flow setting, the mean throughput and the mean 95th-
percentile one-way delay over the valid runs of a data dir, per flow, exactly as `pantheon analyze`
computes them (the runs go through the analysis's own `analyse_run` and `scheme_summary`, so
perf.json's means and these are the same numbers).

A flow setting is a run's plan (plan.py: the label's flows, each a scheme with its start
and duration, and the run's length): a data dir made
with one `--flows` setting has one per scheme; a scenario (schemes mixed in a run) is one setting
whose flows have different schemes. Per flow, because a simulated run gives per-flow metrics (and
for one flow, flow 1's figures are the run's).

Cross traffic (issue 17 §2: a path carrying traffic that is not one of the measured schemes): the
flows of the schemes named cross traffic are left out of each setting, so the search fits the
measured flows over a path whose five parameters must account for the cross traffic's effect, as
over a real path, where the cross traffic is not seen. A data dir of such runs is made with
scenarios, each of a measured flow and the cross traffic's (bench/calibration.py --cross-traffic);
the analysis still shows every flow.

Also from the data: what bounds the search (space.py) and the checks of §3 of issue 17 (no valid
run, one scheme only, runs of different paths mixed).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pantheon.analysis.analyze import analyse_run
from pantheon.analysis.datadir import open_data_dir
from pantheon.analysis.metrics import FlowMetrics, RunMetrics, scheme_summary
from pantheon.analysis.series import DEFAULT_BIN_MS
from pantheon.errors import PantheonError
from pantheon.plan import Flow, Plan

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
    flow_numbers: tuple[str, ...]
    """The runs' flow numbers ("1", ...) of the setting's flows, in order: all of them, or those
    left when cross traffic is left out."""

    def means(self, runs: list[RunMetrics] | None = None) -> tuple[dict[str, float | None], dict[str, float | None]]:
        """Per flow of the setting ("1", ... in the setting's order, as a simulation numbers them):
        the mean throughput (Mbit/s) and mean p95 delay (ms) of `runs` (default: all of the
        target's), by the analysis's scheme_summary."""
        flows = scheme_summary(self.runs if runs is None else runs)["flows"]
        kept = [(str(n), flows[f]) for n, f in enumerate(self.flow_numbers, start=1) if f in flows]
        return ({n: m["throughput_mbps"]["mean"] for n, m in kept}, {n: m["delay_p95_ms"]["mean"] for n, m in kept})

    def measured(self, run: RunMetrics) -> list[FlowMetrics]:
        """What the run shows of the path: all its flows together, or, where cross traffic was left
        out, each measured flow (the path's rate, delay and loss bounds come from these)."""
        if len(run.flows) == len(self.flow_numbers):
            return [run.all]
        return [m for m in run.flows if m.flow in self.flow_numbers]


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


def read(data_dir: Path, schemes: list[str] | None = None, cross_traffic: tuple[str, ...] = ()) -> Data:
    """The targets of a data dir (only labels in `schemes`, where given; without the flows of the
    schemes in `cross_traffic`); a CalibrationError when there is nothing to calibrate on."""
    data = open_data_dir(data_dir)
    groups: dict[Plan, Target] = {}
    left_out: dict[str, str] = {}
    capacities: list[tuple[float, str]] = []
    wanted = set(schemes) if schemes else None
    if wanted and (missing := sorted(wanted - {r.label for r in data.runs})):
        raise CalibrationError(f"{data_dir} has no runs of {', '.join(missing)} "
                               f"(it has {', '.join(sorted({r.label for r in data.runs}))})")
    flow_schemes = {f.scheme for r in data.runs for f in r.flows}
    if unknown := sorted(set(cross_traffic) - flow_schemes):
        raise CalibrationError(f"--cross-traffic {','.join(unknown)}: no flow of {data_dir} is of that scheme "
                               f"(its flows are of {', '.join(sorted(flow_schemes)) or 'no known scheme'})")
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
        measured = [(str(n), f) for n, f in enumerate(source.flows, start=1) if f.scheme not in cross_traffic]
        if not measured:
            left_out[source.name] = "all its flows are cross traffic"
            continue
        setting = Plan(source.label, tuple(Flow(f.scheme, f.start_s, f.duration_s) for _, f in measured),
                       float(source.runtime_s))
        target = groups.setdefault(setting, Target(setting, [], [], tuple(n for n, _ in measured)))
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
    seen = [(t, [m for r in t.runs for m in t.measured(r)]) for t in targets]
    parts = [m for _, ms in seen for m in ms]
    mean_throughputs = [v for t in targets for v in t.means()[0].values() if v is not None]
    mean_losses = [sum(m.loss_rate or 0.0 for m in ms) / len(ms) for _, ms in seen]
    return Observed(
        min_throughput_mbps=min(m.throughput_mbps for m in parts),
        max_throughput_mbps=max(m.throughput_mbps for m in parts),
        max_mean_throughput_mbps=max(mean_throughputs),
        min_median_delay_ms=min(m.delay_median_ms for m in parts if m.delay_median_ms is not None),
        max_p95_delay_ms=max(m.delay_p95_ms for m in parts if m.delay_p95_ms is not None),
        min_mean_loss=min(mean_losses),
        max_loss=max(m.loss_rate or 0.0 for m in parts),
    )
