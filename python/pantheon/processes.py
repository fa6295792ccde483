"""Processes, by id (Pantheon never finds or kills a process by name), and the lifeline by which a
process that the harness started learns that the harness is gone.

The harness's launchers and agent run as commands of pantheon-emu and pantheon-tunnel, each in a
PID namespace of its own with its own /proc (crates/sys/src/child.rs): the harness has no pid
there, so neither kill(2) nor /proc/PID can ask after it. A pipe can: the harness holds its write
end and nothing is ever written, the read end is handed down (an inherited descriptor crosses PID
namespaces, pantheon-emu and pantheon-tunnel pass it on to their commands), and once every process
holding the write end has ended, however it ended, the read end reads end-of-file (pipe(7))."""
from __future__ import annotations

import contextlib
import functools
import os
import select


def alive(pid: int) -> bool:
    """Whether a process with this id exists (a zombie counts until it is reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@functools.cache
def lifeline() -> int:
    """The read end of this process's lifeline, to pass to a child (Popen's pass_fds) that must
    notice when this process is gone. The write end stays open in this process alone until it
    exits: both ends are close-on-exec, so no program it starts holds it (a child forked without
    exec would, until it exits)."""
    read_end, _write_end = os.pipe()
    return read_end


def cut(lifeline_fd: int) -> bool:
    """Whether the process at the other end of this inherited lifeline is gone: nothing is ever
    written to it, so its read end is readable only at end-of-file."""
    readable, _, _ = select.select([lifeline_fd], [], [], 0)
    return bool(readable)


def pid_outside(pid_namespace: str, pid: int) -> int:
    """This process's pid for the live process numbered `pid` in the PID namespace `pid_namespace`
    (as /proc/PID/ns/pid reads, "pid:[INODE]"), from the NSpid line of its /proc/PID/status. For a
    program outside pantheon-emu or pantheon-tunnel that must signal or enter a process of their
    command, which knows only its own pid and namespace (crates/sys/src/child.rs)."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, StopIteration):
                if os.readlink(f"{entry.path}/ns/pid") != pid_namespace:
                    continue
                with open(f"{entry.path}/status") as f:
                    nspid = next(line for line in f if line.startswith("NSpid:")).split()
                if int(nspid[-1]) == pid:
                    return int(entry.name)
    raise ProcessLookupError(f"no process {pid} in {pid_namespace}")
