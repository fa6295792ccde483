"""Private network namespaces for a run: created with a unique name, loopback up, and removed
when the run ends, whatever happens. Everything Pantheon runs lives in namespaces it made."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from pantheon.errors import PantheonError


class NeedsRoot(PantheonError):
    """The task creates network namespaces and this process is not root (the `pantheon` command
    makes it root of a user namespace first: userns)."""


def require_root(task: str) -> None:
    if os.geteuid() != 0:
        raise NeedsRoot(f"{task} creates network namespaces and needs root: run it as the pantheon command, "
                        f"which without root enters a user namespace of its own, or with sudo")


@contextmanager
def private_netns(name: str) -> Iterator[str]:
    """A fresh namespace called `name`, loopback up, deleted on exit."""
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def in_netns(name: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", name, *argv]
