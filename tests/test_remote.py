"""Remote mode with real parts (issue 16 §5): two namespaces as hosts, a real OpenSSH server on the
remote one whose sessions run on a clock offset by libfaketime (tests/remote_hosts.py), and
`pantheon test remote` against it."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from remote_hosts import REPO, SSH_PORT, SSHD, Hosts, path_options, two_hosts

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")


@pytest.fixture(scope="module", autouse=True)
def openssh_and_faketime() -> None:
    for program in (SSHD, "/usr/bin/faketime", "/usr/bin/ssh"):
        if not Path(program).exists():
            pytest.fail(f"{program} is missing: run ./setup.sh --no-run (Debian openssh-server, faketime)")

# The shortest of three TCP handshakes with HOST:PORT, in ms.
CONNECT_MS = """
import socket, sys, time
def once():
    start = time.monotonic()
    socket.create_connection((sys.argv[1], int(sys.argv[2]))).close()
    return (time.monotonic() - start) * 1000
print(min(once() for _ in range(3)))
"""


def ssh(hosts: Hosts, command: str) -> subprocess.CompletedProcess[str]:
    return hosts.run_local(["ssh", "-F", str(hosts.ssh_config), hosts.host_alias, command],
                           capture_output=True, text=True, timeout=60)


def remote_clock_offset_s(hosts: Hosts) -> tuple[float, float]:
    """(remote clock minus ours at the middle of an ssh round trip, half that round trip)."""
    before = time.time()
    answer = ssh(hosts, "date +%s.%N")
    after = time.time()
    assert answer.returncode == 0, answer.stderr
    return float(answer.stdout) - (before + after) / 2, (after - before) / 2


def faketime_files() -> set[str]:
    return {name for name in os.listdir("/dev/shm") if "faketime" in name}


def test_two_hosts_reach_each_other_over_ssh_on_an_offset_clock_and_leave_nothing(tmp_path: Path) -> None:
    shm_before = faketime_files()
    with two_hosts(tmp_path, clock_offset_s=-7.3) as hosts:
        offset_s, error_s = remote_clock_offset_s(hosts)
        assert abs(offset_s - -7.3) <= error_s + 0.05, (offset_s, error_s)
        assert ssh(hosts, "echo $PATH").stdout.strip().split(":").count("/usr/bin") >= 1
        # A session's background child and a daemon that left its session: both die with the host.
        session = hosts.popen_local(["ssh", "-F", str(hosts.ssh_config), hosts.host_alias,
                                     "sleep 1000 & setsid sleep 1000 & echo started; wait"],
                                    stdout=subprocess.PIPE, text=True)
        assert session.stdout is not None and session.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 10
        while len(hosts.remote_processes()) < 2:
            assert time.monotonic() < deadline, "the session's processes did not appear"
            time.sleep(0.05)
        started = hosts.remote_processes() + [hosts.sshd_pid]
        assert hosts.local_processes() == [session.pid]
        namespaces = (hosts.local_ns, hosts.remote_ns)
    assert session.wait(timeout=10) != 0
    assert [pid for pid in started if Path(f"/proc/{pid}").exists()] == []
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert not any(name in listed for name in namespaces)
    assert faketime_files() == shm_before


def test_two_hosts_with_a_delay_route_through_the_emulator(tmp_path: Path) -> None:
    with two_hosts(tmp_path, delay_ms=20, clock_offset_s=3.0) as hosts:
        assert hosts.remote_addr.startswith("100.64.")
        connect = hosts.run_local([sys.executable, "-c", CONNECT_MS, hosts.remote_addr, str(SSH_PORT)],
                                  capture_output=True, text=True, check=True)
        assert 40 <= float(connect.stdout) < 60, "a TCP handshake is one round trip of the 2 x 20 ms path"
        offset_s, error_s = remote_clock_offset_s(hosts)
        assert abs(offset_s - 3.0) <= error_s + 0.05, (offset_s, error_s)


# --- `pantheon test remote` (issue 16 §1-§5) -------------------------------------------------------

PANTHEON = str(REPO / ".venv" / "bin" / "pantheon")
DELAY_MS = 20
RUNTIME_S = 8
OFFSET_S = 7.3
RATE = 1.00005
"""+50 µs/s: the top of the 5-30 µs/s drift of real clocks (Huygens, NSDI'18), with margin."""


def remote_campaign(hosts: Hosts, data: Path, *options: str, runtime_s: int = RUNTIME_S) -> list[str]:
    """`pantheon test remote` of one cubic run against the test host, as argv for the local host."""
    return [PANTHEON, "test", "remote", f"{hosts.host_alias}:{REPO}", "--ssh-config", str(hosts.ssh_config),
            "--schemes", "cubic", "--runtime", str(runtime_s), "--data-dir", str(data), "--quiet", "--no-analyze",
            *options]


def run_remote(hosts: Hosts, data: Path, *options: str) -> dict:
    """Runs a campaign that must succeed; returns its run.json."""
    done = hosts.run_local(remote_campaign(hosts, data, *options), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    run = json.loads((data / "cubic" / "run1" / "run.json").read_text())
    assert run["ok"], run
    return run


def assert_offset_within_bound(clock: dict, offset_s: float, rate: float, session_start_us: int) -> None:
    """The fitted offset at its reference time is the injected one within the fit's bound. The
    remote clock is offset_s ahead from its ssh session's start, which came after session_start_us,
    and gains (rate - 1) s per s from then on."""
    at_start_us = offset_s * 1e6
    at_ref_us = at_start_us + (rate - 1) * (clock["t_ref_us"] - session_start_us)
    low_us, high_us = min(at_start_us, at_ref_us), max(at_start_us, at_ref_us)
    assert low_us - clock["bound_us"] <= clock["offset_us"] <= high_us + clock["bound_us"], clock


def data_delays_ms(run_dir: Path) -> np.ndarray:
    """One-way delays of the data packets that arrived, ms (records.parquet: on the sender's clock)."""
    records = pq.read_table(run_dir / "records.parquet").to_pylist()
    return np.array([(r["recv_us"] - r["send_us"]) / 1000 for r in records
                     if r["direction"] == "data" and r["recv_us"] is not None])


@pytest.mark.slow
def test_clock_offset_and_one_way_delays_match_the_truth_and_local_mode(tmp_path: Path) -> None:
    """The fitted offset holds the injected one within its bound; corrected delays on a 20 ms path
    are never below 20 ms - bound, and their median is local mode's on the same path."""
    local = tmp_path / "local"
    done = subprocess.run([PANTHEON, "test", "local", "--schemes", "cubic", "--runtime", str(RUNTIME_S),
                           *path_options(DELAY_MS), "--data-dir", str(local), "--quiet", "--no-analyze"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    local_median_ms = float(np.median(data_delays_ms(local / "cubic" / "run1")))
    data = tmp_path / "remote"
    with two_hosts(tmp_path, delay_ms=DELAY_MS, clock_offset_s=OFFSET_S, clock_rate=RATE) as hosts:
        session_start_us = time.time_ns() // 1000
        run = run_remote(hosts, data, "--sender", "remote", "--tunnel-server", "remote")
    clock, bound_us = run["clock"], run["clock"]["bound_us"]
    assert_offset_within_bound(clock, OFFSET_S, RATE, session_start_us)
    # Half the least round trip: the two one-way parts of a 2 x 20 ms path cannot be told apart.
    assert DELAY_MS * 1000 <= bound_us < DELAY_MS * 1000 + 5000, clock
    assert clock["step"] is None and run["flags"] == [], run
    delays_ms = data_delays_ms(data / "cubic" / "run1")
    assert len(delays_ms) > 500
    assert np.percentile(delays_ms, 1) >= DELAY_MS - bound_us / 1000, (np.percentile(delays_ms, 1), bound_us)
    # Within 1 ms (issue 16 §5), and 0.5 ms for a busy 2-core machine: two local runs of this
    # path agree within 0.05 ms.
    assert abs(float(np.median(delays_ms)) - local_median_ms) <= 1.5, (np.median(delays_ms), local_median_ms)
    meta = json.loads((data / "metadata.json").read_text())
    assert meta["remote"]["sender"] == "remote" and meta["remote"]["tunnel_server"] == "remote"


@pytest.mark.slow
@pytest.mark.parametrize("sender, tunnel_server", [("local", "remote"), ("remote", "local")])
def test_either_side_sends_and_either_side_serves_the_tunnel(tmp_path: Path, sender: str, tunnel_server: str) -> None:
    """Both values of --sender and of --tunnel-server, on a veth path (a round trip of tens of µs,
    so the clock bound is tight) with the remote clock 3 s behind and losing 30 µs/s. While the
    local side serves the tunnel, a stranger's datagrams to its port are dropped and counted."""
    data = tmp_path / "data"
    offset_s, rate, runtime_s = -3.0, 0.99997, 5
    with two_hosts(tmp_path, clock_offset_s=offset_s, clock_rate=rate) as hosts:
        session_start_us = time.time_ns() // 1000
        harness = hosts.popen_local(remote_campaign(hosts, data, "--sender", sender, "--tunnel-server", tunnel_server,
                                                    runtime_s=runtime_s),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        strangers = send_strangers(hosts, wait_for_udp_port(hosts)) if tunnel_server == "local" else 0
        stdout, stderr = harness.communicate(timeout=180)
        assert harness.returncode == 0, stdout + stderr
        deadline = time.monotonic() + 10
        while hosts.remote_processes():
            assert time.monotonic() < deadline, f"left on the remote host: {hosts.remote_processes()}"
            time.sleep(0.1)
    run_dir = data / "cubic" / "run1"
    run = json.loads((run_dir / "run.json").read_text())
    assert run["ok"] and run["flags"] == [], run
    clock = run["clock"]
    assert_offset_within_bound(clock, offset_s, rate, session_start_us)
    assert abs(clock["drift_us_per_s"] - (rate - 1) * 1e6) <= 4 * clock["bound_us"] / runtime_s, clock
    delays_ms = data_delays_ms(run_dir)
    assert len(delays_ms) > 500
    assert delays_ms.min() >= -clock["bound_us"] / 1000
    remote = json.loads((data / "metadata.json").read_text())["remote"]
    assert (remote["sender"], remote["tunnel_server"]) == (sender, tunnel_server)
    assert dropped_datagrams(run_dir) >= strangers


def wait_for_udp_port(hosts: Hosts) -> int:
    """The port of the local tunnel endpoint's socket (the only UDP socket of the local host)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out = hosts.run_local(["ss", "-Huan"], capture_output=True, text=True, check=True).stdout
        ports = [int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines()]
        if ports:
            return ports[0]
        time.sleep(0.05)
    raise AssertionError("the local tunnel server never listened")


def send_strangers(hosts: Hosts, port: int) -> int:
    """Datagrams to the tunnel server from an address:port that is not its client's, each of the
    size of a tunnel datagram, with a MAC that cannot be right; returns how many."""
    count = 20
    hosts_script = (f"import os, socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                    f"[s.sendto(os.urandom(200), ('{hosts.local_addr}', {port})) for _ in range({count})]")
    subprocess.run(["ip", "netns", "exec", hosts.remote_ns, sys.executable, "-c", hosts_script], check=True)
    return count


def dropped_datagrams(run_dir: Path) -> int:
    """Datagrams the run's tunnel endpoints dropped, from their exit lines (docs/tunnel.md)."""
    return sum(int(m.group(1)) for out in run_dir.glob("*.out")
               for m in re.finditer(r"^pantheon-tunnel: dropped (\d+) datagrams", out.read_text(), re.MULTILINE))


@pytest.mark.slow
@pytest.mark.parametrize("cut", ["ssh connection", "harness"])
def test_a_run_cut_short_leaves_nothing_on_either_host(tmp_path: Path, cut: str) -> None:
    """Mid-run, the ssh connection drops (its sshd processes killed, as a failed network would) or
    the local harness is SIGKILLed (its ssh client's input closes): the agent ends the far side,
    this host's launchers see the harness or its run end, and nothing is left on either host."""
    data = tmp_path / "data"
    with two_hosts(tmp_path, clock_offset_s=5.0) as hosts:
        harness = hosts.popen_local(remote_campaign(hosts, data, "--run-times", "2", runtime_s=30),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_udp_port(hosts)  # a tunnel endpoint is up: the run is under way
        time.sleep(2)
        assert hosts.remote_processes(), "the run's remote side is running"
        for pid in hosts.session_pids() if cut == "ssh connection" else [harness.pid]:
            os.kill(pid, signal.SIGKILL)
        stdout, stderr = harness.communicate(timeout=60)
        assert harness.returncode != 0, stdout
        if cut == "ssh connection":
            run = json.loads((data / "cubic" / "run1" / "run.json").read_text())
            assert "connection" in run["failures"][0], run["failures"]
            # The campaign ends there, in one line, rather than failing its next run the same way.
            assert not (data / "cubic" / "run2").exists()
            assert stderr.strip().splitlines()[-1].endswith(f"the campaign cannot go on: finished runs are in {data}"), stderr
        deadline = time.monotonic() + 20
        while hosts.remote_processes() or hosts.local_processes():
            assert time.monotonic() < deadline, (hosts.remote_processes(), hosts.local_processes())
            time.sleep(0.1)
        assert remote_files(hosts) == []


def remote_files(hosts: Hosts) -> list[Path]:
    """What the remote host's sessions left in their temporary directory and state directory."""
    return [*hosts.remote_tmp.iterdir(), *(hosts.remote_home / ".local" / "state").rglob("*.json")]
