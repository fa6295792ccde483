"""Namespaces the harness names and removes. Each run's namespace is `pantheon-run-PID-N`, PID
being the harness process's id, so a harness can tell its own leftovers from anyone else's: one
whose PID no longer runs was left by a harness that was killed (even by SIGKILL), and the next
invocation removes it, after ending the processes inside it (found by namespace inode, never by
name). Namespaces of live harnesses, and any other namespace, are never touched."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from pantheon.processes import alive

PREFIX = "pantheon-run-"
OWNED = re.compile(rf"^{PREFIX}(?P<pid>\d+)-\d+$")
NETNS_DIR = Path("/run/netns")


def run_namespace(harness_pid: int, index: int) -> str:
    return f"{PREFIX}{harness_pid}-{index}"


def _pids_in(name: str) -> list[int]:
    try:
        inode = (NETNS_DIR / name).stat().st_ino
    except FileNotFoundError:
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}/ns/net").st_ino == inode:
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


def remove_namespace(name: str, grace_s: float = 2.0) -> None:
    """Ends every process in the namespace (SIGTERM, then SIGKILL) and deletes it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _pids_in(name)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while _pids_in(name) and time.monotonic() < deadline:
            time.sleep(0.02)
    subprocess.run(["ip", "netns", "del", name], stderr=subprocess.DEVNULL, check=False)


def orphaned() -> list[str]:
    """Run namespaces whose harness is gone."""
    names = os.listdir(NETNS_DIR) if NETNS_DIR.is_dir() else []
    return sorted(n for n in names if (m := OWNED.match(n)) and not alive(int(m["pid"])))


def clean() -> list[str]:
    """Removes orphaned run namespaces; returns their names."""
    removed = orphaned()
    for name in removed:
        remove_namespace(name)
    return removed
