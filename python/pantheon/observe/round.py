"""A round: every experiment of the schedule not yet finished in it, each one Dask task, results
taken in and uploaded as they complete; and the uploads still waiting from before.

Each task asks for the worker resources of its experiment (schedule.Experiment.resources): one unit
of "emulation", so a worker started with `--resources emulation=1` runs one experiment at a time,
however many threads it has, because two real-time experiments on the same cores would each measure
the other; and a node pair's also "host:LOCAL", which only the worker on the pair's local end has.
The default cluster is a LocalCluster of one worker with one thread, one "emulation" and this host's
"host:NAME", in this process (its tasks start `pantheon` processes, so they need no process of
their own): there, a pair must name this host as its local end.

A task's result carries its data dir (worker.py); the observatory unpacks it beside the journal,
verified as the archive verifies an upload (archive/staging.py), and renames it into place whole
before it journals the experiment done.

Each task's future is also published on the scheduler (a Dask dataset named after the task), which
keeps the task and its result while no client holds it: an observatory restarted while a cluster
of its own (--scheduler) still runs an experiment takes that task's result when it comes, rather
than running the experiment again, and there is never a second copy of it. The dataset goes once
the result is journaled. With the default LocalCluster the cluster dies with the observatory and a
restart runs what was running again from scratch.

The observatory is the only writer of its journal and of its state dir; a task tells it an attempt
has started by a Dask event (worker.TOPIC), which the loop below journals while it waits.
"""
from __future__ import annotations

import hashlib
import queue
import shutil
import socket
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from pantheon.cluster import dashboard_link, dask_client
from pantheon.errors import PantheonError
from pantheon.observe import worker
from pantheon.observe.journal import FINISHED, Journal, Round
from pantheon.observe.schedule import HOST_RESOURCE, RESOURCE, Experiment, Schedule

POLL_S = 1.0
"""How often the loop looks for experiments that have started, s."""
DATASET = "pantheon-observe/"
"""Prefix of the scheduler's dataset names observatories publish: DATASET + the observatory's own id
(datasets_prefix) + "/" + the task's key."""
UNPACKED_BYTES = 16 << 30
"""The largest data dir taken from a worker, bytes (a 30 s run's is tens of MB)."""
FILES = 100_000
"""The most files a data dir taken from a worker may hold."""


def this_host() -> str:
    """This host's name as a pair's `local` gives it: the first label of its host name."""
    return socket.gethostname().split(".")[0]


def client(scheduler: str | None):
    """A Dask client: of the cluster at `scheduler`, or of a one-worker, one-thread LocalCluster here."""
    return dask_client(scheduler, threads=1, resources={RESOURCE: 1, HOST_RESOURCE + this_host(): 1})


def check_pairs(schedule: Schedule, scheduler: str | None) -> None:
    """Without a cluster of its own (--scheduler) the observatory runs only pairs whose local end is
    this host: a PantheonError for another."""
    for experiment in schedule.experiments:
        if scheduler is None and experiment.pair is not None and experiment.pair.local != this_host():
            raise PantheonError(f"{schedule.source}: pair {experiment.pair.name}'s local end is "
                                f"{experiment.pair.local!r}, but without --scheduler only this host "
                                f"({this_host()!r}) runs experiments")


def _warn_unrunnable(dask, experiment: Experiment) -> None:
    """Says so when no worker of the cluster has the resources `experiment` needs: its task waits
    for one to join (a measurement host coming back), which may be never."""
    needs = experiment.resources()
    workers = dask.scheduler_info(n_workers=-1)["workers"].values()
    if not any(all(w.get("resources", {}).get(name, 0) >= amount for name, amount in needs.items()) for w in workers):
        print(f"pantheon observe: {experiment.id} waits for a worker with the resources "
              f"{','.join(f'{name}={amount:g}' for name, amount in needs.items())}: none has joined yet",
              file=sys.stderr, flush=True)


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
                           result=answer.get("id"), data_dir=line["data_dir"], attempts=line.get("attempts"))
        return True

    def send_waiting(self) -> None:
        """Every result still waiting, oldest first; stops at the first that cannot go (the archive is down)."""
        for round_, line in self.journal.state().waiting_uploads():
            if not self.send(round_.id, line):
                return


