"""Running a league: every cell (environment × scheme × seed) simulated as `pantheon-sim batch` jobs
in Dask tasks, journaled as they finish, so that a killed league resumes where it stopped.

Tasks: the cells not yet done, in the matrix's order, cut into slices of SLICE_JOBS jobs; a task runs
its slice through one `pantheon-sim batch` on one core (sim/runner.py's run_jobs; a rate step's trace
travels with the task as its recipe, a preset's as its bytes: path.py). Not as data scattered to the
cluster once: a worker that dies takes scattered data with it, and the tasks that needed it are
cancelled, not run again; and not as a rate step's bytes, megabytes copied into each of hundreds of
tasks (a gigabyte for ccBench's matrix). Dask runs as many tasks at once as its workers have threads:
a LocalCluster of one worker with a thread per core by default, or the cluster at `--scheduler`. A
worker that dies mid-task has its tasks run again elsewhere (Dask's own retry); each run is
deterministic in its job and seed, so the table is the same, bit for bit, whatever the workers.

The journal: each finished task's rows go to `parts/part-N.parquet` in the data dir, atomically;
on start the league reads league.parquet (a finished league's) and every part, and runs only the
cells missing from them. Once every cell is done the table is written whole and the parts removed.
"""
from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from pantheon import files
from pantheon import topology as topologies
from pantheon.league import table
from pantheon.league.entrants import Entrant
from pantheon.league.matrix import Environment, Matrix
from pantheon.league.path import PathBuilder
from pantheon.sim.batch import FlowSpec, Job, Result
from pantheon.sim.runner import names_model, run_jobs

PARTS_DIR = "parts"
TRACES_DIR = "traces"
SLICE_JOBS = 16
"""Jobs per task: a second or two of simulation at the matrices' rates, so a killed league loses
little and the journal stays a few hundred files."""


@dataclass(frozen=True)
class Cell:
    env: Environment
    entrant: Entrant
    seed: int

    @property
    def key(self) -> tuple[str, str, int]:
        return self.env.name, self.entrant.name, self.seed


def cells(matrix: Matrix, entrants: list[Entrant], baselines: list[Entrant]) -> list[Cell]:
    """Every cell, in the matrix's order: each entrant in each environment; each baseline (a `vs:`
    competitor not in the league) only in its own `vs:` cells, for the harm's baseline."""
    found = []
    for env in matrix.environments:
        players = entrants + [b for b in baselines if env.competitor == b.name]
        found += [Cell(env, player, seed) for player in players for seed in matrix.seeds]
    return found


def flows(cell: Cell, matrix: Matrix, competitors: dict[str, Entrant]) -> list[FlowSpec]:
    spec, env = cell.entrant.spec, cell.env
    if env.topology is not None:
        routes = len(topologies.load(env.topology).routes)
        other = spec if env.competitor is None else competitors[env.competitor].spec
        return [FlowSpec(spec)] + [FlowSpec(other)] * (routes - 1)
    if (work := env.workload) is not None:
        rate = env.capacity_mbps(matrix.duration_s)
        assert rate is not None, "a workload is in a grid of rates or presets"
        # The draw is the workload's, the rate's and the seed's: cells that differ in their buffer,
        # queue or loss meet the same transfers (common random numbers).
        key = f"{env.flows}/{rate!r}/{matrix.duration_s!r}/{cell.seed}"
        return [FlowSpec(spec, transfers=work.arrivals(key, rate, matrix.duration_s))]
    if env.flows == "single":
        return [FlowSpec(spec)]
    if env.flows == "pair":
        return [FlowSpec(spec), FlowSpec(spec)]
    if env.flows == "staggered":
        return [FlowSpec(spec), FlowSpec(spec, start_s=matrix.stagger_s())]
    assert env.competitor is not None
    return [FlowSpec(spec), FlowSpec(competitors[env.competitor].spec)]


def done_rows(data_dir: Path) -> list[dict]:
    """The rows already in the data dir: a finished league's table, then every part (a row of a
    later part replaces an earlier one of the same cell)."""
    rows: dict[tuple, dict] = {}
    sources = [data_dir / table.TABLE_FILE] if (data_dir / table.TABLE_FILE).exists() else []
    sources += sorted((data_dir / PARTS_DIR).glob("part-*.parquet")) if (data_dir / PARTS_DIR).is_dir() else []
    for path in sources:
        rows.update({table.key(row): row for row in table.read(path)})
    return list(rows.values())


@dataclass
class Progress:
    """What `run` reports as slices finish: cells done of all, rows failed so far."""
    done: int
    total: int
    failed: int
    elapsed_s: float


def run(matrix: Matrix, all_cells: list[Cell], competitors: dict[str, Entrant], data_dir: Path, client,
        on_progress: Callable[[Progress], None] | None = None) -> list[dict]:
    """Runs the cells not yet journaled in `data_dir` on the Dask `client`; every cell's row, in
    `all_cells`' order."""
    from distributed import as_completed

    wanted = {c.key for c in all_cells}
    rows = {table.key(r): r for r in done_rows(data_dir) if table.key(r) in wanted}
    pending = [c for c in all_cells if c.key not in rows]
    paths = PathBuilder(matrix, data_dir / TRACES_DIR)
    jobs = [Job(flows(c, matrix, competitors), paths.options(c.env), runtime_s=matrix.duration_s, seed=c.seed,
                window_s=matrix.window_s, topology=paths.topology(c.env)) for c in pending]
    parts = data_dir / PARTS_DIR
    parts.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    failed = sum(not r["ok"] for r in rows.values())
    futures = {}
    for a in range(0, len(pending), SLICE_JOBS):
        b = min(a + SLICE_JOBS, len(pending))
        named = {i: trace for i, trace in enumerate(paths.files) if any(names_model(job, i) for job in jobs[a:b])}
        futures[client.submit(run_jobs, jobs[a:b], named, 1, pure=False)] = (a, b)
    try:
        for future in as_completed(futures):
            a, b = futures.pop(future)
            results: list[Result] = future.result()
            new = [table.row(c.env, c.entrant, c.seed, r, matrix) for c, r in zip(pending[a:b], results)]
            _journal(parts, new)
            rows.update({table.key(r): r for r in new})
            failed += sum(not r["ok"] for r in new)
            if on_progress:
                on_progress(Progress(len(rows), len(all_cells), failed, time.monotonic() - started))
    finally:
        for future in futures:
            future.cancel()
    return [rows[c.key] for c in all_cells]


def _journal(parts: Path, rows: list[dict]) -> None:
    """One finished task's rows as a part of their own (a name no other task, or league, takes)."""
    path = parts / f"part-{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(3)}.parquet"
    with files.atomic_path(path) as tmp:
        pq.write_table(table.to_table(rows), tmp)


def finish(data_dir: Path, rows: list[dict]) -> Path:
    """The whole table, with harm, written once every cell is done; the parts are then removed."""
    path = data_dir / table.TABLE_FILE
    table.write(table.to_table(table.with_harm(rows)), path)
    for part in (data_dir / PARTS_DIR).glob("part-*.parquet"):
        part.unlink()
    (data_dir / PARTS_DIR).rmdir()
    return path
