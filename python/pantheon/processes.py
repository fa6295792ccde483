"""Processes, by id (Pantheon never finds or kills a process by name)."""
from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether a process with this id exists (a zombie counts until it is reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def shown_in_proc(pid: int) -> bool:
    """Whether /proc shows a process with this id (a zombie counts). Unlike `alive`, this works for
    a command of pantheon-emu or pantheon-tunnel, which runs in a PID namespace of its own where
    kill(2) cannot name a process outside, but whose /proc is still its caller's (docs/emulator.md)."""
    return os.path.exists(f"/proc/{pid}")
