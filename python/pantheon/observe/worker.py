"""One experiment, as a Dask task: `pantheon test local` as a process of its own into a fresh data dir
(it analyses the data dir at its end), retried up to `retries` more times, then the data dir marked
with what ran it. A failed attempt's data dir is removed before the next, and a failed experiment keeps
none, so no half result is ever uploaded.

The task runs where Dask puts it; its files go under the observatory's state dir, which a cluster's
workers must therefore share with the observatory (the same path: docs/observatory.md).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pantheon
from pantheon.files import json_text, write_atomic
from pantheon.harness import leftovers

RUNNING = "running.json"
"""Written in the experiment's directory when an attempt starts: the observatory journals it as running."""
METADATA = "observatory.json"
"""Written in a finished data dir: which observatory round ran it, where, and what else ran there."""


def _concurrent() -> dict:
    """What else ran on this worker and host while the experiment started (issue 21 §1: real-time
    experiments must not share cores silently)."""
    from distributed import get_worker

    worker = get_worker()
    own = worker.get_current_task()
    return {"worker": worker.address, "host": socket.gethostname(),
            "worker_threads": worker.state.nthreads, "worker_resources": dict(worker.state.total_resources),
            "other_tasks": sorted(str(ts.key) for ts in worker.state.executing if ts.key != own),
            "load_average_1min": os.getloadavg()[0]}


def _reason(status: int, output: str, data_dir: Path) -> str:
    """Why an attempt failed: its runs' first recorded failure (run.json), else the last line it printed."""
    for run_json in sorted(data_dir.glob("*/run*/run.json")):
        try:
            failures = json.loads(run_json.read_text()).get("failures") or []
        except (OSError, ValueError):
            continue
        if failures:
            return f"{run_json.parent.parent.name} {run_json.parent.name}: {failures[0]}"
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if status == 0:
        return "no perf.json: the analysis did not finish"
    return f"exit status {status}: {lines[-1] if lines else 'no message'}"


def run_experiment(arguments: list[str], exp_dir: str, round_id: str, experiment_id: str, retries: int) -> dict:
    """Runs `pantheon test local ARGUMENTS` until it succeeds or has failed 1 + `retries` times; returns
    {"status": "done" | "failed", "reason", "attempts", "data_dir", "ran_on"}."""
    directory = Path(exp_dir)
    data_dir = directory / "data"
    directory.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(pantheon.__file__).resolve().parent.parent), *filter(None, [os.environ.get("PYTHONPATH")])])}
    try:
        return _attempts(arguments, directory, data_dir, round_id, experiment_id, retries, env)
    finally:
        # A task run again because its worker was killed may start before the killed harness is
        # reaped, which test local's own clean-up takes as alive: by now it is gone, and its
        # namespace goes (leftovers.py). Only root sees the host's namespaces.
        if os.geteuid() == 0:
            leftovers.clean()


def _attempts(arguments: list[str], directory: Path, data_dir: Path, round_id: str, experiment_id: str,
              retries: int, env: dict[str, str]) -> dict:
    reason = ""
    for attempt in range(1, retries + 2):
        shutil.rmtree(data_dir, ignore_errors=True)
        ran_on = _concurrent()
        write_atomic(directory / RUNNING, json_text({"attempt": attempt, "started_t": time.time(), **ran_on}))
        command = [sys.executable, "-m", "pantheon.cli", "test", "local", *arguments, "--data-dir", str(data_dir), "--quiet"]
        with open(directory / f"attempt{attempt}.log", "w+") as log:
            status = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env).returncode
            log.seek(0)
            output = log.read()
        if status == 0 and (data_dir / "perf.json").is_file():
            write_atomic(data_dir / METADATA, json_text({
                "observatory": {"round": round_id, "experiment": experiment_id, "attempt": attempt,
                                "command": ["pantheon", "test", "local", *arguments]}, "ran_on": ran_on}))
            return {"status": "done", "reason": "", "attempts": attempt, "data_dir": str(data_dir), "ran_on": ran_on}
        reason = f"attempt {attempt}: {_reason(status, output, data_dir)}"
    shutil.rmtree(data_dir, ignore_errors=True)
    return {"status": "failed", "reason": reason, "attempts": retries + 1, "data_dir": None, "ran_on": ran_on}
