"""The observatory (issue 21 §2, docs/observatory.md): `pantheon observe --once` over real emulated
experiments (2 s each) into a real archive server, and the faults it survives: a scheme that fails
every time, the archive down during a round, the observatory itself stopped mid-round."""
from __future__ import annotations

import html
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from archive_server import ArchiveServer, archive_server, new_database, stop_group
from pantheon.harness import leftovers
from pantheon.observe import schedule
from pantheon.observe.journal import Journal

REPO = Path(__file__).resolve().parent.parent
CRASHES = ('name = "crashes"\ndisplay = "crashes"\ncolor = "#000000"\ndescription = "test scheme"\n'
           'run_first = "receiver"\nreceiver = ["sh", "-c", "echo cannot bind >&2; exit 3"]\nsender = ["sleep", "1000"]\n')
KILL_WAIT_S = 120.0
"""How long the restart test waits for the first experiment to finish before giving up."""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The test's environment: a scheme that always fails on PANTHEON_SCHEMES_PATH."""
    directory = tmp_path / "schemes"
    directory.mkdir()
    (directory / "crashes.toml").write_text(CRASHES)
    return {**os.environ, "PANTHEON_SCHEMES_PATH": str(directory), "PYTHONPATH": str(REPO / "python")}


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArchiveServer]:
    root = tmp_path_factory.mktemp("archive")
    with archive_server(new_database(request, "sqlite", root), root) as started:
        yield started


def write_schedule(path: Path, presets: list[str], schemes: list[str]) -> Path:
    path.write_text(f"runtime_s = 2\nruns = 1\n\n[[matrix]]\npresets = {json.dumps(presets)}\n"
                    f"schemes = {json.dumps(schemes)}\nflows = [1]\n")
    return path


