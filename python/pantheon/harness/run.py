"""One run, in either mode: every flow's two endpoints started (each scheme side under a launcher
that waits for its go), each flow released in its scheme's order and stopped on time, a scheme
that fails ending the run with one line — and, however the run ends, nothing of it left behind.

Where the endpoints run is the mode's (`Endpoints`): local mode's emulated path in a run namespace
(local.py), remote mode's two hosts joined by a real path (remote.py). What a run does with them is
here, once: the schedule of go and stop, the checks for a scheme that exited early, the failure
lines. A flow's first side (its scheme's run_first) is released `HEAD_START_S` before the other;
the flow's time is counted from the second.

Every scheme side reports in the run's control directory (launch.py: `NAME.ready`, `NAME.started`,
`NAME.exit`, `NAME.stderr`); in remote mode the agent on the far host copies its sides' reports
into it, so the checks read one directory whatever the mode.
"""
from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pantheon.harness import leftovers, steal, tunnel
from pantheon.harness.transfers import TransferFiles, side_command
from pantheon.plan import Plan
from pantheon.processes import lifeline
from pantheon.schemes import KERNEL_TCP_ECN, Scheme

HEAD_START_S = 1.0
READY_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0
KILL_GRACE_S = 3.0
POLL_S = 0.02
SCHEME_PORT = 50_000
SIDES = ("receiver", "sender")


@dataclass
class Outcome:
    failures: list[str] = field(default_factory=list)
    """One line each; empty when the run succeeded."""
    t0_epoch_s: float | None = None
    """Wall-clock time (this host's clock) the run's clock started (flow start times count from here)."""
    ended_epoch_s: float | None = None
    start_lateness_ms: list[float | None] = field(default_factory=list)
    """Per flow, how long after it was due its later-started side was started (the launchers'
    `.started` against the schedule; None where no side of it on this host started)."""
    host_steal_pct: float | None = None
    """The share of this host's CPU time stolen by a hypervisor while the flows ran (steal.py);
    None where the run did not play to its end or the kernel does not count steal."""

    @property
    def ok(self) -> bool:
        return not self.failures


class RunFailed(Exception):
    """Ends a run early; the message is its one-line reason."""


def side_name(i: int, side: str) -> str:
    """The control-file name of flow i's `side` ("receiver" or "sender")."""
    return f"flow{i}.{side}"


def last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except FileNotFoundError:
        return ""
    return lines[-1] if lines else ""


def launcher(control: Path, name: str, command: list[str], sysctls: tuple[str, ...] = ()) -> list[str]:
    """The launcher's command line (launch.py): it runs `command` when `NAME.go` appears, and ends
    it at `NAME.stop` or when this process is gone (its lifeline, which `Processes.spawn` passes on);
    `sysctls` (`net.ipv4.tcp_ecn=1`) it sets first, in the tunnel endpoint's namespace it runs in."""
    settings = [arg for setting in sysctls for arg in ("--sysctl", setting)]
    return [sys.executable, "-m", "pantheon.harness.launch", str(control), name, str(lifeline()), *settings, "--", *command]


def scheme_side(control: Path, name: str, scheme: Scheme, side: str, *, ecn: bool, spec: str | None = None,
                transfers: TransferFiles | None = None) -> list[str]:
    """The launcher of one side of a flow of `scheme`; with `ecn` the side negotiates ECN as its
    scheme does (Scheme.ecn_switch): kernel TCP by the sysctl in the side's own namespace, where
    both sides set it (the receiver's default, 2, would accept ECN too; 1 says so whatever the
    host's is), a crates/cc sender by its spec. `spec` replaces a crates/cc sender's spec (the
    flow's `cc`); `transfers`: the flow's finite transfers, run by the transfer driver
    (harness/transfers.py) instead of one bulk flow."""
    sysctls = (KERNEL_TCP_ECN,) if ecn and scheme.ecn_switch() == "sysctl" else ()
    command = scheme.command(side, port=SCHEME_PORT, ecn=ecn, spec=spec)
    if transfers is not None:
        command = side_command(scheme, side, command, transfers, SCHEME_PORT)
    return launcher(control, name, command, sysctls)


