"""Remote mode with real parts (issue 16 §5): two namespaces as hosts, a real OpenSSH server on the
remote one whose sessions run on a clock offset by libfaketime (tests/remote_hosts.py), and
`pantheon test remote` against it."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from remote_hosts import SSH_PORT, SSHD, Hosts, two_hosts

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
