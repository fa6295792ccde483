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
import time
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


def user_command(argv: list[str], cwd: Path, tun_mode: int = 0o666) -> dict:
    """Popen's arguments for `python -m pantheon.cli ARGV` as USER_ID in `cwd`, with a
    /dev/net/tun of `tun_mode`. Every program on the way execs the next, so the process started is
    the harness itself."""
    device = TUN.stat().st_rdev
    return {"args": ["unshare", "--mount", "--propagation", "private", "sh", "-c", COVER_TUN, "cover-tun", f"{tun_mode:o}",
                     str(os.major(device)), str(os.minor(device)), str(USER_ID), sys.executable, "-m", "pantheon.cli", *argv],
            "cwd": cwd, "env": {**os.environ, "PYTHONPATH": str(REPO / "python"), "HOME": str(cwd)}, "text": True}


def as_user(argv: list[str], cwd: Path, tun_mode: int = 0o666) -> subprocess.CompletedProcess:
    return subprocess.run(**user_command(argv, cwd, tun_mode), capture_output=True, timeout=120)


def user_processes() -> set[int]:
    done = subprocess.run(["ps", "-u", str(USER_ID), "-o", "pid="], capture_output=True, text=True)
    return {int(p) for p in done.stdout.split()}


def host_state() -> tuple[set[int], set[str], set[str], set[str]]:
    """What a run could leave: the user's processes, namespaces, the host's devices, session keys.
    (Other tests may end theirs meanwhile: a run leaves nothing when nothing is new.)"""
    netns = {n for n in (os.listdir("/run/netns") if os.path.isdir("/run/netns") else [])
             if n.startswith(("pantheon-run-", "pantheon-check-"))}  # the names the harness gives
    return (user_processes(), netns, set(os.listdir("/sys/class/net")),
            {p.name for p in Path(tempfile.gettempdir()).glob("pantheon-keys-*")})


def left(before: tuple[set, ...], after: tuple[set, ...]) -> list[set]:
    return [now - then for then, now in zip(before, after, strict=True)]


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
    assert left(before, host_state()) == [set(), set(), set(), set()]


def test_a_harness_killed_mid_run_leaves_nothing(home: Path) -> None:
    """SIGKILL gives the harness no chance to clean up: its namespaces go with their last process,
    and every process ends because the harness is gone (docs/harness.md, "Failures and clean-up")."""
    before = host_state()
    harness = subprocess.Popen(**user_command(["test", "local", "--schemes", "copa", "--runtime", "30",
                                               "--data-dir", "killed", *PATH], home), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    started = home / "killed" / "copa" / "run1" / "flow0.tunnel-client.out"
    deadline = time.monotonic() + 30
    while not started.exists() and harness.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert started.exists() and harness.poll() is None, "the run did not start"
    time.sleep(1)
    harness.kill()
    harness.wait()
    deadline = time.monotonic() + 10
    while any(left(before, host_state())[:3]) and time.monotonic() < deadline:
        time.sleep(0.2)
    processes, netns, devices, keys = left(before, host_state())
    assert (processes, netns, devices) == (set(), set(), set())
    # Its session keys stay until the next harness removes them (leftovers.clean), as after root's.
    assert {k.split("-")[2] for k in keys} <= {str(harness.pid)}, keys
    for name in keys:
        shutil.rmtree(Path(tempfile.gettempdir()) / name)


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
