"""Stamped datagrams through the tunnel: its two endpoints as the tests and benchmarks start them,
their native logs, and the per-packet error of --delay through emulator and tunnel."""
from __future__ import annotations

import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pantheon.harness.tunnel import parse_connect_line, write_session_key
from support.emulator import TRAFFIC, TRAFFIC_PORT, in_ns

TUNNEL_TIMEOUT_S = 40
"""How long a test's tunnel endpoint or emulator may take to finish."""


def log_options(tmp: Path, stem: str) -> list[str]:
    return [option for side in ("ingress", "egress") for option in (
        f"--{side}-log", str(tmp / f"{stem}.{side}.log"), f"--{side}-text-log", str(tmp / f"{stem}.{side}.text.log"))]


def key_file(tmp: Path) -> Path:
    """The session key both endpoints of a test read (one per test directory)."""
    path = tmp / "session.key"
    return path if path.exists() else write_session_key(path)


def traffic(*args: object) -> list[str]:
    return [sys.executable, str(TRAFFIC), *map(str, args)]


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int
    key: Path
    lines: queue.Queue[str]
    exit_line: str = ""

    def next_line(self, timeout_s: float = 10) -> str:
        try:
            return self.lines.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"the tunnel server said nothing for {timeout_s} s") from None

    def finish(self) -> tuple[int, list[str], str]:
        """Ends the server's command (SIGTERM, forwarded), then its exit status, the rest of its
        command's standard output and its standard error; the tunnel's own exit line is kept in
        `exit_line`."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        status = self.proc.wait(timeout=TUNNEL_TIMEOUT_S)
        rest = []
        while True:
            try:
                line = self.lines.get(timeout=5)
            except queue.Empty:
                break
            if line == "":
                break
            if line.startswith("pantheon-tunnel: dropped"):
                self.exit_line = line
            else:
                rest.append(line)
        return status, rest, self.proc.stderr.read()


@contextmanager
def server(netns: str, tunnel: Path, tmp: Path, command: list[str], stem: str = "server",
           options: tuple[str, ...] = ()) -> Iterator[Server]:
    """A tunnel server in `netns` running `command`; its first line has been read."""
    key = key_file(tmp)
    argv = [str(tunnel), "server", "--key-file", str(key), *options, *log_options(tmp, stem), "--", *command]
    proc = subprocess.Popen(in_ns(netns, argv),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    try:
        try:
            first = lines.get(timeout=10)
        except queue.Empty:
            raise AssertionError("the tunnel server printed nothing") from None
        try:
            _, port = parse_connect_line(first)
        except ValueError as e:
            raise AssertionError(f"{e}; stderr: {proc.stderr.read() if proc.poll() is not None else ''}") from None
        yield Server(proc, port, key, lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def client_argv(tunnel: Path, tmp: Path, srv: Server, command: list[str], stem: str = "client",
                options: tuple[str, ...] = ()) -> str:
    """The shell command, run as the emulator's command, that starts the client endpoint."""
    return (f"exec {shlex.quote(str(tunnel))} client $MAHIMAHI_BASE:{srv.port} --key-file {srv.key} "
            f"{shlex.join([*options, *log_options(tmp, stem)])} -- {shlex.join(command)}")


def through_emulator(netns: str, emu: Path, options: list[str], shell_command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(in_ns(netns, [str(emu), *options, "--", "sh", "-c", shell_command]),
                          capture_output=True, text=True, timeout=TUNNEL_TIMEOUT_S)


@dataclass
class NativeLog:
    base_epoch_us: int
    datagrams: dict[int, tuple[int, int]]  # uid -> (t_us since the base, inner bytes)

    def epoch_us(self, uid: int) -> int:
        return self.base_epoch_us + self.datagrams[uid][0]


def read_native(path: Path) -> NativeLog:
    base = None
    datagrams = {}
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            if m := re.search(r"t_us 0 is (\d+) us since the Unix epoch", line):
                base = int(m[1])
            continue
        t_us, uid, size, *_ = map(int, line.split())  # version 2 adds the ECN codepoint
        assert uid not in datagrams, f"{path}: uid {uid} twice"
        datagrams[uid] = (t_us, size)
    assert base is not None, f"{path}: no base in the header"
    return NativeLog(base, datagrams)


def assert_every_uid_crossed(sent: NativeLog, received: NativeLog, what: str) -> None:
    assert sent.datagrams, f"{what}: nothing was sent"
    missing = sorted(set(sent.datagrams) - set(received.datagrams))
    unknown = sorted(set(received.datagrams) - set(sent.datagrams))
    assert not missing, f"{what}: {len(missing)} uids sent but never received, first {missing[:5]}"
    assert not unknown, f"{what}: uids received but never sent: {unknown[:5]}"
    resized = [uid for uid, (_, size) in sent.datagrams.items() if received.datagrams[uid][1] != size]
    assert not resized, f"{what}: sizes changed for uids {resized[:5]}"
    assert sorted(sent.datagrams) == list(range(len(sent.datagrams))), f"{what}: uids are not 0, 1, 2, ..."


def one_way_delays_us(sent: NativeLog, received: NativeLog) -> list[int]:
    return [received.epoch_us(uid) - sent.epoch_us(uid) for uid in sent.datagrams if uid in received.datagrams]


def tunnel_delay_errors_us(netns: str, emu: Path, tunnel: Path, tmp_path: Path, delay_us: int) -> list[int]:
    """One run of 300 stamped datagrams through the tunnel and the emulator; each one's |error|."""
    tmp_path.mkdir()
    with server(netns, tunnel, tmp_path, traffic("stamp-recv", TRAFFIC_PORT, "--count", 300, "--seconds", 20)) as srv:
        assert srv.next_line() == "ready"
        sender = " ".join(traffic("stamp-send", "$PANTHEON_TUNNEL_PEER", TRAFFIC_PORT, "--count", 300, "--interval-ms", 5, "--size", 200))
        done = through_emulator(netns, emu, ["--delay", "20", "--uplink-rate", "unlimited", "--downlink-rate", "unlimited"],
                                client_argv(tunnel, tmp_path, srv, ["sh", "-c", f"{sender} > /dev/null && sleep 0.1"]))
        assert done.returncode == 0, done.stderr
        srv.finish()
    sent, arrived = read_native(tmp_path / "client.ingress.log"), read_native(tmp_path / "server.egress.log")
    assert_every_uid_crossed(sent, arrived, "stamped datagrams")
    return sorted(abs(d - delay_us) for d in one_way_delays_us(sent, arrived))
