"""The observatory on a cluster that is not its own process (issue 21 §1, §2): workers that do not
see its state dir send each result back whole; an observatory killed while such a cluster runs its
experiment takes that experiment's result when it restarts, without running it again; node pairs
(remote mode, over a real OpenSSH server: tests/remote_hosts.py) run only on their local end's worker."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from archive_server import stop_group
from pantheon.archive.client import pack
from pantheon.observe.round import take_in
from remote_hosts import REPO, two_hosts
from test_observe import events, free_port, wait_for, write_schedule

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces and mounts")
ENV = {**os.environ, "PYTHONPATH": str(REPO / "python")}


def observe_argv(plan: Path, state: Path, address: str) -> list[str]:
    return [sys.executable, "-m", "pantheon.cli", "observe", str(plan), "--once", "--state", str(state),
            "--scheduler", address]


def dask_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "dask", *args, "--dashboard-address", "127.0.0.1:0"]


@pytest.mark.slow
def test_a_restarted_observatory_takes_the_result_of_the_experiment_its_cluster_was_running(tmp_path: Path) -> None:
    """One worker that cannot see the observatory's state dir (a tmpfs mounted over it in the
    worker's own mount namespace) and works elsewhere. The observatory is SIGKILLed once the first
    experiment is done and the second running; the restarted one queues neither again, and the
    second's result, from the attempt that started before the kill, arrives once."""
    hidden = tmp_path / "observatory-host"
    state = hidden / "state"
    state.mkdir(parents=True)
    plan = write_schedule(tmp_path / "s.toml", ["nepal-wifi", "india-wired"], ["copa"])
    scratch, home = tmp_path / "worker-scratch", tmp_path / "worker-home"
    home.mkdir()
    address = f"tcp://127.0.0.1:{free_port()}"
    procs: list[subprocess.Popen] = []

    def start(name: str, argv: list[str], **kwargs) -> subprocess.Popen:
        with open(tmp_path / f"{name}.log", "wb") as log:
            procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=ENV,
                                          start_new_session=True, **kwargs))
        return procs[-1]

    try:
        start("scheduler", dask_argv("scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1]))
        worker = ["worker", address, "--nthreads", "1", "--resources", "emulation=1", "--local-directory", str(scratch)]
        start("worker", ["unshare", "--mount", "sh", "-c", 'mount -t tmpfs observe-test "$0" && exec "$@"', str(hidden),
                         *dask_argv(*worker)], cwd=home)
        first = start("observe1", observe_argv(plan, state, address))
        journal = state / "journal.jsonl"
        wait_for(lambda: journal.is_file() and len(events(state, "done")) == 1 and len(events(state, "running")) == 2,
                 "the second experiment started", first)
        stop_group(first, signal.SIGKILL)
        killed_t = time.time()
        [finished] = events(state, "done")
        second = start("observe2", observe_argv(plan, state, address))
        wait_for(lambda: second.poll() is not None, "the restarted observatory ended")
        assert second.returncode == 0, (tmp_path / "observe2.log").read_text()
    finally:
        for proc in reversed(procs):
            stop_group(proc)
    assert len(events(state, "round")) == 1
    queued = [e["experiment"] for e in events(state, "queued")]
    assert sorted(queued) == ["india-wired.copa.1flow", "nepal-wifi.copa.1flow"], "neither was queued again"
    done = {e["experiment"]: e for e in events(state, "done")}
    assert len(done) == 2 == len(events(state, "done")) and finished["experiment"] in done
    [late] = [e for name, e in done.items() if name != finished["experiment"]]
    assert late["ran_on"]["started_t"] < killed_t < late["ran_on"]["ended_t"], late
    for line in done.values():
        data_dir = Path(line["data_dir"])
        assert data_dir == state / "rounds" / line["round"] / line["experiment"] / "data"
        assert (data_dir / "perf.json").is_file() and (data_dir / "observatory.json").is_file()
        assert (data_dir.parent / "attempt1.log").is_file()
        assert [p.name for p in data_dir.parent.iterdir() if p.name.startswith(".incoming")] == []
    assert list(home.iterdir()) == [], "the worker wrote nothing in its working directory"
    assert list(scratch.rglob("pantheon-observe-*")) == [], "each task removed its directory"


@pytest.mark.slow
def test_a_node_pair_runs_over_ssh_on_its_local_ends_worker_only(tmp_path: Path) -> None:
    """A [[pair]] in both directions, 2 s each, to a real sshd in another namespace; two workers,
    only one of them with the pair's host resource: both experiments ran there, and both were analysed."""
    state = tmp_path / "state"
    with two_hosts(tmp_path) as hosts:
        plan = tmp_path / "s.toml"
        plan.write_text(f'runtime_s = 2\n\n[[pair]]\nname = "veth"\nremote = "{hosts.host_alias}:{REPO}"\n'
                        f'local = "lab"\nsenders = ["local", "remote"]\nssh_config = "{hosts.ssh_config}"\n'
                        'schemes = ["cubic"]\n')
        address, local_end = "tcp://127.0.0.1:8786", "tcp://127.0.0.1:40001"
        procs = []
        try:
            for name, argv in (("scheduler", dask_argv("scheduler", "--host", "127.0.0.1", "--port", "8786")),
                               ("lab", dask_argv("worker", address, "--nthreads", "1", "--host", "127.0.0.1",
                                                 "--worker-port", "40001", "--resources", "emulation=1,host:lab=1")),
                               ("other", dask_argv("worker", address, "--nthreads", "1", "--resources", "emulation=1"))):
                with open(tmp_path / f"{name}.log", "wb") as log:
                    procs.append(hosts.popen_local(argv, stdout=log, stderr=subprocess.STDOUT, env=ENV,
                                                   start_new_session=True))
            done = hosts.run_local(observe_argv(plan, state, address), capture_output=True, text=True, env=ENV,
                                   timeout=240)
            assert done.returncode == 0, done.stderr
        finally:
            for proc in reversed(procs):
                stop_group(proc)
        assert hosts.remote_processes() == [], "the remote agent ended with each campaign"
    finished = events(state, "done")
    assert sorted(e["experiment"] for e in finished) == ["veth.local-sends.cubic.1flow", "veth.remote-sends.cubic.1flow"]
    assert {e["ran_on"]["worker"] for e in finished} == {local_end}
    for line in finished:
        assert (Path(line["data_dir"]) / "perf.json").is_file()


def test_a_data_dir_that_does_not_arrive_whole_is_not_taken(tmp_path: Path) -> None:
    """A task's data dir, cut short or altered on the way: the experiment fails with the reason,
    and neither the data dir nor the staging directory is left; a whole one lands in place."""
    source = tmp_path / "source"
    (source / "cubic").mkdir(parents=True)
    (source / "perf.json").write_text("{}\n")
    (source / "cubic" / "run.json").write_text('{"ok": true}\n' * 1000)
    body = io.BytesIO()
    pack(source, body)
    whole = body.getvalue()
    outcome = {"status": "done", "reason": "", "attempts": 1, "ran_on": {}, "logs": {"attempt1.log": "ok\n"}}
    for broken in (whole[:len(whole) // 2], whole[:-30] + bytes(30)):
        exp_dir = tmp_path / f"broken{len(broken)}"
        record = take_in(outcome | {"data": broken}, exp_dir)
        assert record["status"] == "failed" and record["data_dir"] is None, record
        assert record["reason"].startswith("its data dir did not arrive whole: "), record
        assert sorted(p.name for p in exp_dir.iterdir()) == ["attempt1.log"]
    record = take_in(outcome | {"data": whole}, tmp_path / "whole")
    assert record["status"] == "done" and record["data_dir"] == str(tmp_path / "whole" / "data")
    assert (tmp_path / "whole" / "data" / "cubic" / "run.json").read_bytes() == (source / "cubic" / "run.json").read_bytes()
    assert sorted(p.name for p in (tmp_path / "whole").iterdir()) == ["attempt1.log", "data"]