def take_in(outcome: dict, exp_dir: Path) -> dict:
    """Writes a task's attempt logs and its data dir into `exp_dir` (the data dir whole, or not at
    all); returns the outcome as the journal records it, "data_dir" the data dir's path or None."""
    from pantheon.archive.staging import Limits, Refused, unpack

    exp_dir.mkdir(parents=True, exist_ok=True)
    for name, text in outcome["logs"].items():
        (exp_dir / Path(name).name).write_text(text)
    record = {key: outcome[key] for key in ("status", "reason", "attempts", "ran_on")} | {"data_dir": None}
    if outcome["data"] is None:
        return record
    data_dir = exp_dir / "data"
    shutil.rmtree(data_dir, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=".incoming-", dir=exp_dir))
    try:
        body = staging / "data.tar.gz"
        body.write_bytes(outcome["data"])
        unpacked = unpack(body, staging, Limits(len(outcome["data"]), UNPACKED_BYTES, FILES))
        unpacked.root.rename(data_dir)
    except Refused as e:
        return record | {"status": "failed", "reason": f"its data dir did not arrive whole: {e}"}
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return record | {"data_dir": str(data_dir)}


def datasets_prefix(state_dir: Path) -> str:
    """The names of this observatory's datasets start so: its host and state dir, hashed, so that
    observatories sharing a cluster neither take nor remove each other's."""
    identity = f"{socket.gethostname()}:{state_dir.resolve()}".encode()
    return f"{DATASET}{hashlib.sha256(identity).hexdigest()[:16]}/"


def _futures(schedule: Schedule, state_dir: Path, journal: Journal, round_: Round, dask, retries: int) -> dict:
    """The round's unfinished experiments' futures: those a previous observatory left on the
    cluster (published), the others submitted now; future -> (experiment id, its directory, dataset)."""
    prefix = datasets_prefix(state_dir)
    published = {name for name in dask.list_datasets() if str(name).startswith(prefix)}
    futures = {}
    for experiment in schedule.experiments:
        if round_.experiments.get(experiment.id, {}).get("event") in FINISHED:
            continue
        key = f"{round_.id}/{experiment.id}"
        name = prefix + key
        exp_dir = state_dir / "rounds" / round_.id / experiment.id
        if name in published:
            published.discard(name)
            futures[dask.get_dataset(name)] = (experiment.id, exp_dir, name)
            print(f"pantheon observe: {experiment.id}: still on the cluster, its result is awaited",
                  file=sys.stderr, flush=True)
            continue
        # What a restart cut short left here goes: the experiment starts again from scratch.
        shutil.rmtree(exp_dir, ignore_errors=True)
        journal.write("queued", round=round_.id, experiment=experiment.id)
        _warn_unrunnable(dask, experiment)
        future = _submit(dask, experiment, round_.id, retries, key)
        dask.publish_dataset(future, name=name, override=True)
        futures[future] = (experiment.id, exp_dir, name)
    for stale in published:
        # A result journaled by an observatory stopped before it unpublished it, or another round's.
        dask.unpublish_dataset(stale)
    return futures


def _submit(dask, experiment: Experiment, round_id: str, retries: int, key: str):
    return dask.submit(worker.run_experiment, experiment.command(), round_id, experiment.id, retries, key=key,
                       pure=False, resources=experiment.resources())


def round_summary(round_: Round, next_t: float | None) -> str:
    """One line at a round's end: how its experiments ended, and when the next round starts."""
    ended = Counter(line["event"] for line in round_.experiments.values())
    counts = ", ".join(f"{ended[event]} {what}" for event, what in
                       (("uploaded", "uploaded"), ("done", "waiting for the archive"), ("failed", "failed")) if ended[event])
    after = f"; the next starts at {time.strftime('%H:%M:%S', time.localtime(next_t))}" if next_t is not None else ""
    return f"round {round_.id} ended: {len(round_.experiments)} experiments, {counts or 'none ran'}{after}"


