"""One iperf3 flow through an emulator, measured: throughput after the warm-up, and the CPU
seconds the emulator spent."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pantheon.processes import pid_outside
from support import POLL_S
from support.processes import BenchError, stop, tail
from support.tcp_buffers import TCP_BUFFER_SYSCTLS, write_sysctls

IPERF_PORT = 5399
OMIT_S = 2
"""Seconds of iperf3's warm-up (-O), left out of its throughput: the slow-start ramp."""
SETUP_GRACE_S = 30.0


@dataclass(frozen=True)
class Measurement:
    throughput_mbps: float  # receiver side, after the warm-up
    moved_gbit: float  # everything the sender sent, warm-up included
    emulator_cpu_s: float  # user + system

    @property
    def cpu_s_per_gbit(self) -> float:
        return self.emulator_cpu_s / self.moved_gbit


def attempt(label: str, run) -> Measurement | None:
    """run(), its figures on stderr after `label`; None when it failed (the reason on stderr too)."""
    print(f"{label} ...", end=" ", file=sys.stderr, flush=True)
    try:
        result = run()
    except BenchError as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return None
    print(f"{result.throughput_mbps:.1f} Mbit/s, {result.cpu_s_per_gbit:.3f} CPU s/Gbit", file=sys.stderr)
    return result


def client_script(cc: str, seconds: int, tmp: Path) -> str:
    """The client command: announce its pid, wait for its TCP buffers to be set, run iperf3, report CPU.

    No quote characters, so that it survives the anchor's nested sh -c quoting.
    """
    return (f"echo $(readlink /proc/self/ns/pid) $$ > {tmp}/client.pid; while [ ! -e {tmp}/go ]; do sleep {POLL_S}; done; "
            f"iperf3 -c $MAHIMAHI_BASE -p {IPERF_PORT} -t {seconds} -O {OMIT_S} -C {cc} -J "
            f"--logfile {tmp}/iperf3.json; status=$?; times; exit $status")


def measure(server_prefix: list[str], emulator_argv: list[str], seconds: int, tmp: Path) -> Measurement:
    """Start the iperf3 server, run the emulator with the client inside, and read the results.

    CPU: wait4()'s rusage of the emulator and every descendant it reaped, less the client shell's
    `times` (its own and the iperf3 client's CPU).
    """
    for stale in ("client.pid", "go", "iperf3.json"):
        (tmp / stale).unlink(missing_ok=True)
    server = subprocess.Popen([*server_prefix, "iperf3", "-s", "-1", "-p", str(IPERF_PORT)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    emulator = None
    try:
        wait_until_listening(server_prefix, server)
        stdout_path, stderr_path = tmp / "emulator.out", tmp / "emulator.err"
        with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
            emulator = subprocess.Popen(emulator_argv, stdout=stdout, stderr=stderr, start_new_session=True)
        deadline = time.monotonic() + seconds + OMIT_S + SETUP_GRACE_S
        client_pid = wait_for_client(tmp / "client.pid", emulator, deadline, stderr_path)
        write_sysctls(["nsenter", "-t", str(client_pid), "-n"], TCP_BUFFER_SYSCTLS)
        (tmp / "go").touch()
        exit_code, cpu_s = wait_with_cpu(emulator, deadline)
        if exit_code != 0:
            raise BenchError(f"exit status {exit_code}; {tail(stderr_path)}{iperf_error(tmp / 'iperf3.json')}")
        throughput_mbps, moved_gbit = read_iperf_report(tmp / "iperf3.json")
        return Measurement(throughput_mbps, moved_gbit, cpu_s - shell_times_s(stdout_path.read_text()))
    finally:
        for process in (emulator, server):
            stop(process)


def wait_until_listening(prefix: list[str], server: subprocess.Popen, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise BenchError(f"iperf3 server exited with status {server.returncode}")
        listening = subprocess.run([*prefix, "ss", "-Hltn", "sport", "=", f":{IPERF_PORT}"],
                                   capture_output=True, text=True).stdout
        if listening.strip():
            return
        time.sleep(POLL_S)
    raise BenchError(f"iperf3 server not listening on port {IPERF_PORT} after {timeout_s} s")


def wait_for_client(pid_path: Path, emulator: subprocess.Popen, deadline: float, stderr_path: Path) -> int:
    """This script's pid for the process that wrote its PID namespace and its pid there to pid_path
    (under pantheon-emu and pantheon-tunnel, a namespace of its own)."""
    while time.monotonic() < deadline:
        fields = pid_path.read_text().split() if pid_path.exists() else []
        if len(fields) == 2 and fields[1].isdigit():
            return pid_outside(fields[0], int(fields[1]))
        if emulator.poll() is not None:
            raise BenchError(f"emulator exited with status {emulator.returncode} before the client started; "
                             f"{tail(stderr_path)}")
        time.sleep(POLL_S)
    raise BenchError("client did not start in time")


def wait_with_cpu(process: subprocess.Popen, deadline: float) -> tuple[int, float]:
    """Reap process with wait4(): exit code, and user + system CPU s of it and the descendants it reaped."""
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode, usage.ru_utime + usage.ru_stime
        time.sleep(POLL_S)
    raise BenchError("run did not finish in time")


def read_iperf_report(path: Path) -> tuple[float, float]:
    """Receiver-side Mbit/s after the warm-up, and Gbit sent over the whole test (warm-up included)."""
    try:
        report = json.loads(path.read_text())
        return (report["end"]["sum_received"]["bits_per_second"] / 1e6,
                sum(interval["sum"]["bytes"] for interval in report["intervals"]) * 8 / 1e9)
    except (OSError, ValueError, KeyError) as error:
        raise BenchError(f"unreadable iperf3 report {path}: {error!r}") from None


def shell_times_s(text: str) -> float:
    """Sum of the four figures the shell builtin `times` prints ('0m1.230000s 0m0.450000s' x2)."""
    figures = re.findall(r"(\d+)m([\d.]+)s", text)
    if len(figures) != 4:
        raise BenchError(f"cannot read the client's CPU times from {text!r}")
    return sum(int(minutes) * 60 + float(seconds) for minutes, seconds in figures)


def iperf_error(report_path: Path) -> str:
    try:
        return "; iperf3: " + json.loads(report_path.read_text())["error"]
    except (OSError, ValueError, KeyError):
        return ""
