"""Whatever ends a run — the command exiting, being SIGKILLed, or the emulator getting SIGINT or
SIGTERM — every process the command started (even one that left its process group with setsid),
its network namespace and both TUN devices are gone afterwards."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import in_ns, links_in

# The command records its pid, its namespace, a background child and a setsid daemon, then waits.
SCRIPT = """
echo $$ > {d}/cmd.pid
readlink /proc/self/ns/net > {d}/netns
sleep 1000 & echo $! > {d}/child.pid
setsid sleep 1000 & echo $! > {d}/daemon.pid
{tail}
"""


def start(netns: str, emu: Path, tmp: Path, tail: str = "wait") -> subprocess.Popen[bytes]:
    script = SCRIPT.format(d=tmp, tail=tail)
    proc = subprocess.Popen(in_ns(netns, [str(emu), "--", "sh", "-c", script]))
    deadline = time.monotonic() + 10
    while not (tmp / "daemon.pid").exists() or not (tmp / "daemon.pid").read_text().strip():
        assert time.monotonic() < deadline, "command did not start"
        assert proc.poll() is None, "emulator exited early"
        time.sleep(0.02)
    return proc


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def processes_in(netns_link: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/net") == netns_link:
                    found.append(int(entry))
            except OSError:
                pass
    return found


def assert_all_gone(netns: str, tmp: Path) -> None:
    for name in ("cmd.pid", "child.pid", "daemon.pid"):
        pid = int((tmp / name).read_text())
        assert not alive(pid), f"{name} {pid} survived"
    assert processes_in((tmp / "netns").read_text().strip()) == []
    assert links_in(netns) == ["lo"]


def finish(proc: subprocess.Popen[bytes]) -> int:
    try:
        return proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_command_exit_cleans_up_leftovers(netns: str, emu: Path, tmp_path: Path) -> None:
    proc = start(netns, emu, tmp_path, tail="exit 3")
    assert finish(proc) == 3
    assert_all_gone(netns, tmp_path)


def test_sigkill_of_the_command(netns: str, emu: Path, tmp_path: Path) -> None:
    proc = start(netns, emu, tmp_path)
    os.kill(int((tmp_path / "cmd.pid").read_text()), signal.SIGKILL)
    assert finish(proc) == 128 + signal.SIGKILL
    assert_all_gone(netns, tmp_path)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_the_emulator(netns: str, emu: Path, tmp_path: Path, sig: signal.Signals) -> None:
    proc = start(netns, emu, tmp_path)
    proc.send_signal(sig)
    assert finish(proc) == 128 + sig
    assert_all_gone(netns, tmp_path)


def test_command_that_ignores_signals_is_killed(netns: str, emu: Path, tmp_path: Path) -> None:
    proc = start(netns, emu, tmp_path, tail="trap '' INT TERM; while :; do sleep 0.1; done")
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert finish(proc) == 128 + signal.SIGKILL
    assert time.monotonic() - started < 6
    assert_all_gone(netns, tmp_path)