def wait_for_connect_line(server: subprocess.Popen, out: Path, what: str) -> tuple[str, int]:
    """(host, port) from a tunnel server's line saying how to connect, in its output `out` (which
    has its stderr too: notes may come first)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        lines = out.read_text(errors="replace").splitlines(keepends=True)
        for line in lines:
            with contextlib.suppress(ValueError):
                if line.endswith("\n"):
                    return tunnel.parse_connect_line(line)
        if server.poll() is not None:
            raise RunFailed(f"{what} exited ({server.returncode}): {last_line(out)}")
        time.sleep(POLL_S)
    raise RunFailed(f"{what} did not say how to connect within {READY_TIMEOUT_S:g} s" + (f": {last_line(out)}" if last_line(out) else ""))


class Processes:
    """The processes one side of a run started, each in a process group of its own, ended by
    process id (SIGTERM, then SIGKILL) when the run ends."""

    def __init__(self, control: Path) -> None:
        self.control = control
        self.started: list[tuple[str, str | None, subprocess.Popen]] = []
        """(what, the scheme side it serves or None, the process)."""
        self.outputs: dict[int, Path] = {}
        """Each process's output file, by process id."""
        self.accounted: set[int] = set()
        """Processes whose status is no failure to report, by process id: `check` reported their
        early exit, or `end` signalled them (a tunnel reports 143 after a SIGTERM)."""

    def spawn(self, what: str, argv: list[str], out: Path, side: str | None = None) -> subprocess.Popen:
        """Starts argv, its output in `out`; `side` (flowI.sender, ...) is the scheme side whose
        tunnel endpoint it is: it ends with that side's launcher, which is no failure of its own
        (the side was told to stop, or its scheme exited, and the launcher's report says so)."""
        with open(out, "wb") as f:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                                    pass_fds=(lifeline(),))
        self.started.append((what, side, proc))
        self.outputs[proc.pid] = out
        return proc

    def exited(self) -> tuple[str, int, str] | None:
        """(what, status, its output's last line) of the first process that ended before it was
        told to, or None."""
        for what, side, proc in self.started:
            if proc.poll() is not None and not (side and any((self.control / f"{side}{s}").exists() for s in (".stop", ".exit"))):
                self.accounted.add(proc.pid)
                return what, proc.returncode, last_line(self.outputs[proc.pid])
        return None

    def check(self, where: Path) -> None:
        if ended := self.exited():
            said = f": {ended[2]}" if ended[2] else f"; see its output in {where}"
            raise RunFailed(f"the {ended[0]} exited early (status {ended[1]}){said}")

    def end(self, timeout_s: float = STOP_TIMEOUT_S) -> list[str]:
        """Waits up to `timeout_s` for them to end on their own (they were told to), then ends
        whichever has not. Returns a failure line for each that exited with a status of its own
        (not a signal of ours) that `check` has not reported: the emulator and the tunnel exit
        non-zero when a log of theirs could not be written completely (a full disk)."""
        self._end(timeout_s)
        return [f"the {what} failed (status {proc.returncode}): {last_line(self.outputs[proc.pid])}"
                for what, _, proc in self.started if proc.returncode > 0 and proc.pid not in self.accounted]

    def _end(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for _, _, proc in self.started:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.accounted.add(proc.pid)
                proc.terminate()
                try:
                    proc.wait(timeout=KILL_GRACE_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


class SessionKeys:
    """One fresh tunnel session key per flow (issue 16 §4): in a private directory (0700, each
    file 0600), never on a command line nor in the data dir, removed when the run ends (by the
    next harness, if this one is killed)."""

    def __init__(self) -> None:
        self.dir = leftovers.keys_directory()

    def new(self, i: int) -> Path:
        return tunnel.write_session_key(self.dir / f"flow{i}.key")

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class Endpoints(Protocol):
    """Where a run's endpoints live: started, told to go and stop, checked, ended."""

    def start(self, run: Run) -> None:
        """Starts both endpoints of every flow, each scheme side under a launcher; RunFailed if one
        cannot start."""

    def signal(self, files: list[str]) -> None:
        """Creates these control files (`NAME.go`, `NAME.stop`) where the side NAME runs."""

    def local_sides(self) -> tuple[str, ...]:
        """The sides ("receiver", "sender") whose launchers run on this host's clock."""

    def check(self) -> None:
        """RunFailed if one of the run's processes (not a scheme: the launchers report those) ended."""

    def stop(self) -> list[str]:
        """Tells every side to stop, ends what is left and removes what the run created; the logs
        are in the run's directory when it returns. Returns the failures of the run's own
        processes that only their exit status told (Processes.end)."""


class Run:
    def __init__(self, *, plan: Plan, schemes: dict[str, Scheme], run_dir: Path, endpoints: Endpoints) -> None:
        self.plan, self.schemes, self.dir, self.endpoints = plan, schemes, run_dir, endpoints
        self.control = run_dir / "control"

    def names(self) -> list[str]:
        return [side_name(i, side) for i in range(len(self.plan.flows)) for side in SIDES]

    def execute(self, progress: Callable[[float, float], None]) -> Outcome:
        outcome = Outcome()
        self.control.mkdir(parents=True)
        try:
            self.endpoints.start(self)
            self._wait_until_ready()
            outcome.t0_epoch_s = time.time()
            ticks = steal.read()
            self._play(progress)
            outcome.host_steal_pct = steal.stolen_pct(ticks, steal.read())
        except RunFailed as e:
            outcome.failures.append(str(e))
        finally:
            outcome.failures += self.endpoints.stop()
            outcome.ended_epoch_s = time.time()
        outcome.failures += self._scheme_failures(outcome)
        if outcome.t0_epoch_s is not None:
            outcome.start_lateness_ms = self._start_lateness_ms(outcome.t0_epoch_s)
        return outcome

    def _start_lateness_ms(self, t0_epoch_s: float) -> list[float | None]:
        """Each flow's start lateness (Outcome.start_lateness_ms), from the sides on this host's
        clock (Endpoints.local_sides): the harness releasing 50 bulk flows at once started the
        last of them 2.4 s late (issue 35 §5)."""
        due: dict[str, float] = {}
        for at_s, names in self._schedule():
            due.update({name.removesuffix(".go"): at_s for name in names if name.endswith(".go")})
        lateness: list[float | None] = []
        for i in range(len(self.plan.flows)):
            late = []
            for side in self.endpoints.local_sides():
                name = side_name(i, side)
                with contextlib.suppress(OSError, ValueError):
                    started_s = float((self.control / f"{name}.started").read_text())
                    late.append(round((started_s - t0_epoch_s - due[name]) * 1e3, 3))
            lateness.append(max(late) if late else None)
        return lateness

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all((self.control / f"{n}.ready").exists() for n in self.names()):
            self.endpoints.check()
            if time.monotonic() > deadline:
                missing = [n for n in self.names() if not (self.control / f"{n}.ready").exists()]
                raise RunFailed(f"the tunnels of {', '.join(missing)} did not come up within {READY_TIMEOUT_S:g} s")
            time.sleep(POLL_S)

    # --- play ------------------------------------------------------------------------------------

    def _schedule(self) -> list[tuple[float, list[str]]]:
        """(seconds after t0, control files to create then), in time order."""
        events = []
        for i, flow in enumerate(self.plan.flows):
            receiver, sender = side_name(i, "receiver"), side_name(i, "sender")
            first, second = (receiver, sender) if self.schemes[flow.scheme].run_first == "receiver" else (sender, receiver)
            events.append((flow.start_s, [f"{first}.go"]))
            events.append((flow.start_s + HEAD_START_S, [f"{second}.go"]))
            events.append((flow.end_s + HEAD_START_S, [f"{receiver}.stop", f"{sender}.stop"]))
        return sorted(events, key=lambda e: e[0])

    def _play(self, progress: Callable[[float, float], None]) -> None:
        start = time.monotonic()
        total_s = self.plan.runtime_s + HEAD_START_S
        for at_s, files in self._schedule() + [(total_s, [])]:
            while (now_s := time.monotonic() - start) < at_s:
                # First what no scheme explains (the emulator, a lost ssh connection), then the schemes.
                self.endpoints.check()
                self._check_early_exits()
                progress(now_s, total_s)
                time.sleep(min(0.1, at_s - now_s))
            if files:
                self.endpoints.signal(files)
        progress(total_s, total_s)

    def _early_exit(self, i: int, name: str) -> str | None:
        """The failure line for a scheme side whose launcher saw it exit before it was told to."""
        exit_file = self.control / f"{name}.exit"
        if not exit_file.exists():
            return None
        status = json.loads(exit_file.read_text())
        if not status["exited_early"]:
            return None
        reason = last_line(self.control / f"{name}.stderr")
        line = f"flow {i} ({self.plan.flows[i].scheme}) {name.split('.')[1]} exited early with status {status['status']}"
        return line + (f": {reason}" if reason else "")

    def _early_exits(self) -> list[str]:
        found = (self._early_exit(i, side_name(i, side)) for i in range(len(self.plan.flows)) for side in SIDES)
        return [f for f in found if f]

    def _check_early_exits(self) -> None:
        if failures := self._early_exits():
            raise RunFailed(failures[0])

    def _scheme_failures(self, outcome: Outcome) -> list[str]:
        """Scheme sides that exited on their own and are not already the run's reported failure."""
        return [f for f in self._early_exits() if f not in outcome.failures]
