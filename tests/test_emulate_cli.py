"""`pantheon emulate`'s contract with its user: bad input is one line naming the flag or file (and
line), exit status 2, and nothing is left behind; the command's exit status is passed through."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO, links_in
from support.emulator import in_ns

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
        # Issue 18: accepted before, and the delay's sum wrapped (packets left after ~350 us).
        (["--delay", "1e300"], "--delay: delay must be at most 3600000 ms (one hour), got '1e300'"),
        (["--delay", "1.9e16"], "--delay: delay must be at most 3600000 ms (one hour)"),
        (["--delay", "1e17"], "--delay: delay must be at most 3600000 ms (one hour)"),
        (["--uplink-rate", "1e300"], "--uplink-rate: rate must be from 0.001 to 1000000 Mbit/s"),
        (["--downlink-queue-bytes", "99999999999999"], "--downlink-queue-bytes: expected a whole number from 1 to"),
        # Issue 18: read until the OOM killer ended it at 24 GB.
        (["--uplink-trace", "/dev/zero"], "--uplink-trace /dev/zero: cannot read the trace: it is not a regular file"),
        (["--downlink-trace", "/"], "--downlink-trace /: cannot read the trace: it is a directory"),
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
        # Issue 18: timestamp x 1000 wrapped, a "mean 0.000 Mbit/s" link that delivered 30 Mbit/s.
        ("1\n18446744073709552\n", "line 2: timestamp 18446744073709552 ms is past the longest trace"),
        ("1\n" + "x" * 5000 + "\n", "line 2 is 5000 bytes long (\"" + "x" * 32 + "...\")"),
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


def test_a_huge_sparse_trace_is_refused_by_its_size(netns: str, emu: Path, tmp_path: Path) -> None:
    """Issue 18: a 2 GB sparse file took 57 s and printed a 4.29 GB error line."""
    sparse = tmp_path / "sparse.trace"
    with sparse.open("wb") as f:
        f.truncate(2 << 30)
    started = time.monotonic()
    done = emulate(netns, emu, "--uplink-trace", str(sparse), "--", "true")
    assert (done.returncode, done.stderr) == (2, f"pantheon emulate: --uplink-trace {sparse}: the trace is 2147483648 "
                                                 "bytes, more than the 134217728 bytes (128 MiB) a trace may have\n")
    assert time.monotonic() - started < 10


def test_a_fifo_trace_is_refused_without_waiting_for_a_writer(netns: str, emu: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.trace"
    os.mkfifo(fifo)
    done = emulate(netns, emu, "--uplink-trace", str(fifo), "--", "true")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "it is not a regular file" in done.stderr


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
    both = subprocess.run(
        in_ns(netns, ["sh", "-c", f"{emu} -- sh -c 'echo $MAHIMAHI_BASE; sleep 1' & sleep 0.3; "
                      f"{emu} -- sh -c 'echo $MAHIMAHI_BASE'; wait"]),
        capture_output=True, text=True, timeout=30)
    assert both.returncode == 0, both.stderr
    first, second = both.stdout.split()
    assert first != second


def test_a_nested_emulator_is_the_second_link_of_a_chain(netns: str, emu: Path) -> None:
    """As Mahimahi's shells: the command behind both keeps the outer emulator's peer (Mahimahi's
    MAHIMAHI_BASE is the outermost container's), and its own end is in the outer's /24."""
    outer = emulate(netns, emu, "--", "sh", "-c", "echo $MAHIMAHI_BASE").stdout.strip()
    nested = subprocess.run(
        in_ns(netns, [str(emu), "--", "sh", "-c", f"{emu} -- sh -c 'echo $MAHIMAHI_BASE $PANTHEON_PEER; "
                      "ip -o -4 addr show dev pemu0'"]),
        capture_output=True, text=True, timeout=30)
    assert nested.returncode == 0, nested.stderr
    base, peer = nested.stdout.splitlines()[0].split()
    assert base == peer == outer
    own = nested.stdout.splitlines()[1].split()[3]
    assert own.rsplit(".", 1)[0] == outer.rsplit(".", 1)[0] and own != outer.rsplit(".", 1)[0] + ".2"


CHAIN_RECEIVER = """
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("ready", flush=True)
for _ in range(5): s.accept()[0].close()
c, _ = s.accept(); got = []
while (b := c.recv(1 << 16)):
    got.append((time.monotonic(), len(b)))
c.close()
t0 = got[0][0] + 1.0; late = [(t, n) for t, n in got if t >= t0]
print(sum(n for _, n in late[1:]) * 8 / (late[-1][0] - late[0][0]) / 1e6)
"""
CHAIN_SENDER = """
import os, socket, time
far = (os.environ["PANTHEON_PEER"], 9100)
handshakes_ms = []
for _ in range(5):  # the least of five: an idle emulator reads its first datagram late, a busy host any
    t = time.monotonic(); socket.create_connection(far).close(); handshakes_ms.append((time.monotonic() - t) * 1e3)
print(min(handshakes_ms))
s = socket.create_connection(far)
t = time.monotonic()
while time.monotonic() - t < 3: s.sendall(b"x" * 65536)
s.shutdown(socket.SHUT_WR); s.recv(1)  # the receiver has it all: the emulators may end
"""


def test_a_chain_of_two_emulators_adds_their_delays_and_runs_at_the_slower_rate(netns: str, emu: Path) -> None:
    """10 ms then 15 ms each way: a TCP handshake takes 50 ms; a bulk flow runs at the inner
    link's 12 Mbit/s, not the outer's 48 (issue 36 §3: a chain of two emulated links)."""
    receiver = subprocess.Popen(in_ns(netns, [sys.executable, "-c", CHAIN_RECEIVER, "9100"]), stdout=subprocess.PIPE,
                                text=True)
    try:
        assert receiver.stdout is not None and receiver.stdout.readline().strip() == "ready"
        sender = subprocess.run(
            in_ns(netns, [str(emu), "--delay", "10", "--uplink-rate", "48", "--downlink-rate", "48", "--",
                          str(emu), "--delay", "15", "--uplink-rate", "12", "--downlink-rate", "12", "--",
                          sys.executable, "-c", CHAIN_SENDER]),
            capture_output=True, text=True, timeout=30)
        assert sender.returncode == 0, sender.stderr
        rate_mbps = float(receiver.communicate(timeout=30)[0].strip())
    finally:
        receiver.kill()
        receiver.wait()
    handshake_ms = float(sender.stdout.strip())
    assert 50 <= handshake_ms < 56, handshake_ms
    assert 10.5 < rate_mbps < 12.1, rate_mbps


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
