#!/usr/bin/env python3
"""One pantheon-udp flow through pantheon-emu at 1 Gbit/s: throughput and the sender's CPU per Gbit.

What is measured
    The receiver (`pantheon-udp recv`) runs in a network namespace this script creates; the sender
    (`pantheon-udp send --cc CC`) runs inside `pantheon emulate` started from that namespace, so
    its datagrams cross the emulated uplink: 1000 Mbit/s each way, 10 ms one-way delay (20 ms RTT),
    DropTail queues of 2 500 000 bytes (20 ms at 1 Gbit/s, one BDP). The sender prints its totals
    — datagrams acknowledged, its lifetime, the CPU seconds it has used (user + system) — when it
    gets SIGUSR1, which this script sends OMIT_S seconds after it started, and when it gets
    SIGTERM, SECONDS after it started. The difference of the two lines is the steady state, the
    ramp left out. Reported per controller:

      Mbit/s            acknowledged 1464-byte IP packets x 8 / time, steady state
      all Mbit/s        the same over the sender's whole life, ramp included
      CPU s/Gbit        sender CPU seconds / Gbit acknowledged, steady state
      CPU share         sender CPU seconds / time, steady state (1.0 = one core busy)

    The link's rate is in 1500-byte delivery opportunities and each datagram is 1464 bytes, so the
    path carries at most 1000 Mbit/s of IP packets.

Why
    The controllers of crates/cc run in the sender's hot path, once per datagram and per
    acknowledgement. The target (issue 6): one flow saturates a 1 Gbit/s emulated link with one
    core, so the transport never limits an experiment at Pantheon's rates.

On a 2-core machine the emulator's two relay threads, the sender and the receiver share the cores,
so the figure measures the machine as much as the sender; run it on an otherwise idle machine.

Run as root, from anywhere (builds nothing: cargo build --release first):
    python3 bench/udp_throughput.py [--seconds 10] [--cc cubic,bbr]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import support
from pantheon.processes import pid_outside
from support.processes import BenchError, run_checked

REPO_ROOT = support.REPO

UDP = REPO_ROOT / "target" / "release" / "pantheon-udp"
PANTHEON = REPO_ROOT / ".venv" / "bin" / "pantheon"
PORT = 9500
RATE_MBPS = 1000
ONE_WAY_DELAY_MS = 10
QUEUE_BYTES = 2_500_000
PACKET_BYTES = 1464
TARGET_MBPS = 950
OMIT_S = 2
SETUP_GRACE_S = 30.0
POLL_S = 0.05

SENDER_LINE = re.compile(
    r"sent (\d+) datagrams, (\d+) acknowledged \([\d.]+ Mbit/s over ([\d.]+) s\), (\d+) declared lost, "
    r"\d+ acknowledged late; ([\d.]+) s of CPU")


@dataclass(frozen=True)
class Totals:
    """One of the sender's totals lines."""
    sent: int
    acked: int
    lifetime_s: float
    lost: int
    cpu_s: float

    @staticmethod
    def parse(match: re.Match) -> Totals:
        sent, acked, lifetime_s, lost, cpu_s = match.groups()
        return Totals(int(sent), int(acked), float(lifetime_s), int(lost), float(cpu_s))


@dataclass(frozen=True)
class Result:
    cc: str
    warm: Totals  # at OMIT_S
    end: Totals

    @property
    def steady_gbit(self) -> float:
        return (self.end.acked - self.warm.acked) * PACKET_BYTES * 8 / 1e9

    @property
    def steady_s(self) -> float:
        return self.end.lifetime_s - self.warm.lifetime_s

    @property
    def steady_mbps(self) -> float:
        return self.steady_gbit * 1e3 / self.steady_s

    @property
    def all_mbps(self) -> float:
        return self.end.acked * PACKET_BYTES * 8 / self.end.lifetime_s / 1e6

    @property
    def cpu_s_per_gbit(self) -> float:
        return (self.end.cpu_s - self.warm.cpu_s) / self.steady_gbit

    @property
    def cpu_share(self) -> float:
        return (self.end.cpu_s - self.warm.cpu_s) / self.steady_s


def main() -> int:
    args = parse_args()
    problem = missing_prerequisite()
    if problem:
        print(f"udp_throughput: {problem}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, raise_keyboard_interrupt)
    namespace = f"pbench-udp-{os.getpid()}"
    results = []
    try:
        run_checked(["ip", "netns", "add", namespace])
        run_checked(["ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up"])
        with tempfile.TemporaryDirectory(prefix="pbench-udp-") as tmp:
            for cc in args.cc:
                print(f"{cc} ...", end=" ", file=sys.stderr, flush=True)
                try:
                    result = run_flow(namespace, cc, args.seconds, Path(tmp))
                except BenchError as error:
                    print(f"FAILED: {error}", file=sys.stderr)
                    continue
                print(f"{result.steady_mbps:.1f} Mbit/s, {result.cpu_s_per_gbit:.3f} CPU s/Gbit", file=sys.stderr)
                results.append(result)
    except BenchError as error:
        print(f"udp_throughput: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("udp_throughput: interrupted; namespace and processes cleaned up", file=sys.stderr)
        return 130
    finally:
        subprocess.run(["ip", "netns", "del", namespace], stderr=subprocess.DEVNULL)
    print_table(results, args.seconds)
    return 0 if len(results) == len(args.cc) else 1


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=f"One pantheon-udp flow over pantheon-emu at {RATE_MBPS} Mbit/s, "
                    f"{2 * ONE_WAY_DELAY_MS} ms RTT: throughput and sender CPU per Gbit.")
    parser.add_argument("--seconds", type=positive_int, default=10,
                        help=f"flow length per controller, > {OMIT_S} (default 10)")
    parser.add_argument("--cc", type=comma_list, default=["cubic"],
                        help="controller specs of crates/cc, comma-separated (default cubic; e.g. cubic,bbr)")
    return parser.parse_args()


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) <= OMIT_S:
        raise argparse.ArgumentTypeError(f"expected a whole number of seconds > {OMIT_S}, got {text!r}")
    return int(text)


