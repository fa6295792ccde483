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
