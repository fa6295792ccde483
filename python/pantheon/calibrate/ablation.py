"""The ablation of the paper's Fig. 5 (Yan et al., ATC 2018, §5: each of the five parameters earns
its place): the same calibration with fewer parameters free, each step adding one,

    rate          the rate only: no propagation delay, an infinite queue, no loss, constant delivery
    + delay       and the propagation delay
    + buffer      and the DropTail buffer
    + loss        and the i.i.d. loss
    + Poisson     and the delivery kind: the full calibration

each a search of its own (its own studies in the same file, since the bounds name them), with as
many trials as the full one. Its result is each step's best replication error and path.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from pantheon.calibrate import search, space

STEPS: tuple[tuple[str, dict], ...] = (
    ("rate", {"delay_ms": space.Range(0.0, 0.0), "buffer_bytes": None, "loss": space.Range(0.0, 0.0),
              "deliveries": ("constant",)}),
    ("+ delay", {"buffer_bytes": None, "loss": space.Range(0.0, 0.0), "deliveries": ("constant",)}),
    ("+ buffer", {"loss": space.Range(0.0, 0.0), "deliveries": ("constant",)}),
    ("+ loss", {"deliveries": ("constant",)}),
)
"""The steps before the full calibration, as changes to its bounds."""


@dataclass(frozen=True)
class Step:
    name: str
    candidate: space.Candidate
    error_pct: float


def run(problem: search.Problem, db, seed: int, trials: int, scheduler: str | None, quiet: bool) -> list[Step]:
    """The steps short of the full calibration (whose result the caller has)."""
    steps = []
    for name, changes in STEPS:
        step = replace(problem, bounds=replace(problem.bounds, **changes))
        phases = search.calibrate(step, db, seed, trials, None, scheduler, search.Progress(quiet, trials, None))
        trial, candidate, _ = search.best(phases)
        steps.append(Step(name, candidate, trial.value))
    return steps
