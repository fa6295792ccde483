"""The search: Optuna studies (Akiba et al., "Optuna: a next-generation hyperparameter optimization
framework", KDD 2019), driven by ask and tell, whose trials run in parallel on Dask.

Two phases. Half the trials explore with the Tree-structured Parzen Estimator (Bergstra et al.,
"Algorithms for hyper-parameter optimization", NIPS 2011): Bayesian optimisation, as the paper's
Spearmint search was, needing no torch. The other half refine with CMA-ES from the explorer's best of each
delivery kind (`Refine`), because TPE finds the region but not the bottom of the valley in which delay and buffer
trade against each other. The explorer models the good and the poor trials' parameters together
(multivariate), each delivery kind's apart (group), and weighs 128 candidates per draw rather than
24: over a self-made path (docs/calibration.md), 120 trials recovered the buffer to 1.7-8% (seeds
1-4) with 128, to 0.5-18% with 24. Which kind each explorer trial tries is ours (`_next_kind`).

Ask/tell keeps the loop ours: a trial is asked for whenever a Dask worker is free, and told when
its simulations come back, in whatever order they finish (TPE's `constant_liar`: a trial still
running counts as a poor one, so parallel trials do not crowd one spot). Dask (`distributed`) runs
the trials: a LocalCluster of one worker with a thread per core by default (a trial's work is a
pantheon-sim subprocess, so threads are enough), or the workers of a real cluster through
`--scheduler`.

The trace model (`--model trace`, trace.py) is searched the same way, in studies of its own: one
kind, "trace", whose rate is a scale on the inferred trace (space.py).

Seeded: the samplers' seed is `--seed`; with one worker the same studies are drawn again exactly,
with several the order in which trials finish varies and so do later draws.

Resumable: the studies live in SQLite, named after what they fit (the targets, the stand-ins, the
bounds, the runs per trial), so running the same command again continues them and a different one
starts others. Trials that were running when the last search stopped are run again.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from pantheon import cluster
from pantheon.calibrate import evaluate, replication, space
from pantheon.calibrate.targets import CalibrationError, Target
from pantheon.calibrate.trace import DeliveryTrace
from pantheon.cluster import dask_client

FAILURES_TO_STOP = 3
"""Trials that fail before any succeeds: the simulator refuses every candidate, so stop and say why."""


@dataclass(frozen=True)
class Problem:
    """What one search fits."""
    targets: list[Target]
    cc: dict[str, str]
    """Scheme -> the crates/cc controller simulated for it (standins.py)."""
    bounds: space.Bounds
    sim_runs: int
    """Simulated runs per setting and trial."""
    trace: DeliveryTrace | None = None
    """The trace model's inferred trace (bounds.deliveries is then ("trace",)); None: the five parameters."""

    @property
    def real(self) -> list[replication.Figures]:
        return [t.means() for t in self.targets]

    def name(self) -> str:
        """The study's name: a digest of everything the objective depends on."""
        about = {"settings": [[t.setting.label, t.setting.runtime_s, [asdict(f) for f in t.setting.flows],
                               t.run_numbers] for t in self.targets],
                 "cc": self.cc, "bounds": asdict(self.bounds), "sim_runs": self.sim_runs, "search": 2}
        if self.trace is not None:  # the five parameters' studies keep their names (and resume)
            about["trace"] = self.trace.digest()
        return "calibrate-" + hashlib.sha256(json.dumps(about, sort_keys=True).encode()).hexdigest()[:12]


