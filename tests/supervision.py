"""Checks that a supervised command leaves nothing behind (shared by the emulator's and the
tunnel's clean-up tests). The command records its pid, its network namespace, a background
child and a setsid daemon (which leaves the command's process group), then runs `tail`."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from conftest import in_ns, links_in

SCRIPT = """
echo $$ > {d}/cmd.pid
readlink /proc/self/ns/net > {d}/netns
sleep 1000 & echo $! > {d}/child.pid
setsid sleep 1000 & echo $! > {d}/daemon.pid
{tail}
"""


def start(netns: str, supervisor: list[str], tmp: Path, tail: str = "wait") -> subprocess.Popen[bytes]:
    """Runs `supervisor -- sh -c SCRIPT` in `netns` and waits until the script has recorded all."""
    proc = subprocess.Popen(in_ns(netns, [*supervisor, "--", "sh", "-c", SCRIPT.format(d=tmp, tail=tail)]),
                            stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not (tmp / "daemon.pid").exists() or not (tmp / "daemon.pid").read_text().strip():
        assert time.monotonic() < deadline, "command did not start"
        assert proc.poll() is None, "the supervisor exited early"
        time.sleep(0.02)
    return proc


def command_pid(tmp: Path) -> int:
    return int((tmp / "cmd.pid").read_text())


def alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie."""
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
