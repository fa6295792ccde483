"""One run: a private namespace for the whole run, the emulated path inside it, one instrumented
tunnel per flow (server and scheme receiver on the far side of the path, client and scheme sender
inside the emulated namespace), each flow started in its scheme's order and stopped on time —
and, however the run ends, nothing of it left behind.

    run namespace (pantheon-run-PID-N)
      ├─ tunnel server ─ own namespace ─ launcher ─ scheme receiver      (one per flow)
      └─ pantheon-emu ─ emulated namespace ─ agent
                                               └─ tunnel client ─ own namespace ─ launcher ─ scheme sender

Data flows on the emulator's uplink. A flow's first side (its scheme's run_first) is released
`HEAD_START_S` before the other; the flow's time is counted from the second. Each flow's two
endpoints share a session key of their own (a 0600 file in the control directory, removed when the
run ends), so no datagram of another flow or of anyone else enters a flow's tunnel.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pantheon.binaries import binary
from pantheon.harness import leftovers, tunnel
from pantheon.harness.plan import Plan
from pantheon.netns import in_netns
from pantheon.schemes import Scheme

HEAD_START_S = 1.0
READY_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.02
SCHEME_PORT = 50_000


@dataclass
class Outcome:
    failures: list[str] = field(default_factory=list)
    """One line each; empty when the run succeeded."""
    t0_epoch_s: float | None = None
    """Wall-clock time the run's clock started (flow start times count from here)."""
    ended_epoch_s: float | None = None

    @property
    def ok(self) -> bool:
        return not self.failures


class RunFailed(Exception):
    """Ends a run early; the message is its one-line reason."""


def _side_names(i: int) -> tuple[str, str]:
    return f"flow{i}.receiver", f"flow{i}.sender"


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except FileNotFoundError:
        return ""
    return lines[-1] if lines else ""


