"""Pantheon without root: `pantheon test local`, `schemes check`, `sim` and `analyze` run by an
ordinary user (uid 65534, nobody), the harness inside a user namespace of its own (userns.py).

The user needs what docs/harness.md ("Without root") says: unprivileged user namespaces, and a
/dev/net/tun they may open. The machine's own /dev/net/tun is left as it is: each command runs in
a private mount namespace of the test's, where a node of the same device with the mode under test
covers it (0666, most distributions' default; 0600 for the refusal). What a researcher checks:
- a two-scheme campaign (Copa over pantheon-udp, and the kernel's Cubic, which the harness's user
  namespace may pick per socket) runs, every file of the data dir belongs to the user, and the
  analysis of it is there;
- nothing is left: no process of the user, no namespace in /run/netns, no device on the host;
- `schemes check`, `sim` and `analyze` work the same for that user;
- without a usable /dev/net/tun, one line says what to ask for, and nothing runs.
Skipped, saying why, where the test cannot become another user (not root) or that user cannot run
this checkout's interpreter (a venv made from an interpreter in a private home: ./setup.sh makes
it from /usr/bin/python3).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
USER_ID = 65534
"""nobody: a user with no rights of its own on any file of the test's."""
PATH = ["--delay", "10", "--uplink-rate", "12", "--downlink-rate", "12"]
TUN = Path("/dev/net/tun")

COVER_TUN = ('mount -t tmpfs -o mode=0755 pantheon-test /dev/net && mknod -m "$1" /dev/net/tun c "$2" "$3" '
             '&& uid=$4 && shift 4 && exec setpriv --reuid="$uid" --regid="$uid" --clear-groups -- env "$@"')
"""As root in the test's private mount namespace: a /dev/net/tun of mode $1 (device $2, $3) over the
machine's, then the command as user $4. (setpriv's own exec still holds root's capabilities, the
kernel drops them on it: env, reachable by anyone, execs the command as the user alone.)"""


def as_user(argv: list[str], cwd: Path, tun_mode: int = 0o666, timeout_s: float = 120) -> subprocess.CompletedProcess:
    """`python -m pantheon.cli ARGV` as USER_ID in `cwd`, with a /dev/net/tun of `tun_mode`."""
    device = TUN.stat().st_rdev
    env = {**os.environ, "PYTHONPATH": str(REPO / "python"), "HOME": str(cwd)}
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", COVER_TUN, "cover-tun", f"{tun_mode:o}",
                           str(os.major(device)), str(os.minor(device)), str(USER_ID),
                           sys.executable, "-m", "pantheon.cli", *argv],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)


def user_processes() -> set[int]:
    done = subprocess.run(["ps", "-u", str(USER_ID), "-o", "pid="], capture_output=True, text=True)
    return {int(p) for p in done.stdout.split()}


def host_state() -> tuple[set[int], list[str], list[str], list[str]]:
    """What a run could leave: the user's processes, namespaces, the host's devices, session keys."""
    netns = sorted(n for n in (os.listdir("/run/netns") if os.path.isdir("/run/netns") else [])
                   if n.startswith(("pantheon-run-", "pantheon-check-")))  # the names the harness gives
    return (user_processes(), netns, sorted(os.listdir("/sys/class/net")),
            sorted(p.name for p in Path(tempfile.gettempdir()).glob("pantheon-keys-*")))


@pytest.fixture(scope="module")
def home() -> Iterator[Path]:
    """A directory of the user's, where their data dirs go; skips the module where it cannot run."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run commands as another user (uid 65534)")
    if not TUN.exists() or shutil.which("setpriv") is None:
        pytest.skip("needs /dev/net/tun and setpriv (util-linux)")
    directory = Path(tempfile.mkdtemp(prefix="pantheon-nonroot-"))
    os.chown(directory, USER_ID, USER_ID)
    try:
        reach = as_user(["--help"], directory)
        if reach.returncode != 0:
            pytest.skip(f"uid {USER_ID} cannot run {sys.executable} with {REPO / 'python'} "
                        f"({(reach.stderr.strip().splitlines() or ['?'])[-1]}): make the venv with ./setup.sh, "
                        "from /usr/bin/python3, in a checkout every user can reach")
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.slow
def test_a_campaign_runs_as_an_ordinary_user_and_leaves_nothing(home: Path) -> None:
    before = host_state()
    done = as_user(["test", "local", "--schemes", "copa,cubic", "--runtime", "3", "--data-dir", "campaign", *PATH], home)
    assert done.returncode == 0, done.stderr
    assert "2 of 2 runs ok, 2 of 2 runs valid" in done.stderr + done.stdout
    data = home / "campaign"
    for name in ("copa", "cubic"):
        run = json.loads((data / name / "run1" / "run.json").read_text())
        assert run["failures"] == [], run
    perf = json.loads((data / "perf.json").read_text())["schemes"]
    for name in ("copa", "cubic"):
        # Both fill most of the 12 Mbit/s link (11.4 and 11.6 Mbit/s measured); half is a failure.
        assert perf[name]["summary"]["valid_runs"] == 1
        assert perf[name]["summary"]["all"]["throughput_mbps"]["mean"] > 6, perf[name]["summary"]
    assert (data / "report.html").exists()
    strangers = [str(p) for p in [data, *data.rglob("*")] if p.lstat().st_uid != USER_ID]
    assert strangers == [], strangers
    after = host_state()
    assert after[0] <= before[0], f"processes left: {after[0] - before[0]}"
    assert after[1:] == before[1:]


@pytest.mark.slow
def test_schemes_check_sim_and_analyze_as_an_ordinary_user(home: Path) -> None:
    check = as_user(["schemes", "check", "copa", "--data-dir", "check"], home)
    assert check.returncode == 0, check.stderr
    assert check.stdout.splitlines()[1].split()[:2] == ["copa", "pass"], check.stdout
    sim = as_user(["sim", "--schemes", "copa", "--runtime", "2", "--data-dir", "sim", "--no-analyze", *PATH], home)
    assert sim.returncode == 0, sim.stderr
    analysis = as_user(["analyze", "sim", "--out", "analysis"], home)
    assert analysis.returncode == 0, analysis.stderr
    assert (home / "analysis" / "perf.json").stat().st_uid == USER_ID


def test_without_a_usable_tun_device_one_line_says_what_to_ask_for(home: Path) -> None:
    done = as_user(["test", "local", "--schemes", "copa", "--runtime", "1", "--data-dir", "refused", *PATH], home,
                   tun_mode=0o600)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "pantheon: pantheon test local needs root, or a user namespace of your own: /dev/net/tun is not readable and "
        "writable by you (0600); ask an administrator for mode 0666 (the TUN devices a run makes are then its own, "
        "in namespaces only it can reach)"], done.stderr
    assert not (home / "refused").exists()