def run_round(schedule: Schedule, state_dir: Path, journal: Journal, round_: Round, dask, retries: int,
              uploader: Uploader) -> None:
    """Runs the round's unfinished experiments on `dask`; returns when every one is done or failed."""
    from distributed import KilledWorker, wait

    started: queue.Queue[dict] = queue.Queue()
    dask.subscribe_topic(worker.TOPIC, lambda event: started.put(event[1]))
    try:
        futures = _futures(schedule, state_dir, journal, round_, dask, retries)
        by_key = {f"{round_.id}/{experiment_id}": experiment_id for experiment_id, _, _ in futures.values()}
        while futures:
            try:
                finished = wait(list(futures), timeout=POLL_S, return_when="FIRST_COMPLETED").done
            except TimeoutError:
                finished = set()
            while not started.empty():
                event = started.get()
                if event.get("key") in by_key:
                    journal.write("running", round=round_.id, experiment=by_key[event["key"]], worker=event["worker"],
                                  attempt=event["attempt"])
                    print(f"pantheon observe: {by_key[event['key']]}: running on {event['worker']} "
                          f"(attempt {event['attempt']})", file=sys.stderr, flush=True)
            for future in finished:
                experiment_id, exp_dir, dataset = futures.pop(future)
                # A start event that comes after the result is stale.
                by_key.pop(f"{round_.id}/{experiment_id}")
                try:
                    outcome = take_in(future.result(), exp_dir)
                except KilledWorker as e:
                    outcome = {"status": "failed", "reason": f"its task killed every worker that ran it ({e})",
                               "attempts": 0, "data_dir": None, "ran_on": None}
                status = outcome.pop("status")
                journal.write(status, round=round_.id, experiment=experiment_id, **outcome)
                dask.unpublish_dataset(dataset)
                print(f"pantheon observe: {experiment_id}: {status}" + (f" ({outcome['reason']})" if outcome["reason"] else ""),
                      file=sys.stderr, flush=True)
                if outcome["data_dir"] is not None:
                    uploader.send(round_.id, journal.state().rounds[-1].experiments[experiment_id])
    finally:
        dask.unsubscribe_topic(worker.TOPIC)


def observe(schedule: Schedule, state_dir: Path, once: bool, retries: int, scheduler: str | None,
            uploader: Uploader) -> int:
    """Resumes the round a previous observatory left unfinished, or starts one; with a period (and not
    `once`) starts the next when it is due, for ever. Returns 0, or 1 if an experiment of the last round failed."""
    journal = uploader.journal
    check_pairs(schedule, scheduler)
    uploader.send_waiting()
    with client(scheduler) as dask:
        dashboard = dashboard_link(dask)
        journal.write("start", dashboard=dashboard, schedule=str(schedule.source))
        print(f"pantheon observe: Dask dashboard at {dashboard}", file=sys.stderr, flush=True)
        while True:
            round_ = journal.state().current()
            if round_ is None:
                round_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
                journal.write("round", round=round_id, experiments=[e.id for e in schedule.experiments],
                              next_t=None if once or schedule.period_s is None else time.time() + schedule.period_s)
                round_ = journal.state().rounds[-1]
            run_round(schedule, state_dir, journal, round_, dask, retries, uploader)
            uploader.send_waiting()
            last = journal.state().rounds[-1]
            next_t = None if once or schedule.period_s is None else last.started_t + schedule.period_s
            journal.write("round-end", round=round_.id, next_t=next_t)
            print(f"pantheon observe: {round_summary(last, next_t)}", file=sys.stderr, flush=True)
            if next_t is None:
                return 1 if any(line["event"] == "failed" for line in last.experiments.values()) else 0
            time.sleep(max(0.0, next_t - time.time()))