class Run:
    def __init__(self, *, index: int, plan: Plan, schemes: dict[str, Scheme], emulator_options: list[str],
                 run_dir: Path, harness_pid: int) -> None:
        self.index, self.plan, self.schemes = index, plan, schemes
        self.emulator_options, self.dir, self.harness_pid = emulator_options, run_dir, harness_pid
        self.control = run_dir / "control"
        self.namespace = leftovers.run_namespace(harness_pid, index)
        self.processes: list[tuple[str, subprocess.Popen]] = []

    def execute(self, progress: Callable[[float, float], None]) -> Outcome:
        outcome = Outcome()
        self.control.mkdir(parents=True)
        subprocess.run(["ip", "netns", "add", self.namespace], check=True)
        try:
            subprocess.run(in_netns(self.namespace, ["ip", "link", "set", "lo", "up"]), check=True)
            self._start_endpoints()
            self._wait_until_ready()
            outcome.t0_epoch_s = time.time()
            self._play(progress)
        except RunFailed as e:
            outcome.failures.append(str(e))
        finally:
            self._stop_everything()
            for i in range(len(self.plan.flows)):
                self._key_file(i).unlink(missing_ok=True)
            leftovers.remove_namespace(self.namespace)
            outcome.ended_epoch_s = time.time()
        outcome.failures += self._scheme_failures(outcome)
        return outcome

    # --- start -----------------------------------------------------------------------------------

    def _launcher(self, name: str, command: list[str]) -> list[str]:
        return [sys.executable, "-m", "pantheon.harness.launch", str(self.control), name, str(self.harness_pid), "--", *command]

    def _spawn(self, what: str, argv: list[str], out: Path) -> subprocess.Popen:
        with open(out, "wb") as f:
            proc = subprocess.Popen(in_netns(self.namespace, argv), stdin=subprocess.DEVNULL, stdout=f,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append((what, proc))
        return proc

    def _start_endpoints(self) -> None:
        clients = []
        for i, flow in enumerate(self.plan.flows):
            scheme = self.schemes[flow.scheme]
            receiver_name, sender_name = _side_names(i)
            receiver = self._launcher(receiver_name, scheme.command("receiver", port=SCHEME_PORT))
            out = self.dir / f"flow{i}.tunnel-server.out"
            key = tunnel.write_session_key(self._key_file(i))
            server = self._spawn(f"tunnel server of flow {i}", tunnel.server_command(tunnel.EndpointLogs.under(self.dir, receiver_name), key, receiver), out)
            _, port = self._connect_details(server, out, i)
            sender = self._launcher(sender_name, scheme.command("sender", port=SCHEME_PORT))
            clients.append({
                "name": sender_name,
                "argv": tunnel.client_command(f"$MAHIMAHI_BASE:{port}", key, tunnel.EndpointLogs.under(self.dir, sender_name), sender),
                "stdout": str(self.dir / f"flow{i}.tunnel-client.out"),
            })
        plan_file = self.control / "agent.json"
        plan_file.write_text(json.dumps(clients))
        agent = [sys.executable, "-m", "pantheon.harness.agent", str(self.control), str(self.harness_pid), str(plan_file)]
        emulate = [str(binary("pantheon-emu")), *self.emulator_options,
                   "--uplink-log", str(self.dir / "uplink.log"), "--downlink-log", str(self.dir / "downlink.log"), "--", *agent]
        self._spawn("emulator", emulate, self.dir / "emulator.out")

    def _key_file(self, i: int) -> Path:
        return self.control / f"flow{i}.key"

    def _connect_details(self, server: subprocess.Popen, out: Path, i: int) -> tuple[str, int]:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            text = out.read_text(errors="replace")
            if "\n" in text:
                try:
                    return tunnel.parse_connect_line(text.splitlines()[0])
                except ValueError as e:
                    raise RunFailed(f"flow {i}: {e}") from None
            if server.poll() is not None:
                raise RunFailed(f"flow {i}: the tunnel server exited ({server.returncode}): {_last_line(out)}")
            time.sleep(POLL_S)
        raise RunFailed(f"flow {i}: the tunnel server said nothing for {READY_TIMEOUT_S:g} s")

    def _wait_until_ready(self) -> None:
        names = [n for i in range(len(self.plan.flows)) for n in _side_names(i)]
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all((self.control / f"{n}.ready").exists() for n in names):
            self._check_processes()
            if time.monotonic() > deadline:
                missing = [n for n in names if not (self.control / f"{n}.ready").exists()]
                raise RunFailed(f"the tunnels of {', '.join(missing)} did not come up within {READY_TIMEOUT_S:g} s")
            time.sleep(POLL_S)

    def _check_processes(self) -> None:
        for what, proc in self.processes:
            if proc.poll() is not None:
                raise RunFailed(f"the {what} exited early (status {proc.returncode}); see its output in {self.dir}")

    # --- play ------------------------------------------------------------------------------------

    def _schedule(self) -> list[tuple[float, list[str]]]:
        """(seconds after t0, control files to create then), in time order."""
        events = []
        for i, flow in enumerate(self.plan.flows):
            receiver, sender = _side_names(i)
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
                # A scheme that exits ends its launcher and then its tunnel: name the scheme.
                self._check_early_exits()
                self._check_processes()
                progress(now_s, total_s)
                time.sleep(min(0.1, at_s - now_s))
            for name in files:
                (self.control / name).touch()
        progress(total_s, total_s)

    def _early_exit(self, i: int, name: str) -> str | None:
        """The failure line for a scheme side whose launcher saw it exit before it was told to."""
        exit_file = self.control / f"{name}.exit"
        if not exit_file.exists():
            return None
        status = json.loads(exit_file.read_text())
        if not status["exited_early"]:
            return None
        reason = _last_line(self.control / f"{name}.stderr")
        line = f"flow {i} ({self.plan.flows[i].scheme}) {name.split('.')[1]} exited early with status {status['status']}"
        return line + (f": {reason}" if reason else "")

    def _check_early_exits(self) -> None:
        for i in range(len(self.plan.flows)):
            for name in _side_names(i):
                if failure := self._early_exit(i, name):
                    raise RunFailed(failure)

    # --- stop ------------------------------------------------------------------------------------

    def _stop_everything(self) -> None:
        for i in range(len(self.plan.flows)):
            for name in _side_names(i):
                (self.control / f"{name}.stop").touch()
        (self.control / "agent.stop").touch()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for _, proc in self.processes:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def _scheme_failures(self, outcome: Outcome) -> list[str]:
        """Scheme sides that exited on their own and are not already the run's reported failure."""
        found = (self._early_exit(i, name) for i in range(len(self.plan.flows)) for name in _side_names(i))
        return [f for f in found if f and f not in outcome.failures]
