"""Checks that a supervised command leaves nothing behind (shared by the emulator's and the
tunnel's clean-up tests and tests/test_orphans.py). The command records its pid, its network and
PID namespaces, a background child and a setsid daemon (which leaves the command's process group),
then runs `tail`."""
from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from conftest import in_ns, links_in
from pantheon.processes import pid_outside

# Each process records its pid as the command's PID namespace numbers it (crates/sys/src/child.rs:
# $$ and /proc agree there; the first field of /proc/self/stat is the pid of the process reading,
# where $$ in `sh -c` would be its parent's), and `start` turns them into pids as the test's /proc
# numbers them (the NSpid line of /proc/PID/status) while they are alive.
SCRIPT = """
readlink /proc/self/ns/pid > {d}/pidns
echo $$ > {d}/cmd.inner
readlink /proc/self/ns/net > {d}/netns
sh -c 'read -r pid rest < /proc/self/stat; echo $pid > {d}/child.inner; exec sleep 1000' &
setsid sh -c 'read -r pid rest < /proc/self/stat; echo $pid > {d}/daemon.inner; exec sleep 1000' &
while [ ! -s {d}/child.inner ] || [ ! -s {d}/daemon.inner ]; do sleep 0.01; done
: > {d}/recorded
while [ ! -e {d}/translated ]; do sleep 0.01; done
: > {d}/going
{tail}
"""
RECORDED = ("cmd", "child", "daemon")


def start(netns: str, supervisor: list[str], tmp: Path, tail: str = "wait") -> subprocess.Popen[bytes]:
    """Runs `supervisor -- sh -c SCRIPT` in `netns`, waits until the script has recorded all, writes
    each recorded process's pid as this test sees it to NAME.pid, and lets the script go on to `tail`."""
    proc = subprocess.Popen(in_ns(netns, [*supervisor, "--", "sh", "-c", SCRIPT.format(d=tmp, tail=tail)]),
                            stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not (tmp / "recorded").exists():
        assert time.monotonic() < deadline, "command did not start"
        assert proc.poll() is None, "the supervisor exited early"
        time.sleep(0.02)
    translate(tmp, RECORDED)
    (tmp / "translated").touch()
    while not (tmp / "going").exists():
        assert time.monotonic() < deadline, "command did not go on"
        time.sleep(0.002)
    return proc


def translate(tmp: Path, names: tuple[str, ...]) -> None:
    """Writes NAME.pid, the pid as this test sees it of each live process that recorded its pid in
    its PID namespace (`tmp/pidns`) as NAME.inner, and `members`, every process then in that PID
    namespace or in the network namespace `tmp/netns`. The namespaces are judged by these pids,
    not by their links later: a namespace's inode number is reused once it is gone, and another
    test's new namespace may get it."""
    pidns, netns = ((tmp / ns).read_text().strip() for ns in ("pidns", "netns"))
    for name in names:
        (tmp / f"{name}.pid").write_text(f"{pid_outside(pidns, int((tmp / f'{name}.inner').read_text()))}\n")
    # A supervisor without a PID namespace of its own for the command would make this every process.
    in_pidns = processes_in(pidns, "pid") if pidns != os.readlink("/proc/self/ns/pid") else []
    (tmp / "members").write_text(" ".join(map(str, sorted(set(in_pidns + processes_in(netns))))))


def left(tmp: Path, names: tuple[str, ...] = RECORDED) -> list[int]:
    """The processes `translate` recorded that are still alive."""
    pids = [int((tmp / f"{name}.pid").read_text()) for name in names] + [int(p) for p in (tmp / "members").read_text().split()]
    return [pid for pid in pids if alive(pid)]


def command_pid(tmp: Path) -> int:
    return int((tmp / "cmd.pid").read_text())


def alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def processes_in(ns_link: str, kind: str = "net") -> list[int]:
    """The processes whose namespace of this kind (net, pid) is `ns_link` (as /proc/PID/ns/KIND reads)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/{kind}") == ns_link:
                    found.append(int(entry))
            except OSError:
                pass
    return found


def assert_all_gone(netns: str, tmp: Path) -> None:
    assert left(tmp) == [], "survived"
    assert links_in(netns) == ["lo"]


@contextlib.contextmanager
def without_root(binary: Path, mode: int) -> Iterator[tuple[Path, Path, Path]]:
    """(directory, copy, node): a fresh directory with `mode` holding a copy of `binary` every user
    can run and a TUN node every user can open, for a test to bind over /dev/net/tun in a private
    mount namespace only; removed afterwards."""
    public = Path(tempfile.mkdtemp(prefix="pantheon-test-"))
    try:
        public.chmod(mode)
        copy = public / binary.name
        shutil.copy(binary, copy)
        copy.chmod(0o755)
        node = public / "tun"
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(10, 200))
        node.chmod(0o666)
        yield public, copy, node
    finally:
        shutil.rmtree(public)


def finish(proc: subprocess.Popen[bytes]) -> int:
    try:
        return proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