def observe(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pantheon.cli", "observe", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def events(state: Path, event: str) -> list[dict]:
    return [line for line in map(json.loads, (state / "journal.jsonl").read_text().splitlines())
            if line["event"] == event]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_schedule_mistakes_are_one_line_errors(tmp_path: Path, env: dict[str, str]) -> None:
    bad = {"presets = [\"nowhere\"]": "unknown emulator 'nowhere'",
           "schemes = [\"nope\"]": "nope: unknown scheme",
           "flows = [0]": "flows must be a list of flow counts",
           "runs = 0": "runs = 0 is out of range",
           "runtime_s = nan": "runtime_s = nan is out of range"}
    for line, message in bad.items():
        key = line.split(" ")[0]
        text = write_schedule(tmp_path / "s.toml", ["nepal-wifi"], ["copa"]).read_text()
        text = "\n".join(line if existing.startswith(key + " ") else existing for existing in text.splitlines())
        with pytest.raises(schedule.ScheduleError, match=message):
            schedule.parse(text, Path("s.toml"))
    with pytest.raises(schedule.ScheduleError, match="is not a duration"):
        schedule.parse('period = "often"\n' + text, Path("s.toml"))
    pair = '[[pair]]\nname = "p"\nremote = "root@node2"\nlocal = "lab"\nschemes = ["copa"]\n'
    [one_way] = schedule.parse(pair, Path("s.toml")).experiments
    assert one_way.resources() == {"emulation": 1, "host:lab": 1} and one_way.command()[:3] == ["test", "remote", "root@node2"]
    for line, message in {'senders = ["up"]': "senders must be a list", 'local = "a b"': "local must be a name",
                          'remote = "-oProxyCommand=x"': "remote must be an ssh destination"}.items():
        with pytest.raises(schedule.ScheduleError, match=message):
            kept = [existing for existing in pair.splitlines() if not existing.startswith(line.split(" ")[0] + " ")]
            schedule.parse("\n".join([*kept, line]), Path("s.toml"))
    done = observe(str(write_schedule(tmp_path / "s.toml", ["nowhere"], ["copa"])), "--once", env=env)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    (tmp_path / "pair.toml").write_text(pair.replace('local = "lab"', 'local = "elsewhere"'))
    done = observe(str(tmp_path / "pair.toml"), "--once", "--state", str(tmp_path / "state"), env=env)
    assert done.returncode == 2 and done.stderr.strip().endswith("without --scheduler only this host "
                                                                 f"({socket.gethostname().split('.')[0]!r}) runs experiments"), done.stderr


def test_a_round_uploads_each_result_and_records_a_scheme_that_always_fails(
        tmp_path: Path, env: dict[str, str], server: ArchiveServer) -> None:
    before = server.results()["total"]
    plan = write_schedule(tmp_path / "s.toml", ["nepal-wifi", "india-wired"], ["copa"])
    plan.write_text(plan.read_text() + '\n[[matrix]]\npresets = ["nepal-wifi"]\nschemes = ["crashes"]\n')
    state = tmp_path / "state"
    done = observe(str(plan), "--once", "--retries", "1", "--state", str(state), "--archive", server.url,
                   "--token", server.token("observatory"), env=env)
    assert done.returncode == 1, done.stderr
    assert {e["experiment"] for e in events(state, "uploaded")} == {"nepal-wifi.copa.1flow", "india-wired.copa.1flow"}
    # A line as each experiment starts and ends, and the round's summary (issue 39 §4).
    lines = done.stderr.splitlines()
    assert any(re.fullmatch(r"pantheon observe: india-wired\.copa\.1flow: running on \S+ \(attempt 1\)", line)
               for line in lines), done.stderr
    assert "pantheon observe: india-wired.copa.1flow: done" in lines, done.stderr
    assert re.fullmatch(r"pantheon observe: round \S+ ended: 3 experiments, 2 uploaded, 1 failed", lines[-1]), done.stderr
    assert server.results()["total"] == before + 2
    [failed] = events(state, "failed")
    assert failed["experiment"] == "nepal-wifi.crashes.1flow" and failed["attempts"] == 2
    assert failed["reason"].endswith("receiver exited early with status 3: cannot bind"), failed
    uploaded = json.loads((Path(events(state, "uploaded")[0]["data_dir"]) / "observatory.json").read_text())
    this_host = socket.gethostname().split(".")[0]
    assert uploaded["ran_on"]["worker_resources"] == {"emulation": 1, f"host:{this_host}": 1}
    assert uploaded["ran_on"]["other_tasks"] == []
    status = observe("--status", "--state", str(state), env=env).stdout
    assert "failed    nepal-wifi.crashes.1flow: attempt 2" in status and "Dask dashboard: http" in status, status
    assert_status_page(state, failed, events(state, "uploaded"))


def assert_status_page(state: Path, failed: dict, uploaded: list[dict]) -> None:
    """status.html, as the journal's last line left it: each experiment's row with its reason or its
    archive link, links to logs that exist, the dashboard's link, no round to come (--once)."""
    page = (state / "status.html").read_text()
    assert "ended" in page and "no next round scheduled" in page, page
    row = re.search(r'<tr class="failed"><td>failed</td><td>nepal-wifi.crashes.1flow</td><td>([^<]*)</td>', page)
    assert row and html.unescape(row[1]) == failed["reason"], page
    for line in uploaded:
        assert (f'<td>uploaded</td><td>{line["experiment"]}</td><td><a href="{html.escape(line["url"])}">'
                in page), page
    logs = re.findall(r'<a href="(rounds/[^"]+\.log)">', page)
    assert len(logs) == 4 and all((state / log).is_file() for log in logs), logs
    assert re.search(r'<a href="http://[^"]+:\d+/status">Dask dashboard</a>', page), page


def test_results_wait_for_an_archive_that_is_down_and_go_once_it_is_up(
        tmp_path: Path, env: dict[str, str], server: ArchiveServer) -> None:
    plan = write_schedule(tmp_path / "s.toml", ["nepal-wifi"], ["copa"])
    state = tmp_path / "state"
    token = server.token("observatory-down")
    down = observe(str(plan), "--once", "--state", str(state), "--archive", f"http://127.0.0.1:{free_port()}/",
                   "--token", token, env=env)
    assert down.returncode == 0, down.stderr
    assert not events(state, "uploaded") and len(Journal(state).read().waiting_uploads()) == 1
    assert "1 result(s) wait for the archive (could not reach" in observe("--status", "--state", str(state), env=env).stdout
    before = server.results()["total"]
    up = observe(str(plan), "--once", "--state", str(state), "--archive", server.url, "--token", token, env=env)
    assert up.returncode == 0, up.stderr
    # The first round's result, sent at the start, and the second round's: each once.
    uploaded = events(state, "uploaded")
    assert len(uploaded) == 2 and len({e["round"] for e in uploaded}) == 2
    assert len({e["result"] for e in uploaded}) == 2 and server.results()["total"] == before + 2
    assert not Journal(state).read().waiting_uploads()


def test_a_restarted_observatory_resumes_its_round_without_repeating_finished_experiments(
        tmp_path: Path, env: dict[str, str]) -> None:
    plan = write_schedule(tmp_path / "s.toml", ["nepal-wifi", "india-wired"], ["copa"])
    state = tmp_path / "state"
    first = subprocess.Popen([sys.executable, "-m", "pantheon.cli", "observe", str(plan), "--once", "--state", str(state)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + KILL_WAIT_S
        while not ((state / "journal.jsonl").is_file() and events(state, "done")):
            assert first.poll() is None and time.monotonic() < deadline, "the first experiment did not finish"
            time.sleep(0.2)
    finally:
        stop_group(first, signal.SIGTERM)
    [finished] = events(state, "done")
    assert not events(state, "round-end")
    done = observe(str(plan), "--once", "--state", str(state), env=env)
    assert done.returncode == 0, done.stderr
    assert len(events(state, "round")) == 1, "the restart resumed the round"
    done_lines = events(state, "done")
    assert sorted(e["experiment"] for e in done_lines) == ["india-wired.copa.1flow", "nepal-wifi.copa.1flow"]
    assert [e["experiment"] for e in events(state, "queued")].count(finished["experiment"]) == 1


def start_dask(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "dask", *args, "--dashboard-address", "127.0.0.1:0"],
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_for(condition, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + KILL_WAIT_S
    while not condition():
        assert proc is None or proc.poll() is None, f"{what}: the process exited"
        assert time.monotonic() < deadline, f"{what}: not within {KILL_WAIT_S:.0f} s"
        time.sleep(0.1)


@pytest.mark.slow
def test_an_experiment_whose_worker_is_killed_runs_again_on_another_and_leaves_nothing_behind(
        tmp_path: Path, env: dict[str, str]) -> None:
    plan = write_schedule(tmp_path / "s.toml", ["nepal-wifi"], ["copa"])
    plan.write_text(plan.read_text().replace("runtime_s = 2", "runtime_s = 3"))
    state = tmp_path / "state"
    address = f"tcp://127.0.0.1:{free_port()}"
    scheduler = start_dask(["scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1]],
                           tmp_path / "scheduler.log", env)
    worker_args = ["worker", address, "--nthreads", "1", "--resources", "emulation=1"]
    first = start_dask(worker_args, tmp_path / "worker1.log", env)
    with open(tmp_path / "observe.log", "wb") as log:
        observatory = subprocess.Popen([sys.executable, "-m", "pantheon.cli", "observe", str(plan), "--once", "--state",
                                        str(state), "--scheduler", address], stdout=subprocess.DEVNULL, stderr=log,
                                       env=env, start_new_session=True)
    second = None
    try:
        wait_for(lambda: (state / "journal.jsonl").is_file() and events(state, "running"), "the experiment started",
                 observatory)
        stop_group(first, signal.SIGKILL)
        assert not events(state, "done"), "the experiment ended before its worker was killed"
        second = start_dask(worker_args, tmp_path / "worker2.log", env)
        assert observatory.wait(timeout=KILL_WAIT_S) == 0, (tmp_path / "observe.log").read_text()
    finally:
        for proc in (observatory, second, scheduler):
            if proc is not None:
                stop_group(proc)
    [done] = events(state, "done")
    assert done["ran_on"]["worker"] != events(state, "running")[0]["worker"] and done["attempts"] == 1
    assert leftovers.orphaned() == [], "the task, once done, removes the namespace of the harness killed with its worker"


def test_a_schedule_that_is_not_text_or_a_state_that_is_a_file_is_refused_before_anything_runs(
        tmp_path: Path, env: dict[str, str]) -> None:
    """Issue 39 §3: each was a traceback (UnicodeDecodeError, FileExistsError)."""
    (tmp_path / "bytes.toml").write_bytes(b"runs = 1\n\xff\xfe\n")
    done = observe(str(tmp_path / "bytes.toml"), "--once", "--state", str(tmp_path / "state"), env=env)
    assert done.returncode == 2 and done.stderr.splitlines() == [
        f"pantheon: {tmp_path / 'bytes.toml'} is not a schedule: not text (a byte that is not UTF-8 at offset 9)"]
    (tmp_path / "state-file").write_text("")
    done = observe(str(write_schedule(tmp_path / "s.toml", ["nepal-wifi"], ["copa"])), "--once",
                   "--state", str(tmp_path / "state-file"), env=env)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "--state" in done.stderr, done.stderr
    for url in ("notaurl", "http://[::1", "http://127.0.0.1:99999/"):
        done = observe(str(tmp_path / "s.toml"), "--once", "--archive", url, "--state", str(tmp_path / "state"), env=env)
        [line] = done.stderr.splitlines()
        assert done.returncode == 2 and line.startswith(f"pantheon: --archive {url!r} is not an archive's URL"), line
    assert not (tmp_path / "state").exists()