class Progress:
    """One line on stderr: trials done, the best error so far, the time left. Redrawn in place
    on a terminal, printed every tenth of the search otherwise; nothing when quiet."""

    def __init__(self, quiet: bool, trials: int, minutes: float | None, what: str = "") -> None:
        self.quiet, self.trials, self.minutes = quiet, trials, minutes
        self.what = f" ({what})" if what else ""
        self.started = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.shown = 0
        self.new = 0
        self.best_pct: float | None = None
        """Trials finished in this invocation, for the time left."""

    def update(self, done: int, best_pct: float | None) -> None:
        self.new += 1
        new = self.new
        if self.quiet:
            return
        elapsed = time.monotonic() - self.started
        left = elapsed / new * (self.trials - done) if new else math.inf
        if self.minutes is not None:
            left = min(left, max(0.0, self.minutes * 60 - elapsed))
        if best_pct is not None:
            self.best_pct = best_pct if self.best_pct is None else min(self.best_pct, best_pct)
        best = f"{self.best_pct:.2f}%" if self.best_pct is not None else "-"
        line = f"calibrate{self.what}: {done}/{self.trials} trials, best replication error {best}, " \
               f"{elapsed:.0f} s elapsed, ~{left:.0f} s left"
        if self.tty:
            print(f"\r{line}\x1b[K", end="", file=sys.stderr, flush=True)
        elif done >= self.shown + max(1, self.trials // 10) or done == self.trials:
            self.shown = done
            print(line, file=sys.stderr, flush=True)

    def end(self) -> None:
        if self.tty and not self.quiet:
            print(file=sys.stderr)


def _client(scheduler: str | None):
    """A Dask client: of the cluster at `scheduler`, or of a LocalCluster sized to this machine."""
    return dask_client(scheduler, threads=len(os.sched_getaffinity(0)))


def _next_kind(study, kinds: list[str]) -> str:
    """The delivery kind of the next trial: each in turn. Not the sampler's choice: TPE settles on
    one kind within its first trials (on a constant-rate path, 292 of 300 trials went to Poisson,
    and the best of them was 38% off in delay); nor the better kind's after a first round (20
    trials each, then three in four to the leader: with six schemes, Poisson led after 40 trials,
    got 65 of 100, and the search ended at 10.8% with the delay 38% off)."""
    trials = study.get_trials(deepcopy=False)
    counts = {kind: sum(t.params.get("delivery") == kind for t in trials) for kind in kinds}
    return min(kinds, key=lambda kind: (counts[kind], kinds.index(kind)))


EXPLORE_SHARE = 0.5
"""The share of the trials (and of --minutes) the exploring phase gets; the refining phase the rest."""
REFINE_SIGMA = 0.1
"""CMA-ES's initial step, as a fraction of each parameter's (log-)range: around the explorer's best,
not across the whole space again."""


def _quiet_optuna() -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    # CmaEsSampler's x0 and sigma0 are deprecated since Optuna 4.9 (to go in 6.0, for OptunaHub's
    # CMA-ES); requirements.lock pins 5.0, where they work as documented.
    warnings.filterwarnings("ignore", message="`(x0|sigma0)` has been deprecated", category=FutureWarning)


class Explore:
    """The first phase: TPE over both delivery kinds (`_next_kind`)."""

    def __init__(self, problem: Problem, storage: str, seed: int) -> None:
        import optuna

        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True, constant_liar=True,
                                             n_ei_candidates=128)
        self.study = optuna.create_study(study_name=problem.name(), storage=storage, sampler=sampler,
                                         direction="minimize", load_if_exists=True)
        self.bounds, self.trace = problem.bounds, problem.trace

    def ask(self):
        from optuna.trial import TrialState

        if not self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            self.study.enqueue_trial({"delivery": _next_kind(self.study, list(self.bounds.deliveries))})
        trial = self.study.ask()
        return trial, space.suggest(trial, self.bounds, self.trace)

    def candidate(self, params: dict) -> space.Candidate:
        return space.from_params(params, self.trace)

    @property
    def label(self) -> str:
        return "explore (trace)" if self.trace is not None else "explore"


class Refine:
    """The second phase: CMA-ES (Hansen, "The CMA evolution strategy: a tutorial", 2016) from the
    explorer's best of one delivery kind, that kind fixed (one refining study per kind, each with
    an equal share of the trials, so that a kind the explorer ranked second is still refined). TPE models good and poor values of each parameter,
    which finds the region but not the bottom of a narrow, tilted valley; on the self-made path
    (docs/calibration.md) 100 TPE trials left the buffer 27% off (error 4.6%), 80 CMA-ES trials
    after them brought it to 7.5% (1.6%). A study of its own (NAME-refine-KIND, same file):
    CMA-ES works on the parameters every trial of its study has, and the explorer's have each
    kind's apart. Its state lives in its trials, so it resumes too."""

    def __init__(self, problem: Problem, storage: str, seed: int, start: space.Candidate) -> None:
        import optuna

        self.bounds, self.trace, self.kind = problem.bounds, problem.trace, start.kind
        name = f"{problem.name()}-refine-{self.kind}"
        if name in optuna.get_all_study_names(storage):
            study = optuna.load_study(study_name=name, storage=storage)
            begun = study.user_attrs["start"]
            if self.kind == space.TRACE and problem.trace is not None:
                start = space.traced(problem.trace, begun["rate_scale"], begun["delay_ms"], begun["buffer_bytes"],
                                     begun["loss"])
            else:
                start = space.Candidate(**begun)
        x0 = space.refine_point(start, self.bounds)
        sampler = optuna.samplers.CmaEsSampler(x0=x0, sigma0=REFINE_SIGMA, seed=seed, warn_independent_sampling=False)
        self.study = optuna.create_study(study_name=name, storage=storage, sampler=sampler, direction="minimize",
                                         load_if_exists=True)
        self.study.set_user_attr("start", start.params())

    def ask(self):
        trial = self.study.ask()
        return trial, space.refined(trial, self.bounds, self.kind, self.trace)

    def candidate(self, params: dict) -> space.Candidate:
        return space.from_refined(params, self.kind, self.trace)

    @property
    def label(self) -> str:
        return f"refine ({self.kind})"


