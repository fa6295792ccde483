"""Running the harness without root: a user who is not root becomes root of a user namespace of
their own (user_namespaces(7)), where the harness does exactly what it does as root.

Creating network namespaces, veths and TUN devices needs CAP_NET_ADMIN over the network namespace
they are made in. An unprivileged user namespace gives its creator every capability over the
namespaces it owns, and none over the machine's: so the command re-executes itself inside a new
user namespace (this user mapped to root, nobody else mapped), with a new network namespace (lo
up, nothing else: a local run needs no outside network) and a new mount namespace in which a
private tmpfs covers /run/netns, so that `ip netns add` has a directory of its own to write. Everything the run
creates is owned by these namespaces and goes with them: when the command ends, the kernel
deletes its run namespaces, their devices and the private /run, whatever ended it. Files the run
writes belong to the user (root inside maps to them outside).

What the kernel must allow: unprivileged user namespaces (Debian 12's default:
user.max_user_namespaces > 0, and kernel.unprivileged_userns_clone = 1 where that sysctl exists),
and /dev/net/tun readable and writable by the user. The device's owner, root of the machine, is
not mapped into the namespace, so its root powers do not reach the file: its mode bits for others
decide (0666 on most distributions; some ship 0600). Each is checked first and a missing one is
one line saying what to ask for.

As root, nothing changes: no extra namespace (it would add a fork, an exec and a mount to every
command for nothing, and root's runs keep the /run/netns that `leftovers` inspects).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from pantheon.errors import PantheonError

TUN = Path("/dev/net/tun")

ENTER = ["unshare", "--user", "--map-root-user", "--net", "--mount"]
"""util-linux unshare(1): new user (this user as root), network and mount namespaces (mounts
private, so nothing mounted inside is seen outside), then exec. The process keeps its id, so a
signal sent to the command (Ctrl-C, a supervisor's SIGTERM) reaches the harness itself."""

PREPARE = ("if [ -d /run/netns ]; then mount -t tmpfs -o mode=0755 pantheon-netns /run/netns; "
           "else mount -t tmpfs -o mode=0755 pantheon-run /run && mkdir /run/netns; fi "
           '&& ip link set lo up && exec "$@"')
"""Run inside, before the harness: an empty private /run/netns (where the machine has no
/run/netns, which its root alone could create, the tmpfs covers all of /run), and loopback up;
exec keeps the process id."""


class NoUserNamespace(PantheonError):
    """Not root, and this machine does not let the user run the harness in a namespace of their own."""


def unavailable_reason() -> str | None:
    """Why this user cannot run the harness in a user namespace of their own, or None."""
    if shutil.which("unshare") is None:
        return "unshare(1) is missing (Debian package util-linux)"
    if not os.access(TUN, os.R_OK | os.W_OK):
        mode = f"{TUN.stat().st_mode & 0o777:04o}" if TUN.exists() else "missing"
        return (f"{TUN} is not readable and writable by you ({mode}); ask an administrator for mode 0666 "
                f"(the TUN devices a run makes are then its own, in namespaces only it can reach)")
    probe = subprocess.run([*ENTER, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        said = probe.stderr.strip().splitlines()[-1:] or [f"status {probe.returncode}"]
        return (f"the kernel refused an unprivileged user namespace ({said[0]}); ask an administrator to allow them "
                f"(sysctl user.max_user_namespaces > 0, and kernel.unprivileged_userns_clone = 1 where it exists)")
    return None


def become_root(task: str, argv: list[str]) -> None:
    """Returns at once as root (of the machine or of the namespace made here); otherwise replaces
    this process by `pantheon ARGV` inside a user + network + mount namespace where this user is
    root. Raises NoUserNamespace, saying what is missing, where that cannot be done."""
    if os.geteuid() == 0:
        return
    if why := unavailable_reason():
        raise NoUserNamespace(f"{task} needs root, or a user namespace of your own: {why}")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp(ENTER[0], [*ENTER, "--", "sh", "-c", PREPARE, "pantheon", sys.executable, "-m", "pantheon.cli", *argv])
