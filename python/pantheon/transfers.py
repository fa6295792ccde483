"""The transfer driver: the sender of a flow that carries finite transfers in the emulator. It
starts each transfer of a schedule at its planned time and logs when it began.

    python -m pantheon.transfers --schedule FILE --log FILE --tcp CC HOST PORT
    python -m pantheon.transfers --schedule FILE --log FILE -- COMMAND ...

The schedule is JSON, `[[offset_s, bytes], ...]`: transfer k (its index in the list) of `bytes`
bytes starts `offset_s` seconds after the driver starts. Time zero is the driver's own start
(time.time() when it has read its arguments); the harness starts the driver at its flow's start.
A transfer whose time has passed (the driver fell behind) starts at once, never skipped.

`--tcp CC HOST PORT` runs each transfer in this process, a thread each, as kernel TCP's finite
sender (`pantheon.kernel_tcp.transfer`) with the kernel's congestion control CC: an interpreter
per transfer would cost ~40 ms of CPU. `-- COMMAND ...` starts COMMAND per transfer, `{bytes}`
and `{transfer}` in its words replaced by the transfer's size and index (e.g. `pantheon-udp send
--bytes {bytes} --transfer-id {transfer} ...`), each in a process group of its own, reaped as it
exits.

For each transfer the log gets one line `transfer_id began_epoch_us scheduled_epoch_us` (µs since
the epoch, CLOCK_REALTIME; began: just before the connect() or the process's start; scheduled:
time zero plus the offset), written whole and flushed at once, so a driver killed mid-run leaves
only complete lines. The receiver logs each transfer's end (`kernel_tcp receiver
--transfers-log`, `pantheon-udp recv --transfers-log`).

After the last transfer has started the driver idles until it is told to stop: the harness
counts a scheme's side that ends on its own as a failure, whatever its transfers did. SIGTERM or
SIGINT stop it: it sends SIGTERM to each live child's process group, SIGKILL to any still there
after STOP_GRACE_S, reaps them, and exits 0. Signals are taken synchronously (blocked, and waited
for with sigtimedwait between transfers), so a stop never lands between starting a child and
recording it.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pantheon import kernel_tcp
from pantheon.errors import PantheonError

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
WAITED_SIGNALS = STOP_SIGNALS | {signal.SIGCHLD}
STOP_GRACE_S = 0.5
"""How long children have to end after SIGTERM: well inside the launcher's 2 s grace for the
driver itself (pantheon.harness.launch.STOP_GRACE_S)."""
MAX_TRANSFERS = 1_000_000
SWITCH_INTERVAL_S = 0.0005
"""How long a transfer's thread may hold the interpreter while the main thread waits to start
the next transfer (Python's default is 5 ms, which was the p99 lateness at 200 arrivals/s)."""


class ScheduleError(PantheonError):
    """A schedule file that cannot be run."""


@dataclass(frozen=True)
class Planned:
    transfer_id: int
    offset_s: float
    n_bytes: int


def read_schedule(path: Path) -> list[Planned]:
    """The schedule's transfers in the order they start (by offset; ties by index)."""
    try:
        entries = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ScheduleError(f"--schedule {path}: cannot read it as JSON: {e}") from None
    if not isinstance(entries, list) or len(entries) > MAX_TRANSFERS:
        raise ScheduleError(f"--schedule {path}: expected a list of at most {MAX_TRANSFERS} [offset_s, bytes] pairs")
    planned = []
    for k, entry in enumerate(entries):
        ok = (isinstance(entry, list) and len(entry) == 2
              and isinstance(entry[0], (int, float)) and not isinstance(entry[0], bool)
              and math.isfinite(entry[0]) and entry[0] >= 0
              and isinstance(entry[1], int) and not isinstance(entry[1], bool) and 1 <= entry[1] < 1 << 64)
        if not ok:
            raise ScheduleError(f"--schedule {path}: entry {k} is {json.dumps(entry)}; expected [offset_s >= 0, bytes >= 1]")
        planned.append(Planned(k, float(entry[0]), entry[1]))
    return sorted(planned, key=lambda p: (p.offset_s, p.transfer_id))


class Log:
    """The driver's log, written from the main thread and the transfers' threads."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lock = threading.Lock()

    def began(self, transfer_id: int, began_epoch_us: int, scheduled_epoch_us: int) -> None:
        with self.lock:
            self.out.write(f"{transfer_id} {began_epoch_us} {scheduled_epoch_us}\n")
            self.out.flush()


class TcpTransfers:
    """Kernel TCP transfers in this process, a daemon thread each (gone with the process)."""

    def __init__(self, cc: str, host: str, port: int, log: Log) -> None:
        kernel_tcp.check_congestion_control(cc)
        self.cc, self.host, self.port, self.log = cc, host, port, log

    def start(self, planned: Planned, scheduled_epoch_us: int) -> None:
        threading.Thread(target=self.run, args=(planned, scheduled_epoch_us), daemon=True).start()

    def run(self, planned: Planned, scheduled_epoch_us: int) -> None:
        self.log.began(planned.transfer_id, time.time_ns() // 1000, scheduled_epoch_us)
        try:
            kernel_tcp.transfer(self.host, self.port, self.cc, planned.transfer_id, planned.n_bytes)
        except OSError as e:
            print(f"transfers: transfer {planned.transfer_id}: {e}", file=sys.stderr)

    def reap(self) -> None:
        """Threads need no reaping."""

    def stop(self) -> None:
        """The threads end with the process."""


class CommandTransfers:
    """A process per transfer, each the leader of its own process group."""

    def __init__(self, command: list[str], log: Log) -> None:
        if not command:
            raise PantheonError("give the command to run per transfer after '--', or --tcp CC HOST PORT")
        executable = shutil.which(command[0])
        if executable is None:
            raise PantheonError(f"{command[0]}: no such command (not a path, nor on $PATH)")
        self.executable, self.command, self.log = executable, command, log
        self.children: set[int] = set()

    def start(self, planned: Planned, scheduled_epoch_us: int) -> None:
        argv = [word.replace("{bytes}", str(planned.n_bytes)).replace("{transfer}", str(planned.transfer_id))
                for word in self.command]
        began_epoch_us = time.time_ns() // 1000
        # posix_spawn (vfork and exec) starts a process in ~1 ms where fork would copy the
        # driver's page tables; the child gets default signal handling and an empty signal mask,
        # not the driver's blocked signals.
        pid = os.posix_spawn(self.executable, argv, os.environ, setpgroup=0, setsigmask=(),
                             setsigdef=WAITED_SIGNALS)
        self.children.add(pid)
        self.log.began(planned.transfer_id, began_epoch_us, scheduled_epoch_us)

    def reap(self) -> None:
        """Collects every child that has exited (the driver has no children but these)."""
        while self.children:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            self.children.discard(pid)

    def stop(self) -> None:
        """Ends every live child's process group: SIGTERM, then SIGKILL after STOP_GRACE_S."""
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while self.children and time.monotonic() < deadline:
            self.reap()
            signal.sigtimedwait({signal.SIGCHLD}, 0.01)
        self.signal_all(signal.SIGKILL)
        for pid in self.children:
            os.waitpid(pid, 0)
        self.children.clear()

    def signal_all(self, sig: signal.Signals) -> None:
        # Only unreaped children: each pid is still ours, and so is its group.
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)


