"""Remote mode's pieces without ssh. The agent's protocol (the agent as a local subprocess: the
transport is only the argv): versions and the host's description, an error for a bad request, its
private files gone when its input closes, the processes of an agent that was killed ended by the
next one — by process id and start time, never a stranger's reused id. And a clock that cannot be
fitted is a run's failure line."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from pantheon import plan
from pantheon.harness import campaign, leftovers
from pantheon.harness.channel import Channel, ChannelError
from pantheon.harness.remote import Remote, Setup, parse_destination
from pantheon.harness.run import Outcome
from pantheon.trials import git_commit


def agent_states(home: Path) -> Path:
    return home / ".local/state/pantheon/agents" / f"pidns-{os.stat('/proc/self/ns/pid').st_ino}"


def agent(home: Path) -> Channel:
    """An agent whose state files go under `home` (the tests' own, not the user's)."""
    return Channel(["env", f"HOME={home}", f"PYTHONPATH={REPO / 'python'}", sys.executable, "-m", "pantheon.harness.remote_agent"],
                   "test agent")


def test_hello_says_versions_and_what_each_scheme_lacks(tmp_path: Path) -> None:
    channel = agent(tmp_path)
    try:
        hello = channel.request({"op": "hello", "schemes": ["cubic", "no-such-scheme"]})
        assert hello["git_commit"] == git_commit()
        assert hello["machine"]["cpus"] == os.cpu_count()
        assert "net.ipv4.tcp_congestion_control" in hello["sysctls"]
        assert "unknown scheme" in hello["schemes"]["no-such-scheme"]["problem"]
        assert hello["leftovers"] == []
        with pytest.raises(ChannelError, match="unknown request"):
            channel.request({"op": "dance"})
    finally:
        channel.close()
    assert channel.proc.returncode == 0
    assert not agent_states(tmp_path).exists(), "the agent's state file outlived it"


def test_closing_its_input_ends_the_agent_and_removes_its_files(tmp_path: Path) -> None:
    channel = agent(tmp_path)
    channel.request({"op": "hello", "schemes": []})
    state = json.loads(next(agent_states(tmp_path).glob("*.json")).read_text())
    assert Path(state["dir"]).is_dir()
    assert channel.proc.stdin is not None
    channel.proc.stdin.close()  # what the agent sees when ssh drops or the harness is killed
    channel.proc.wait(timeout=10)
    assert not Path(state["dir"]).exists()


def test_a_killed_agents_processes_are_ended_by_the_next_one(tmp_path: Path) -> None:
    states = agent_states(tmp_path)
    states.mkdir(parents=True)
    left = subprocess.Popen(["sleep", "60"], start_new_session=True)
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    private = tmp_path / "private"
    private.mkdir()
    gone = subprocess.Popen(["true"])  # the killed agent: an id that no longer runs
    gone.wait()
    (states / f"{gone.pid}.json").write_text(json.dumps({
        "pid": gone.pid, "ticks": 1, "dir": str(private),
        "processes": [{"pid": left.pid, "ticks": leftovers.start_ticks(left.pid)},
                      # The stranger's id with another start time: a reused id, not the agent's child.
                      {"pid": stranger.pid, "ticks": (leftovers.start_ticks(stranger.pid) or 0) + 1}],
    }))
    channel = agent(tmp_path)
    try:
        hello = channel.request({"op": "hello", "schemes": []})
    finally:
        channel.close()
    try:
        assert hello["leftovers"] == [f"agent {gone.pid} was killed and left 1 process(es) running ({left.pid}): ended"]
        assert left.wait(timeout=5) == -15
        time.sleep(0.1)
        assert stranger.poll() is None, "a process that only shares a recorded id was ended"
        assert not private.exists()
    finally:
        stranger.kill()
        left.kill()


def test_destination_parsing() -> None:
    assert parse_destination("root@host:/srv/pantheon") == ("root@host", "/srv/pantheon")
    assert parse_destination("host") == ("host", str(REPO))


def test_a_sigkilled_agent_leaves_no_endpoint_running(tmp_path: Path) -> None:
    """The agent's launchers watch it as local mode's watch the harness: killed (SIGKILL, no
    clean-up of its own), its tunnel server and launcher end within a few seconds, and the next
    agent finds nothing to end but removes the killed one's files (the session key among them)."""
    channel = agent(tmp_path)
    try:
        channel.run_dir = tmp_path / "run"
        channel.request({"op": "hello", "schemes": ["cubic"]})
        channel.request({"op": "run", "index": 1})
        port = channel.request({"op": "endpoint", "flow": 0, "side": "receiver", "role": "server", "scheme": "cubic",
                                "key": "ab" * 32})["port"]
        assert port > 0
        state = json.loads(next(agent_states(tmp_path).glob("*.json")).read_text())
        [server] = state["processes"]
        os.kill(channel.proc.pid, signal.SIGKILL)
        channel.proc.wait()  # reaped, as sshd reaps its session's command: a zombie still counts as running
        deadline = time.monotonic() + 10
        while leftovers.start_ticks(server["pid"]) == server["ticks"]:
            assert time.monotonic() < deadline, "the tunnel server outlived its agent"
            time.sleep(0.05)
    finally:
        channel.close()
    assert Path(state["dir"]).is_dir(), "a SIGKILLed agent cannot remove its files"
    following = agent(tmp_path)
    try:
        hello = following.request({"op": "hello", "schemes": []})
    finally:
        following.close()
    assert hello["leftovers"] == [f"agent {state['pid']} was killed and left 0 process(es) running"]
    assert not Path(state["dir"]).exists()


def test_a_clock_that_cannot_be_fitted_is_the_runs_failure_line(tmp_path: Path) -> None:
    """No clock exchanges (the endpoints never connected): one line in run.json, no traceback,
    and no records mapped with a clock that was never measured."""
    setup = Setup(destination="host", remote_dir="/srv/pantheon", sender="local", tunnel_server="remote",
                  local_addr="", remote_addr="192.0.2.1", local_desc="", remote_desc="")
    outcome = Outcome()
    keys = campaign._merge(tmp_path, plan.uniform("cubic", 1, 0, 5), 0.0, outcome, Remote(None, setup, {}))  # type: ignore[arg-type]
    assert keys == {} and not (tmp_path / "records.parquet").exists()
    assert outcome.failures == ["clock: only 0 usable clock exchanges of 0 (at least 4 are needed): "
                                "the tunnel endpoints did not stay connected long enough to time each other"]
