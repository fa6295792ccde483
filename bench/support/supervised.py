"""A supervised command that forks (a child and a daemon), its pids as the caller sees them, for
the clean-up checks (tests/supervision.py) and the fault matrix."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from pantheon.processes import pid_outside

# Each process records its pid as the command's PID namespace numbers it (crates/sys/src/child.rs:
# $$ and /proc agree there; the first field of /proc/self/stat is the pid of the process reading,
# where $$ in `sh -c` would be its parent's), and `start` turns them into pids as the caller's /proc
# numbers them (the NSpid line of /proc/PID/status) while they are alive.
SUPERVISED_SCRIPT = """
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
    """Runs `supervisor -- sh -c SUPERVISED_SCRIPT` in `netns`: the command records its pid, its network
    and PID namespaces, a background child and a setsid daemon (which leaves the command's process
    group). Waits until the script has recorded all, writes each recorded process's pid as the caller
    sees it to NAME.pid, and lets the script go on to `tail`."""
    argv = [*supervisor, "--", "sh", "-c", SUPERVISED_SCRIPT.format(d=tmp, tail=tail)]
    proc = subprocess.Popen(["ip", "netns", "exec", netns, *argv], stdout=subprocess.DEVNULL)
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
    """Writes NAME.pid, the pid as the caller sees it of each live process that recorded its pid in
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