def drive(schedule: list[Planned], transfers: TcpTransfers | CommandTransfers) -> None:
    """Starts each transfer at its time, then idles; returns when a stop signal arrives."""
    start_epoch_s = time.time()
    start_s = time.monotonic()
    pending = iter(schedule)
    planned = next(pending, None)
    while True:
        while planned is not None and time.monotonic() >= start_s + planned.offset_s:
            transfers.start(planned, round((start_epoch_s + planned.offset_s) * 1e6))
            planned = next(pending, None)
        timeout_s = None if planned is None else max(0.0, start_s + planned.offset_s - time.monotonic())
        received = signal.sigwaitinfo(WAITED_SIGNALS) if timeout_s is None else signal.sigtimedwait(WAITED_SIGNALS, timeout_s)
        if received is not None and received.si_signo in STOP_SIGNALS:
            transfers.stop()
            return
        transfers.reap()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1:]
    parser = argparse.ArgumentParser(
        prog="python -m pantheon.transfers", description=__doc__.split("\n\n")[0],
        usage="%(prog)s --schedule FILE --log FILE (--tcp CC HOST PORT | -- COMMAND ...)")
    parser.add_argument("--schedule", type=Path, required=True, metavar="FILE",
                        help="JSON [[offset_s, bytes], ...]: each transfer's start in seconds after the driver's and its size")
    parser.add_argument("--log", type=Path, required=True, metavar="FILE",
                        help="write 'transfer_id began_epoch_us scheduled_epoch_us' per transfer started (µs since the epoch)")
    parser.add_argument("--tcp", nargs=3, metavar=("CC", "HOST", "PORT"),
                        help="run kernel TCP transfers in this process with congestion control CC to HOST:PORT "
                             "(a `kernel_tcp receiver --transfers-log`)")
    args = parser.parse_args(argv)
    if (args.tcp is None) == (not command):
        parser.error("give either --tcp CC HOST PORT or '-- COMMAND ...' (with {bytes} and {transfer}), not both")
    # Blocked before any thread or child exists: every thread inherits the mask, so the signals
    # wait for `drive`'s sigtimedwait.
    signal.pthread_sigmask(signal.SIG_BLOCK, WAITED_SIGNALS)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        schedule = read_schedule(args.schedule)
        try:
            out = open(args.log, "w")  # noqa: SIM115 - closed by the with below
        except OSError as e:
            raise PantheonError(f"--log {args.log}: cannot create it: {e.strerror or e}") from None
        with out:
            log = Log(out)
            transfers: TcpTransfers | CommandTransfers
            if args.tcp is not None:
                cc, host, port = args.tcp
                if not port.isdigit() or not 0 < int(port) < 65536:
                    raise PantheonError(f"--tcp {cc} {host} {port}: the port must be from 1 to 65535")
                transfers = TcpTransfers(cc, host, int(port), log)
            else:
                transfers = CommandTransfers(command, log)
            drive(schedule, transfers)
    except PantheonError as e:
        print(f"transfers: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"transfers: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