def comma_list(text: str) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected controller names, got {text!r}")
    return items


def missing_prerequisite() -> str | None:
    if os.geteuid() != 0:
        return "run as root (it creates a network namespace)"
    for path, build in ((UDP, "cargo build --release"), (PANTHEON, "./setup.sh --no-run")):
        if not path.exists():
            return f"no {path}: run '{build}' in {REPO_ROOT}"
    return None


def raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt


def run_flow(namespace: str, cc: str, seconds: int, tmp: Path) -> Result:
    """Receiver in the namespace, sender behind the emulator; the sender's totals lines."""
    sender_err, sender_pid = tmp / f"{cc}.sender.stderr", tmp / f"{cc}.sender.pid"
    for stale in (sender_err, sender_pid):
        stale.unlink(missing_ok=True)
    prefix = ["ip", "netns", "exec", namespace]
    receiver = subprocess.Popen([*prefix, str(UDP), "recv", str(PORT)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    emulator = None
    try:
        time.sleep(0.2)
        if receiver.poll() is not None:
            raise BenchError(f"receiver exited with status {receiver.returncode}")
        sender = (f"echo $(readlink /proc/self/ns/pid) $$ > {shlex.quote(str(sender_pid))}; exec {shlex.quote(str(UDP))} send "
                  f"--cc {shlex.quote(cc)} \"$MAHIMAHI_BASE\" {PORT} 2> {shlex.quote(str(sender_err))}")
        path = ["--delay", str(ONE_WAY_DELAY_MS)]
        for direction in ("uplink", "downlink"):
            path += [f"--{direction}-rate", str(RATE_MBPS), f"--{direction}-queue-bytes", str(QUEUE_BYTES)]
        emulator_err = tmp / "emulator.stderr"
        with open(emulator_err, "wb") as err:
            emulator = subprocess.Popen([*prefix, str(PANTHEON), "emulate", *path, "--", "sh", "-c", sender],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                        start_new_session=True)
        pid = wait_for_pid(sender_pid, emulator, emulator_err)
        try:
            time.sleep(OMIT_S)
            os.kill(pid, signal.SIGUSR1)
            time.sleep(seconds - OMIT_S)
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            raise BenchError(f"the sender exited early: {sender_err.read_text().strip() or 'no output'}") from None
        try:
            status = emulator.wait(timeout=SETUP_GRACE_S)
        except subprocess.TimeoutExpired:
            raise BenchError(f"the sender did not stop within {SETUP_GRACE_S:.0f} s of SIGTERM") from None
        text = sender_err.read_text() if sender_err.exists() else ""
        lines = [Totals.parse(m) for m in SENDER_LINE.finditer(text)]
        if status != 0 or len(lines) != 2:
            raise BenchError(f"exit status {status}; sender: {text.strip() or 'no output'}; "
                             f"emulator: {emulator_err.read_text().strip() or 'no output'}")
        return Result(cc, lines[0], lines[1])
    finally:
        for process in (emulator, receiver):
            stop(process)


def wait_for_pid(path: Path, emulator: subprocess.Popen, emulator_err: Path) -> int:
    """The sender's pid as this script sees it, once the emulator has started it (it wrote its PID
    namespace and its pid there)."""
    deadline = time.monotonic() + SETUP_GRACE_S
    while time.monotonic() < deadline:
        fields = path.read_text().split() if path.exists() else []
        if len(fields) == 2 and fields[1].isdigit():
            return pid_outside(fields[0], int(fields[1]))
        if emulator.poll() is not None:
            raise BenchError(f"emulator exited with status {emulator.returncode} before the sender started: "
                             f"{emulator_err.read_text().strip() or 'no output'}")
        time.sleep(POLL_S)
    raise BenchError("the sender did not start in time")


def stop(process: subprocess.Popen | None, grace_s: float = 3.0) -> None:
    """SIGTERM to the process group this script started it in, SIGKILL after grace_s."""
    if process is None or process.poll() is not None:
        return
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


def print_table(results: list[Result], seconds: int) -> None:
    header = ("cc", "Mbit/s", "all Mbit/s", "sent", "acked", "lost", "sender CPU s", "CPU s/Gbit", "CPU share",
              f">= {TARGET_MBPS}")
    lines = [header]
    for r in results:
        lines.append((r.cc, f"{r.steady_mbps:.1f}", f"{r.all_mbps:.1f}", str(r.end.sent), str(r.end.acked),
                      str(r.end.lost), f"{r.end.cpu_s:.2f}", f"{r.cpu_s_per_gbit:.3f}", f"{r.cpu_share:.2f}",
                      "yes" if r.steady_mbps >= TARGET_MBPS else "NO"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    print(f"\nOne flow, {seconds} s, {RATE_MBPS} Mbit/s each way, {2 * ONE_WAY_DELAY_MS} ms RTT, "
          f"DropTail {QUEUE_BYTES} B. Mbit/s, CPU s/Gbit, CPU share: from {OMIT_S} s to the end; all Mbit/s: "
          f"the sender's whole life. CPU: the sender's user + system seconds.")


if __name__ == "__main__":
    sys.exit(main())
