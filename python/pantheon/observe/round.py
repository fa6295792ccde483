"""A round: every experiment of the schedule not yet finished in it, each one Dask task, results
uploaded as they complete; and the uploads still waiting from before.

Each task asks for the worker resource "emulation" (one unit): a worker started with
`--resources emulation=1` runs one experiment at a time, however many threads it has, because two
real-time experiments on the same cores would each measure the other. The default cluster is a
LocalCluster of one worker with one thread and that resource, in this process (its tasks start
`pantheon test local` processes, so they need no process of their own).

The observatory is the only writer of its journal; a task tells it an attempt has started by the
file worker.RUNNING in the experiment's directory, which the loop below looks for while it waits.
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from pantheon.cluster import dask_client
from pantheon.observe import worker
from pantheon.observe.journal import FINISHED, Journal, Round
from pantheon.observe.schedule import Schedule

POLL_S = 1.0
"""How often the loop looks for experiments that have started, s."""
RESOURCE = "emulation"


def client(scheduler: str | None):
    """A Dask client: of the cluster at `scheduler`, or of a one-worker, one-thread LocalCluster here."""
    return dask_client(scheduler, threads=1, resources={RESOURCE: 1})


class Uploader:
    """Sends done experiments' data dirs to the archive; one that cannot go now stays done (waiting)."""

    def __init__(self, journal: Journal, url: str | None, token: str | None) -> None:
        self.journal = journal
        self.url = url
        self.token = token

    def send(self, round_id: str, line: dict) -> bool:
        from pantheon.archive.client import UploadError, upload

        if not self.url:
            return False
        try:
            answer = upload(Path(line["data_dir"]), self.url, self.token,
                            {"title": f"observatory {round_id}: {line['experiment']}"})
        except UploadError as e:
            self.journal.write("upload-waits", reason=str(e))
            print(f"pantheon observe: {line['experiment']} waits for the archive: {e}", file=sys.stderr, flush=True)
            return False
        self.journal.write("uploaded", round=round_id, experiment=line["experiment"], url=answer.get("url"),
                           result=answer.get("id"), data_dir=line["data_dir"])
        return True

    def send_waiting(self) -> None:
        """Every result still waiting, oldest first; stops at the first that cannot go (the archive is down)."""
        for round_, line in self.journal.read().waiting_uploads():
            if not self.send(round_.id, line):
                return


def run_round(schedule: Schedule, state_dir: Path, journal: Journal, round_: Round, dask, retries: int,
              uploader: Uploader) -> None:
    """Runs the round's unfinished experiments on `dask`; returns when every one is done or failed."""
    from distributed import wait

    pending = {e.id: e for e in schedule.experiments if round_.experiments.get(e.id, {}).get("event") not in FINISHED}
    futures = {}
    for experiment_id, experiment in pending.items():
        exp_dir = state_dir / "rounds" / round_.id / experiment_id
        # A task cut off by a restart left its attempt's files: the experiment starts again from scratch.
        shutil.rmtree(exp_dir, ignore_errors=True)
        journal.write("queued", round=round_.id, experiment=experiment_id)
        futures[dask.submit(worker.run_experiment, experiment.arguments(), str(exp_dir), round_.id, experiment_id,
                            retries, key=f"{round_.id}/{experiment_id}", pure=False,
                            resources={RESOURCE: 1})] = (experiment_id, exp_dir)
    started: set[str] = set()
    while futures:
        try:
            finished = wait(list(futures), timeout=POLL_S, return_when="FIRST_COMPLETED").done
        except TimeoutError:
            finished = set()
        for experiment_id, exp_dir in futures.values():
            if experiment_id not in started and (exp_dir / worker.RUNNING).is_file():
                started.add(experiment_id)
                ran_on = json.loads((exp_dir / worker.RUNNING).read_text())
                journal.write("running", round=round_.id, experiment=experiment_id, worker=ran_on["worker"])
        for future in finished:
            experiment_id, _ = futures.pop(future)
            outcome = future.result()
            journal.write(outcome["status"], round=round_.id, experiment=experiment_id, reason=outcome["reason"],
                          attempts=outcome["attempts"], data_dir=outcome["data_dir"], ran_on=outcome["ran_on"])
            print(f"pantheon observe: {experiment_id}: {outcome['status']}"
                  + (f" ({outcome['reason']})" if outcome["reason"] else ""), file=sys.stderr, flush=True)
            if outcome["status"] == "done":
                uploader.send(round_.id, {"experiment": experiment_id, "data_dir": outcome["data_dir"]})


def observe(schedule: Schedule, state_dir: Path, once: bool, retries: int, scheduler: str | None,
            uploader: Uploader) -> int:
    """Resumes the round a previous observatory left unfinished, or starts one; with a period (and not
    `once`) starts the next when it is due, for ever. Returns 0, or 1 if an experiment of the last round failed."""
    journal = uploader.journal
    uploader.send_waiting()
    with client(scheduler) as dask:
        journal.write("start", dashboard=dask.dashboard_link, schedule=str(schedule.source))
        print(f"pantheon observe: Dask dashboard at {dask.dashboard_link}", file=sys.stderr, flush=True)
        while True:
            round_ = journal.read().current()
            if round_ is None:
                round_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
                journal.write("round", round=round_id, experiments=[e.id for e in schedule.experiments])
                round_ = Round(round_id, time.time())
            run_round(schedule, state_dir, journal, round_, dask, retries, uploader)
            uploader.send_waiting()
            last = journal.read().rounds[-1]
            next_t = None if once or schedule.period_s is None else last.started_t + schedule.period_s
            journal.write("round-end", round=round_.id, next_t=next_t)
            if next_t is None:
                return 1 if any(line["event"] == "failed" for line in last.experiments.values()) else 0
            time.sleep(max(0.0, next_t - time.time()))
