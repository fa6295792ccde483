"""What a harness or a remote agent that was killed left behind, found and ended by process id.

Namespaces the harness names and removes. Each run's namespace is `pantheon-run-PID-N`, and the
scratch namespace in which the emulator first judges the path's options `pantheon-check-PID`, PID
being the harness process's id, so a harness can tell its own leftovers from anyone else's: one
whose PID no longer runs was left by a harness that was killed (even by SIGKILL), and the next
invocation removes it, after ending the processes inside it (found by namespace inode, never by
name). Namespaces of live harnesses, and any other namespace, are never touched. The remote agent
(remote_agent.py) keeps a state file of the processes it started, so the next agent ends what a
killed one left."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from pantheon.processes import alive

PREFIX = "pantheon-run-"
CHECK_PREFIX = "pantheon-check-"
OWNED = re.compile(rf"^(?:{PREFIX}(?P<pid>\d+)-\d+|{CHECK_PREFIX}(?P<check_pid>\d+))$")
NETNS_DIR = Path("/run/netns")


def run_namespace(harness_pid: int, index: int) -> str:
    return f"{PREFIX}{harness_pid}-{index}"


def check_namespace(harness_pid: int) -> str:
    return f"{CHECK_PREFIX}{harness_pid}"


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
    """Run and check namespaces whose harness is gone."""
    names = os.listdir(NETNS_DIR) if NETNS_DIR.is_dir() else []
    return sorted(n for n in names if (m := OWNED.match(n)) and not alive(int(m["pid"] or m["check_pid"])))


def clean() -> list[str]:
    """Removes orphaned run namespaces (returns their names) and the session keys of harnesses
    that were killed."""
    removed = orphaned()
    for name in removed:
        remove_namespace(name)
    for keys in Path(tempfile.gettempdir()).glob(f"{KEYS_PREFIX}*"):
        if (m := OWNED_KEYS.match(keys.name)) and not alive(int(m["pid"])):
            shutil.rmtree(keys, ignore_errors=True)
    return removed


KEYS_PREFIX = "pantheon-keys-"
OWNED_KEYS = re.compile(rf"^{KEYS_PREFIX}(?P<pid>\d+)-")


def keys_directory() -> Path:
    """A new private directory (0700) for a run's session keys, named after this process so that
    the next harness removes it if this one is killed before it does."""
    return Path(tempfile.mkdtemp(prefix=f"{KEYS_PREFIX}{os.getpid()}-"))


# --- remote agents ---------------------------------------------------------------------------------

AGENTS_DIR = Path.home() / ".local" / "state" / "pantheon" / "agents"
"""Where each remote agent (remote_agent.py) keeps its state file, PIDNS/AGENT_PID.json: its own id
and start time, its private directory, and every process it started (id, start time). An agent
removes its file when it ends; a file whose agent is gone was left by one that was killed. PIDNS
is the agent's PID namespace (its inode): process ids mean something only within one, and a host
reached through a container, or the tests' sshd in a PID namespace of its own, shares the home
directory with agents whose ids are not ours."""


def _agents_dir() -> Path:
    return AGENTS_DIR / f"pidns-{os.stat('/proc/self/ns/pid').st_ino}"


def start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22): with the id,
    it names one process, so a reused id is never mistaken for it. None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])


class AgentState:
    """This agent's state file, rewritten (atomically) each time it starts a process."""

    def __init__(self, private_dir: Path) -> None:
        _agents_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = _agents_dir() / f"{os.getpid()}.json"
        self.private_dir = private_dir
        self.processes: list[dict[str, int | None]] = []
        """Every process the agent started: {"pid", "ticks"} (start_ticks)."""
        self._write()

    def started(self, pid: int) -> None:
        self.processes.append({"pid": pid, "ticks": start_ticks(pid)})
        self._write()

    def _write(self) -> None:
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps({"pid": os.getpid(), "ticks": start_ticks(os.getpid()), "dir": str(self.private_dir),
                                       "processes": self.processes}))
        partial.replace(self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.path.parent.rmdir()  # the PID namespace's directory, once no agent of it is left


def _same_process(entry: dict) -> bool:
    return entry["ticks"] is not None and start_ticks(entry["pid"]) == entry["ticks"]


def clean_agents() -> list[str]:
    """Ends what agents that were killed left (each process's group: SIGTERM, then SIGKILL) and
    removes their private directories; one line per such agent."""
    lines = []
    for path in sorted(_agents_dir().glob("*.json")):
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        if _same_process(state):
            continue  # a live agent (another campaign): not ours to touch
        left = [p for p in state["processes"] if _same_process(p)]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for entry in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(entry["pid"], sig)
            deadline = time.monotonic() + 2.0
            while any(_same_process(p) for p in left) and time.monotonic() < deadline:
                time.sleep(0.02)
        shutil.rmtree(state["dir"], ignore_errors=True)
        path.unlink(missing_ok=True)
        lines.append(f"agent {state['pid']} was killed and left {len(left)} process(es) running"
                     + (f" ({', '.join(str(p['pid']) for p in left)}): ended" if left else ""))
    return lines
