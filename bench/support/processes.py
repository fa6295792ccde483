"""The processes a benchmark starts: run and checked, their stderr's tail, stopped with their
descendants (by pid, never by name), and SIGTERM ended like Ctrl-C."""
from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

from support import POLL_S


class BenchError(Exception):
    """A run failed; the message says what happened."""


def raise_keyboard_interrupt(signum, frame):
    """A SIGTERM handler: end like Ctrl-C, so that the same clean-up runs."""
    raise KeyboardInterrupt


def run_checked(argv: list[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise BenchError(f"{shlex.join(argv)} failed: {result.stderr.strip()}")
    return result.stdout


def tail(path: Path, lines: int = 5) -> str:
    text = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return " | ".join(text[-lines:]) or "no stderr"


def stop(process: subprocess.Popen | None, grace_s: float = 5.0) -> None:
    """End a process this script started, and its descendants: SIGTERM, then SIGKILL after grace_s.

    Descendants are found by pid rather than by process group, because su puts Mahimahi's shells in a
    session of their own.
    """
    if process is None or process.poll() is not None:
        return
    tree = process_tree(process.pid)
    send_signal(tree, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and (process.poll() is None or any(alive(pid) for pid in tree[1:])):
        time.sleep(POLL_S)
    send_signal([pid for pid in tree if alive(pid)], signal.SIGKILL)
    process.wait()


def process_tree(root_pid: int) -> list[int]:
    """root_pid and its descendants, from the parent pid field of /proc/<pid>/stat."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent_pid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent_pid, []).append(int(stat.parent.name))
    tree, pending = [], [root_pid]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending += children.get(pid, [])
    return tree


def alive(pid: int) -> bool:
    """True while pid exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def send_signal(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
