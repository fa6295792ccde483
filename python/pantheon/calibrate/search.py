"""The search: an Optuna study (Akiba et al., "Optuna: a next-generation hyperparameter optimization
framework", KDD 2019), driven by ask and tell, whose trials run in parallel on Dask.

Why these: the paper's search was Bayesian optimisation (Spearmint's Gaussian process with
expected improvement); Optuna's default sampler, the Tree-structured Parzen Estimator (Bergstra et
al., "Algorithms for hyper-parameter optimization", NIPS 2011), is Bayesian optimisation too, takes
the categorical delivery kind as it is, needs no torch, and keeps its study in SQLite, so a search
that is stopped resumes where it was. Ask/tell keeps the loop ours: a trial is asked for whenever a
Dask worker is free, and told when its simulations come back, in whatever order they finish
(`constant_liar`: a trial still running counts as a poor one, so parallel trials do not crowd one
spot). Dask (`distributed`) runs the trials: a LocalCluster of one worker with a thread per core
by default (a trial's work is a pantheon-sim subprocess, so threads are enough), or the workers of
a real cluster through `--scheduler`.

Seeded: the sampler's seed is `--seed`; with one worker the same study is drawn again exactly,
with several the order in which trials finish varies and so do later draws.

Resumable: the study is named after what it fits (the targets, the stand-ins, the bounds, the runs
per trial), so running the same command again continues it and a different one starts another.
Trials that were running when the last search stopped are re-run.
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

from pantheon.calibrate import evaluate, replication, space
from pantheon.calibrate.targets import CalibrationError, Target

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

    @property
    def real(self) -> list[replication.Figures]:
        return [t.means() for t in self.targets]

    def name(self) -> str:
        """The study's name: a digest of everything the objective depends on."""
        about = {"settings": [[t.setting.label, t.setting.runtime_s, [asdict(f) for f in t.setting.flows],
                               t.run_numbers] for t in self.targets],
                 "cc": self.cc, "bounds": asdict(self.bounds), "sim_runs": self.sim_runs, "objective": 1}
        return "calibrate-" + hashlib.sha256(json.dumps(about, sort_keys=True).encode()).hexdigest()[:12]


class Progress:
    """One line on stderr: trials done, the best error so far, the time left. Redrawn in place
    on a terminal, printed every tenth of the search otherwise; nothing when quiet."""

    def __init__(self, quiet: bool, trials: int, minutes: float | None) -> None:
        self.quiet, self.trials, self.minutes = quiet, trials, minutes
        self.started = time.monotonic()
        self.tty = sys.stderr.isatty()
        self.shown = 0

    def update(self, done: int, new: int, best_pct: float | None) -> None:
        if self.quiet:
            return
        elapsed = time.monotonic() - self.started
        left = elapsed / new * (self.trials - done) if new else math.inf
        if self.minutes is not None:
            left = min(left, max(0.0, self.minutes * 60 - elapsed))
        best = f"{best_pct:.2f}%" if best_pct is not None else "-"
        line = f"calibrate: {done}/{self.trials} trials, best replication error {best}, " \
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
    from distributed import Client, LocalCluster

    if scheduler:
        try:
            return Client(scheduler, timeout="15s")
        except (OSError, TimeoutError) as e:
            raise CalibrationError(f"--scheduler {scheduler}: cannot reach the Dask scheduler ({e})") from None
    cores = len(os.sched_getaffinity(0))
    return Client(LocalCluster(n_workers=1, threads_per_worker=cores, processes=False, dashboard_address=None))


def open_study(problem: Problem, db: Path, seed: int):
    """The problem's study in the SQLite file `db` (created, or loaded to resume)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    db.parent.mkdir(parents=True, exist_ok=True)
    sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True, constant_liar=True)
    return optuna.create_study(study_name=problem.name(), storage=f"sqlite:///{db}", sampler=sampler,
                               direction="minimize", load_if_exists=True)


def run(problem: Problem, study, trials: int, minutes: float | None, scheduler: str | None, progress: Progress) -> int:
    """Runs trials until the study has `trials` finished ones or `minutes` have passed; the number
    of trials finished in this call. Ctrl-C keeps the study (KeyboardInterrupt with a message)."""
    from distributed import wait
    from optuna.trial import TrialState

    for stale in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(stale.number, state=TrialState.FAIL)
        study.enqueue_trial(stale.params)
    complete = lambda: len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))  # noqa: E731
    done = complete()
    deadline = None if minutes is None else time.monotonic() + minutes * 60
    real = problem.real
    settings = [t.setting for t in problem.targets]
    kinds = problem.bounds.deliveries
    client = _client(scheduler)
    width = max(1, sum(client.nthreads().values()))
    pending: dict = {}
    new, failures, first_error = 0, 0, None
    try:
        while True:
            while (len(pending) < width and done + len(pending) < trials
                   and (deadline is None or time.monotonic() < deadline)):
                # Each delivery kind in turn, not the sampler's choice: TPE settles on one kind
                # within its first trials (292 of 300 went to Poisson on a constant-rate path, and
                # the best of them was 38% off in delay).
                study.enqueue_trial({"delivery": kinds[len(study.trials) % len(kinds)]})
                trial = study.ask()
                candidate = space.suggest(trial, problem.bounds)
                future = client.submit(evaluate.simulate, settings, candidate, problem.cc, problem.sim_runs, pure=False)
                pending[future] = trial
            if not pending:
                break
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
                done, new = done + 1, new + 1
                progress.update(done, new, study.best_value)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"interrupted: the study keeps {complete()} trials; the same command resumes it") from None
    finally:
        progress.end()
        cluster = client.cluster
        client.close()
        if cluster is not None:
            cluster.close()
    return new
