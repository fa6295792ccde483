"""Stamped datagrams through the emulator (traffic.py, beside this file, makes them): a receiver,
a sender as the emulator's command, and the per-packet error of --delay."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pantheon import link_log

TRAFFIC = Path(__file__).with_name("traffic.py")
"""The traffic program (senders and receivers of stamped datagrams, run as commands)."""
TRAFFIC_PORT = 9000
EMULATOR_TIMEOUT_S = 30


def in_ns(netns: str, argv: list[str]) -> list[str]:
    """argv prefixed to run inside `netns`."""
    return ["ip", "netns", "exec", netns, *argv]


def traffic_command(subcommand: str, *args: object, linger_s: float = 0) -> list[str]:
    """A traffic.py sender to run as the emulator's command, aimed at the far end. The emulator
    ends with its command, dropping what is still on the path: `linger_s` keeps it alive after
    the sender is done."""
    rest = " ".join(shlex.quote(str(a)) for a in args)
    sender = f'{sys.executable} {TRAFFIC} {subcommand} "$MAHIMAHI_BASE" {rest}'
    return ["sh", "-c", f"{sender} && sleep {linger_s}" if linger_s else f"exec {sender}"]


def emulate(emu: Path, netns: str, options: list[str], command: list[str]) -> str:
    """Runs `command` behind the emulator in `netns`; the emulator must exit cleanly. Returns
    the command's standard output."""
    result = subprocess.run(
        in_ns(netns, [str(emu), *options, "--", *command]),
        capture_output=True, text=True, timeout=EMULATOR_TIMEOUT_S,
    )
    assert result.returncode == 0, f"emulator exited {result.returncode}: {result.stderr}"
    assert "warning" not in result.stderr, result.stderr
    return result.stdout


@contextmanager
def receiver(netns: str, *args: object) -> Iterator[subprocess.Popen[str]]:
    """A traffic.py receiver in `netns`, bound and ready when the block starts."""
    proc = subprocess.Popen(
        in_ns(netns, [sys.executable, str(TRAFFIC), *map(str, args)]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.strip() == "ready", f"receiver did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def summary_of(proc: subprocess.Popen[str]) -> dict:
    """Stops a receiver (SIGTERM makes it report) and returns its JSON summary."""
    if proc.poll() is None:
        proc.terminate()
    out, err = proc.communicate(timeout=10)
    lines = out.strip().splitlines()
    assert lines, f"receiver printed nothing: {err}"
    return json.loads(lines[-1])


def measure_delay_errors(emu: Path, netns: str, log_path: Path, count: int, delay_us: int) -> dict[str, list[float]]:
    """One run of stamped datagrams; each packet's |error| in us, from the log and from the receiver."""
    with receiver(netns, "stamp-recv", TRAFFIC_PORT, "--count", count, "--seconds", 20) as rx:
        sent = emulate(emu, netns, ["--delay", str(delay_us / 1000), "--uplink-rate", "unlimited", "--uplink-log", str(log_path)],
                       traffic_command("stamp-send", TRAFFIC_PORT, "--count", count, "--interval-ms", 2, "--size", 100, linger_s=0.2))
        records = summary_of(rx)["records"]
    # When each datagram entered the emulator: the kernel's transmit time on the sender's TUN
    # device, which leaves out the sender's own scheduling (time.time_ns() to sendto).
    kernel_send_ns = json.loads(sent.strip().splitlines()[-1])["kernel_send_ns"]
    assert None not in kernel_send_ns, "the kernel gave no transmit time for some datagrams"
    log = link_log.read(log_path)

    ours = [d for d in log.departures if d.size_bytes == 100]
    assert len(ours) == count
    log_error_us = [abs(d.t_us + d.lateness_us - log.entries_us[d.uid] - delay_us) for d in ours]
    assert len(records) == count
    end_to_end_error_us = [abs((recv_ns - kernel_send_ns[seq]) / 1000 - delay_us) for seq, _, recv_ns in records]
    return {"log": [float(e) for e in log_error_us], "receiver": end_to_end_error_us}
