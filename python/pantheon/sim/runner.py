"""Where the simulations of a training run (Indigo's DAgger, Remy's optimiser): here, as one
`pantheon-sim batch` on every core (pantheon.sim.batch), or spread over a Dask cluster
(`--scheduler tcp://HOST:8786`; the client is pantheon.cluster's, as calibration's), a slice of
the jobs per task, each slice a batch of its own on one core of a worker (as calibration's
trials: Dask runs as many at once as the workers have threads).

A controller spec may name a model being trained by a placeholder, `model_file(i)` for the
i-th of the model files given with the jobs (Indigo's `weights=@MODEL0@`, one network; Remy's
`tree=@MODEL3@`, one rule tree of many candidates in one batch), and so may a path option (a
league's rate-step trace, `--uplink-trace @MODEL0@`), a topology's links' too: the files' bytes travel with the task, only
those its slice names, and each worker writes its own copies, so a worker on another machine
needs only its own checkout's pantheon-sim.
"""
from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from pantheon.cluster import dask_client
from pantheon.sim.batch import Job, Result, run_batch

SLICES_PER_THREAD = 2
"""Slices per worker thread: enough that a slow slice does not leave the others idle for long."""


def model_file(index: int = 0) -> str:
    """Stands for the path of the `index`-th model file given to `run_jobs` or `Runner.run` in a
    job's controller specs."""
    return f"@MODEL{index}@"


def names_model(job: Job, index: int) -> bool:
    """Whether the job names the `index`-th model file (its specs, path options or topology)."""
    placeholder = model_file(index)
    return (any(placeholder in f.cc for f in job.flows) or any(placeholder in o for o in job.path_options)
            or (job.topology is not None and placeholder in json.dumps(job.topology)))


def _with_file(job: Job, placeholder: str, path: str) -> Job:
    """The job with `placeholder` replaced by `path` in its specs, its path options and its
    topology's links' options."""
    topology = None if job.topology is None else json.loads(json.dumps(job.topology).replace(placeholder, path))
    return replace(job, flows=[replace(f, cc=f.cc.replace(placeholder, path)) for f in job.flows],
                   path_options=[o.replace(placeholder, path) for o in job.path_options], topology=topology)


Model = bytes | Callable[[], bytes]
"""A model file's bytes, or a function of none that makes them (picklable: a module-level function
or a functools.partial of one), for a file that is large but cheap to make: a league's rate-step
trace is megabytes, and its recipe a few numbers, which is what then travels with each task."""


def run_jobs(jobs: list[Job], models: Mapping[int, Model], jobs_parallel: int | None = None) -> list[Result]:
    """The jobs' results in their order, with `model_file(i)` in their specs replaced by a file
    of `models[i]`. A module-level function of plain data, so that a Dask worker can run it."""
    with tempfile.TemporaryDirectory(prefix="pantheon-models-") as tmp:
        for index, content in models.items():
            path = Path(tmp) / f"model{index}"
            path.write_bytes(content() if callable(content) else content)
            jobs = [_with_file(job, model_file(index), str(path)) if names_model(job, index) else job for job in jobs]
        with warnings.catch_warnings():
            # JAX warns at every fork that its threads may hold locks; the simulator's subprocess
            # execs at once after forking and takes none of them.
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            return run_batch(jobs, jobs_parallel=jobs_parallel)


class Runner:
    """Runs lists of jobs here or on the cluster at `scheduler`; close() when done."""

    def __init__(self, scheduler: str | None) -> None:
        self.client = dask_client(scheduler, threads=1) if scheduler else None

    @property
    def where(self) -> str:
        if self.client is None:
            return f"here, {len(os.sched_getaffinity(0))} cores"
        return f"Dask, {self.threads()} worker threads"

    def threads(self) -> int:
        assert self.client is not None
        return max(1, sum(self.client.nthreads().values()))

    def run(self, jobs: list[Job], models: Sequence[bytes] = ()) -> list[Result]:
        """The jobs' results in their order; `models[i]` is the file `model_file(i)` stands for."""
        every = dict(enumerate(models))
        if self.client is None:
            return run_jobs(jobs, every)
        slices = max(1, min(len(jobs), self.threads() * SLICES_PER_THREAD))
        bounds = [len(jobs) * k // slices for k in range(slices + 1)]
        futures = []
        for a, b in zip(bounds, bounds[1:]):
            named = {i: content for i, content in every.items() if any(names_model(job, i) for job in jobs[a:b])}
            futures.append(self.client.submit(run_jobs, jobs[a:b], named, 1, pure=False))
        return [result for future in futures for result in future.result()]

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
