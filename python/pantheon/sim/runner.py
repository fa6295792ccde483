"""Where the simulations of training run: here, as one `pantheon-sim batch` on every core
(pantheon.sim.batch), or spread over a Dask cluster (`--scheduler tcp://HOST:8786`; the client
is pantheon.cluster's, as calibration's), a slice of the jobs per task, each slice a batch of its
own on one core of a worker (as calibration's trials: Dask runs as many at once as the workers
have threads).

A controller spec may name the network being trained as `weights=WEIGHTS` (the `WEIGHTS`
placeholder): the file's bytes travel with the task and each worker writes its own copy, so a
worker on another machine needs only its own checkout's pantheon-sim.
"""
from __future__ import annotations

import os
import tempfile
import warnings
from dataclasses import replace
from pathlib import Path

from pantheon.cluster import dask_client
from pantheon.sim.batch import Job, Result, run_batch

WEIGHTS = "@WEIGHTS@"
"""Stands for the weights file's path in a job's controller specs."""
SLICES_PER_THREAD = 2
"""Slices per worker thread: enough that a slow slice does not leave the others idle for long."""


def run_jobs(jobs: list[Job], weights: bytes | None, jobs_parallel: int | None = None) -> list[Result]:
    """The jobs' results in their order, with `WEIGHTS` in their specs replaced by a file of
    `weights`. A module-level function of plain data, so that a Dask worker can run it."""
    with tempfile.TemporaryDirectory(prefix="pantheon-indigo-") as tmp:
        if weights is not None:
            path = Path(tmp) / "weights.safetensors"
            path.write_bytes(weights)
            jobs = [replace(job, flows=[replace(f, cc=f.cc.replace(WEIGHTS, str(path))) for f in job.flows])
                    for job in jobs]
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

    def run(self, jobs: list[Job], weights: bytes | None = None) -> list[Result]:
        if self.client is None:
            return run_jobs(jobs, weights)
        slices = max(1, min(len(jobs), self.threads() * SLICES_PER_THREAD))
        bounds = [len(jobs) * k // slices for k in range(slices + 1)]
        futures = [self.client.submit(run_jobs, jobs[a:b], weights, 1, pure=False)
                   for a, b in zip(bounds, bounds[1:])]
        return [result for future in futures for result in future.result()]

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
