"""One experiment, as a Dask task: `pantheon test local` (or `test remote`, for a node pair) as a
process of its own into a fresh data dir (it analyses the data dir at its end), retried up to
`retries` more times, then the data dir marked with what ran it and sent back in the task's result.

The task shares nothing with the observatory but the cluster: a measurement host need not mount the
observatory's state dir. It works in a temporary directory of its own under the Dask worker's local
directory, removed when it returns, and its result carries the finished data dir as the archive's
upload format (archive/client.py: a tar.gz with a MANIFEST.json of every file's sha256), which the
observatory unpacks and verifies with the archive's own checks before it takes it (round.py). Why in
the result rather than uploaded from the worker: the observatory alone writes the journal, so a
result is either on its disk and journaled done, or not there at all; the worker needs no archive
token and no route to the archive; and an archive that is down is the observatory's one queue of
results waiting on disk, not one per host. The price is the data dir crossing the cluster once (a
few MB per run). A failed attempt's data dir is removed before the next, and a failed experiment
sends none, so no half result is ever sent.

The task tells the observatory it has started with a Dask event on TOPIC (Worker.log_event).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pantheon
from pantheon.archive.client import pack
from pantheon.files import json_text, write_atomic
from pantheon.harness import leftovers

TOPIC = "pantheon-observe"
"""The Dask event topic on which a task announces an attempt's start: {"key", "attempt", "worker"}."""
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


def run_experiment(command: list[str], round_id: str, experiment_id: str, retries: int) -> dict:
    """Runs `pantheon COMMAND` (test local|remote and its options, without --data-dir) until it
    succeeds or has failed 1 + `retries` times; returns {"status": "done" | "failed", "reason",
    "attempts", "ran_on", "logs": {attemptK.log: text}, "data": the data dir's tar.gz or None}."""
    from distributed import get_worker

    directory = Path(tempfile.mkdtemp(prefix="pantheon-observe-", dir=get_worker().local_directory))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(pantheon.__file__).resolve().parent.parent), *filter(None, [os.environ.get("PYTHONPATH")])])}
    try:
        return _attempts(command, directory, round_id, experiment_id, retries, env)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        # A task run again because its worker was killed may start before the killed harness is
        # reaped, which test local's own clean-up takes as alive: by now it is gone, and its
        # namespace goes (leftovers.py). Only root sees the host's namespaces.
        if os.geteuid() == 0:
            leftovers.clean()


def _attempts(command: list[str], directory: Path, round_id: str, experiment_id: str, retries: int,
              env: dict[str, str]) -> dict:
    from distributed import get_worker

    data_dir = directory / "data"
    reason = ""
    logs: dict[str, str] = {}
    for attempt in range(1, retries + 2):
        shutil.rmtree(data_dir, ignore_errors=True)
        ran_on = _concurrent()
        get_worker().log_event(TOPIC, {"key": f"{round_id}/{experiment_id}", "attempt": attempt,
                                       "worker": ran_on["worker"]})
        started_t = time.time()
        argv = [sys.executable, "-m", "pantheon.cli", *command, "--data-dir", str(data_dir), "--quiet"]
        log_name = f"attempt{attempt}.log"
        with open(directory / log_name, "w+") as log:
            status = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env).returncode
            log.seek(0)
            logs[log_name] = log.read()
        ran_on = {**ran_on, "started_t": started_t, "ended_t": time.time()}
        if status == 0 and (data_dir / "perf.json").is_file():
            write_atomic(data_dir / METADATA, json_text({
                "observatory": {"round": round_id, "experiment": experiment_id, "attempt": attempt,
                                "command": ["pantheon", *command]}, "ran_on": ran_on}))
            with open(directory / "data.tar.gz", "w+b") as body:
                pack(data_dir, body)
                body.seek(0)
                data = body.read()
            return {"status": "done", "reason": "", "attempts": attempt, "ran_on": ran_on, "logs": logs, "data": data}
        reason = f"attempt {attempt}: {_reason(status, logs[log_name], data_dir)}"
    return {"status": "failed", "reason": reason, "attempts": retries + 1, "ran_on": ran_on, "logs": logs, "data": None}
