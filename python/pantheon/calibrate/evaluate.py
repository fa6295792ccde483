"""One trial: every flow setting of the data simulated over a candidate path, each `runs` times
(seeds 0 … runs−1, the same for every trial, so that two candidates are compared on the same draws
of the hosts' latencies, losses and Poisson deliveries: common random numbers), and the mean
throughput and p95 delay per flow over those runs, as the analysis averages a scheme's runs.

A module-level function of plain data, so that a Dask worker anywhere can run it: the worker's own
checkout finds its pantheon-sim (pantheon.binaries). The simulations of a trial go through one
`pantheon-sim batch` one at a time (`jobs_parallel=1`): Dask runs as many trials at once as it has
worker threads, so each trial takes one core.
"""
from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pantheon.calibrate.replication import Figures
from pantheon.calibrate.space import Candidate
from pantheon.plan import Plan
from pantheon.sim.batch import FlowSpec, Job, run_batch


@dataclass(frozen=True)
class Outcome:
    figures: list[Figures]
    """Aligned with the settings."""
    error: str | None = None
    """Why a simulation failed (the simulator's one line); the figures are then empty."""


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def simulate(settings: Sequence[Plan], candidate: Candidate, cc: dict[str, str], runs: int) -> Outcome:
    """The settings' figures over `candidate`; `cc` maps each scheme to the controller simulated."""
    # A trace candidate's options name a trace file: written here, on the worker that simulates.
    with tempfile.TemporaryDirectory(prefix="pantheon-calibrate-") as traces:
        options = candidate.preset().options(Path(traces))
        jobs = [Job([FlowSpec(cc[f.scheme], f.start_s, f.duration_s) for f in s.flows], options, s.runtime_s, seed)
                for s in settings for seed in range(runs)]
        results = run_batch(jobs, jobs_parallel=1)
    if failed := next((r for r in results if not r.ok), None):
        return Outcome([], failed.error)
    figures: list[Figures] = []
    for i, setting in enumerate(settings):
        mine = results[i * runs:(i + 1) * runs]
        flows = [str(n + 1) for n in range(len(setting.flows))]
        figures.append(({f: _mean([r.flows[n].throughput_mbps for r in mine]) for n, f in enumerate(flows)},
                        {f: _mean([r.flows[n].delay_p95_ms for r in mine]) for n, f in enumerate(flows)}))
    return Outcome(figures)
