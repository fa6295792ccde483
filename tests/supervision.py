"""Checks that a supervised command leaves nothing behind (shared by the emulator's and the
tunnel's clean-up tests and tests/test_orphans.py). The command itself, which records its pid, its
network and PID namespaces, a background child and a setsid daemon, is bench/support.py's `start`
(bench/fault_matrix.py's faults run it too)."""
from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from conftest import links_in
from support.processes import alive
from support.supervised import RECORDED


def left(tmp: Path, names: tuple[str, ...] = RECORDED) -> list[int]:
    """The processes `translate` recorded that are still alive."""
    pids = [int((tmp / f"{name}.pid").read_text()) for name in names] + [int(p) for p in (tmp / "members").read_text().split()]
    return [pid for pid in pids if alive(pid)]


def command_pid(tmp: Path) -> int:
    return int((tmp / "cmd.pid").read_text())


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