def storage(db: Path) -> str:
    _quiet_optuna()
    db.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{db}"


def top(phases: list, count: int) -> list[tuple]:
    """(trial, candidate, study name) of the `count` best finished trials of the phases' studies,
    best first, each candidate once."""
    found: dict[space.Candidate, tuple] = {}
    ranked = sorted(((t, phase) for phase in phases for t in phase.study.get_trials(deepcopy=False) if t.value is not None),
                    key=lambda pair: pair[0].value)
    for trial, phase in ranked:
        candidate = phase.candidate(trial.params)
        found.setdefault(candidate, (trial, candidate, phase.study.study_name))
        if len(found) == count:
            break
    if not found:
        raise CalibrationError("no trial finished: nothing to write")
    return list(found.values())


def best(phases: list) -> tuple:
    """(trial, candidate, study name) of the best finished trial of the phases' studies."""
    return top(phases, 1)[0]


def calibrate(problem: Problem, db: Path, seed: int, trials: int, minutes: float | None, scheduler: str | None,
              progress: Progress) -> list:
    """Both phases, the explorer's share first; the phases run (for `best`). Ctrl-C keeps the
    studies (KeyboardInterrupt with a message)."""
    url = storage(db)
    explore = Explore(problem, url, seed)
    explore_trials = max(1, math.ceil(trials * EXPLORE_SHARE))
    client = _client(scheduler)
    started = time.monotonic()
    try:
        _run(explore, problem, client, explore_trials, None if minutes is None else minutes * EXPLORE_SHARE,
             progress, 0)
        phases: list = [explore]
        starts = [c for _, c, _ in top([explore], trials)]
        kinds = [kind for kind in problem.bounds.deliveries if any(c.kind == kind for c in starts)]
        before = explore_trials
        for i, kind in enumerate(kinds):
            share = (trials - explore_trials) // len(kinds) + (i < (trials - explore_trials) % len(kinds))
            if share < 1:
                continue
            start = next(c for c in starts if c.kind == kind)
            refine = Refine(problem, url, seed, start)
            phases.append(refine)
            left = None if minutes is None else max(0.0, (minutes - (time.monotonic() - started) / 60) / (len(kinds) - i))
            _run(refine, problem, client, share, left, progress, before)
            before += share
    except KeyboardInterrupt:
        raise KeyboardInterrupt("interrupted: the study keeps its finished trials; the same command resumes it") from None
    finally:
        progress.end()
        cluster.close(client)
    return phases


def _run(phase, problem: Problem, client, trials: int, minutes: float | None, progress: Progress, before: int) -> None:
    """Runs the phase's trials until its study has `trials` finished ones or `minutes` have passed.
    `before`: trials of earlier phases, for the progress line."""
    from distributed import wait
    from optuna.trial import TrialState

    study = phase.study
    for stale in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(stale.number, state=TrialState.FAIL)
        study.enqueue_trial(stale.params)
    done = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    deadline = None if minutes is None else time.monotonic() + minutes * 60
    real = problem.real
    settings = [t.setting for t in problem.targets]
    width = max(1, sum(client.nthreads().values()))
    pending: dict = {}
    failures, first_error = 0, None
    while True:
        while (len(pending) < width and done + len(pending) < trials
               and (deadline is None or time.monotonic() < deadline)):
            trial, candidate = phase.ask()
            future = client.submit(evaluate.simulate, settings, candidate, problem.cc, problem.sim_runs, pure=False)
            pending[future] = trial
        if not pending:
            return
        finished, _ = wait(list(pending), return_when="FIRST_COMPLETED")
        for future in finished:
            trial = pending.pop(future)
            outcome = future.result()
            if outcome.error:
                failures += 1
                first_error = first_error or outcome.error
                trial.set_user_attr("error", outcome.error)
                study.tell(trial, state=TrialState.FAIL)
                if failures >= FAILURES_TO_STOP and done == 0:
                    raise CalibrationError(f"the simulator refused {failures} candidates: {first_error}")
                continue
            errors = replication.errors(problem.targets, real, outcome.figures)
            trial.set_user_attr("per_scheme_pct", errors.per_scheme_pct)
            trial.set_user_attr("figures", outcome.figures)
            study.tell(trial, errors.overall_pct)
            done += 1
            progress.update(before + done, study.best_value)
