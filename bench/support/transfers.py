"""The transfer driver (pantheon.transfers) over loopback kernel TCP against a local receiver
(`kernel_tcp receiver --transfers-log`): schedules, one run, and how late each transfer began.
No namespaces: loopback measures the driver, not a path."""
from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from support import REPO

PYTHON_ENV = {**os.environ, "PYTHONPATH": str(REPO / "python")}


def even_schedule(rate_per_s: float, count: int, n_bytes: int) -> list[list[float | int]]:
    """`count` transfers of `n_bytes`, one every 1/rate_per_s seconds from 0."""
    return [[k / rate_per_s, n_bytes] for k in range(count)]


def poisson_schedule(rate_per_s: float, count: int, n_bytes: int, seed: int) -> list[list[float | int]]:
    """`count` transfers of `n_bytes` arriving as a Poisson process of `rate_per_s` from 0."""
    rng = random.Random(seed)
    offset_s, schedule = 0.0, []
    for _ in range(count):
        schedule.append([round(offset_s, 6), n_bytes])
        offset_s += rng.expovariate(rate_per_s)
    return schedule


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DriverRun:
    """What one run logged: per transfer id, (began, scheduled) and the receiver's end, µs since
    the epoch; the driver's exit status after SIGTERM."""
    began: dict[int, tuple[int, int]]
    ended: dict[int, int]
    returncode: int

    def lateness_us(self) -> list[int]:
        """Began minus scheduled, per transfer, sorted."""
        return sorted(b - s for b, s in self.began.values())


def start_receiver(port: int, log: Path) -> subprocess.Popen[bytes]:
    receiver = subprocess.Popen(
        [sys.executable, "-m", "pantheon.kernel_tcp", "receiver", str(port), "--bind", "127.0.0.1",
         "--transfers-log", str(log)], env=PYTHON_ENV)
    deadline = time.monotonic() + 10
    while True:
        # A connection without a header: the receiver closes it and logs nothing.
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return receiver
        if time.monotonic() > deadline or receiver.poll() is not None:
            receiver.kill()
            raise RuntimeError(f"the receiver did not listen on port {port}")
        time.sleep(0.02)


def read_lines(path: Path) -> list[list[int]]:
    return [[int(w) for w in line.split()] for line in path.read_text().splitlines()] if path.exists() else []


def run_driver(schedule: list[list[float | int]], workdir: Path, cc: str = "cubic", timeout_s: float = 30.0) -> DriverRun:
    """Runs the driver (`--tcp`) on `schedule` against a fresh receiver; once the receiver has
    logged every transfer (or `timeout_s` passed), stops the driver with SIGTERM."""
    workdir.mkdir(parents=True, exist_ok=True)
    schedule_file, driver_log, receiver_log = workdir / "schedule.json", workdir / "began.log", workdir / "ended.log"
    schedule_file.write_text(json.dumps(schedule))
    port = free_port()
    receiver = start_receiver(port, receiver_log)
    try:
        driver = subprocess.Popen(
            [sys.executable, "-m", "pantheon.transfers", "--schedule", str(schedule_file), "--log", str(driver_log),
             "--tcp", cc, "127.0.0.1", str(port)], env=PYTHON_ENV)
        try:
            deadline = time.monotonic() + timeout_s
            while len(read_lines(receiver_log)) < len(schedule) and time.monotonic() < deadline:
                if driver.poll() is not None:
                    break
                time.sleep(0.05)
            driver.send_signal(signal.SIGTERM)
            returncode = driver.wait(timeout=10)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)
    began = {k: (b, s) for k, b, s in read_lines(driver_log)}
    ended = {k: e for k, e in read_lines(receiver_log)}
    return DriverRun(began, ended, returncode)
