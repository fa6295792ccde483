"""`pantheon emulate`'s contract with its user: bad input is one line naming the flag or file (and
line), exit status 2, and nothing is left behind; the command's exit status is passed through."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO, in_ns, links_in

PANTHEON = REPO / ".venv" / "bin" / "pantheon"


def emulate(netns: str, emu: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(in_ns(netns, [str(emu), *args]), capture_output=True, text=True, timeout=30)


def trace(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--uplink-rate", "0"], "--uplink-rate: rate must be positive"),
        (["--downlink-rate", "-5"], "--downlink-rate: rate must be positive"),
        (["--uplink-poisson", "abc"], "--uplink-poisson: expected a rate in Mbit/s"),
        (["--uplink-loss", "1.5"], "--uplink-loss: loss probability must be in [0, 1]"),
        (["--downlink-loss", "-0.2"], "--downlink-loss: loss probability must be in [0, 1]"),
        (["--delay", "-1"], "--delay: delay must not be negative"),
        (["--uplink-queue", "droptail"], "droptail needs a limit"),
        (["--uplink-trace", "/nonexistent/x.trace"], "--uplink-trace /nonexistent/x.trace: cannot read the trace"),
        (["--uplink-log", "/nonexistent/dir/up.log"], "--uplink-log /nonexistent/dir/up.log: cannot create the log"),
        (["--no-such-flag"], "unexpected argument '--no-such-flag'"),
    ],
)
def test_bad_options_fail_in_one_line(netns: str, emu: Path, args: list[str], expected: str) -> None:
    done = emulate(netns, emu, *args, "--", "true")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("pantheon emulate: ")
    assert expected in done.stderr
    assert links_in(netns) == ["lo"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "it is empty"),
        ("1\n2\nfast\n", "line 3: \"fast\" is not a whole number"),
        ("1\n5\n3\n", "line 3: timestamp 3 ms is earlier than the line before (5 ms)"),
        ("0\n", "cannot repeat"),
    ],
)
def test_bad_traces_name_file_and_line(netns: str, emu: Path, tmp_path: Path, text: str, expected: str) -> None:
    path = trace(tmp_path, "bad.trace", text)
    done = emulate(netns, emu, "--downlink-trace", path, "--", "true")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"--downlink-trace {path}: " in done.stderr
    assert expected in done.stderr
    assert links_in(netns) == ["lo"]


def test_command_not_found(netns: str, emu: Path) -> None:
    done = emulate(netns, emu, "--", "no-such-program-anywhere")
    assert (done.returncode, done.stderr) == (2, "pantheon emulate: command not found: no-such-program-anywhere (not in PATH)\n")
    assert links_in(netns) == ["lo"]


def test_exit_status_is_the_commands(netns: str, emu: Path) -> None:
    assert emulate(netns, emu, "--", "sh", "-c", "exit 7").returncode == 7
    assert emulate(netns, emu, "--", "sh", "-c", "kill -TERM $$").returncode == 128 + 15


def test_command_sees_the_peer_and_only_the_emulated_path(netns: str, emu: Path) -> None:
    done = emulate(netns, emu, "--", "sh", "-c", 'echo "$MAHIMAHI_BASE $PANTHEON_PEER"; ip -o -4 route; ip -o link')
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    peer, same = lines[0].split()
    assert peer == same and peer.startswith("100.64.") and peer.endswith(".1")
    assert any(line.startswith("default dev pemu0") for line in lines)
    links = [line.split(":")[1].strip() for line in lines if ": " in line and "link/" in line]
    assert sorted(links) == ["lo", "pemu0"]


def test_emulators_side_by_side_get_distinct_addresses(netns: str, emu: Path) -> None:
    outer = emulate(
        netns, emu, "--", "sh", "-c", "echo $MAHIMAHI_BASE"
    ).stdout.strip()
    nested = subprocess.run(
        in_ns(netns, [str(emu), "--", "sh", "-c", f"{emu} -- sh -c 'echo $MAHIMAHI_BASE'"]),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert nested.returncode == 0, nested.stderr
    assert nested.stdout.strip() not in ("", outer)


def test_python_entry_point_passes_through(netns: str) -> None:
    done = subprocess.run(
        in_ns(netns, [str(PANTHEON), "emulate", "--uplink-loss", "2", "--", "true"]), capture_output=True, text=True
    )
    assert done.returncode == 2 and "--uplink-loss" in done.stderr
    assert subprocess.run([str(PANTHEON), "emulate", "--help"], capture_output=True).returncode == 0


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A directory any user can reach (pytest's tmp_path sits under a 0700 directory)."""
    path = Path(tempfile.mkdtemp(prefix="pantheon-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def public_copy(emu: Path, directory: Path) -> Path:
    """The emulator, where user nobody can run it whatever the permissions of the checkout."""
    copy = directory / "pantheon-emu"
    shutil.copy(emu, copy)
    copy.chmod(0o755)
    return copy


def test_without_root_it_says_what_is_missing(emu: Path, netns: str, public_dir: Path) -> None:
    tun_mode = os.stat("/dev/net/tun").st_mode & 0o777
    if tun_mode & 0o006 == 0o006:
        pytest.skip("/dev/net/tun is open to everyone here, so nothing is missing")
    emu = public_copy(emu, public_dir)
    done = subprocess.run(in_ns(netns, [*NOBODY, str(emu), "--", "true"]), capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "/dev/net/tun" in done.stderr and "run as root" in done.stderr


def test_without_root_through_a_user_namespace(emu: Path, netns: str, public_dir: Path) -> None:
    emu = public_copy(emu, public_dir)
    # Offer a world-accessible TUN node, bound over /dev/net/tun in a private mount namespace only.
    node = public_dir / "tun"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(10, 200))
    node.chmod(0o666)
    script = f"mount --bind {node} /dev/net/tun && exec {' '.join(NOBODY)} {emu} --delay 1 -- sh -c 'echo $MAHIMAHI_BASE'"
    done = subprocess.run(in_ns(netns, ["unshare", "-m", "sh", "-c", script]), capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("100.64.")
