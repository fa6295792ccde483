"""The far side of `pantheon test remote`: started over the user's ssh by the harness,

    cd PANTHEON_DIR && PYTHONPATH="$PWD/python" exec .venv/bin/python -m pantheon.harness.remote_agent

it runs this host's endpoint of every flow and relays the harness's go and stop to them. It talks
JSON lines on stdin/stdout (the ssh channel); nothing else may write to its stdout.

Requests (the harness's, each with an "id"), each answered by one {"op": "ok", "id", ...} or
{"op": "error", "id", "message"}:
    hello {schemes}             -> versions (git commit, pantheon, each scheme's), this machine and
                                   its sysctls, the ssh client's address, what killed agents left
    run {index}                 a new run: a private run directory with its control directory
    endpoint {flow, side, role, scheme, ecn, spec, key, server}
                                writes the flow's session key (0600) and starts this side's tunnel
                                endpoint (role "server", answered with its port, or "client"
                                connecting to `server`), whose command is the launcher (launch.py)
                                with this agent as its harness
    signal {files}              creates control files (NAME.go, NAME.stop); no answer, it is on the
                                run's schedule
    stop {}                     ends the run's endpoints, sends their logs, removes the run's files;
                                answered with {failures}: its endpoints' failures (a log cut short)
    bye {}                      ends the agent
Reports, unasked:
    state {path, text}          a launcher's report (control/NAME.ready, .started, .exit and, with
                                .exit, .stderr), as it appears
    exited {what, status, output}   a tunnel endpoint ended before it was told to stop
    file {path, data, first}    a log of the run (zlib, then base64), before stop's answer

Whatever ends it — `bye`, its stdin closing (the harness or the ssh connection is gone), SIGTERM,
SIGHUP — it ends every process it started, by process group, and removes its private directory.
If it is SIGKILLed the launchers notice it is gone and end their schemes, the tunnels end with
them, and its state file (leftovers.AgentState) lets the next agent end whatever still runs.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import zlib
from pathlib import Path
from typing import TextIO

from pantheon import __version__, schemes
from pantheon.harness import leftovers, tunnel
from pantheon.harness.run import (
    Processes,
    RunFailed,
    scheme_side,
    side_name,
    wait_for_connect_line,
)
from pantheon.trials import git_commit, machine, sysctls

POLL_S = 0.01
FILE_CHUNK_BYTES = 1 << 20
STDERR_TAIL_BYTES = 64 << 10
"""How much of a scheme's stderr is sent with its exit report (all of it comes with the logs)."""
REPORTS = (".ready", ".started", ".exit")


class Agent:
    """This host's side of a campaign: its private directory (a run directory per run), the
    processes it started, and what it has told the harness."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.private = Path(tempfile.mkdtemp(prefix="pantheon-agent-"))
        self.state = leftovers.AgentState(self.private)
        self.registry = schemes.registry()
        self.run_dir: Path = self.private
        """The current run's directory (logs, control/, keys/); the private directory before the first."""
        self.control: Path = self.private
        self.processes = Processes(self.control)
        self.names: list[str] = []
        """The scheme sides of the run that run here (flowI.sender or flowI.receiver)."""
        self.sent: set[str] = set()
        """The reports already sent, by path under the run directory."""
        self.exit_told = False
        """Whether the harness was told an endpoint ended (once a run: the run ends there)."""
        self.channel_open = True

    def send(self, message: dict) -> None:
        if not self.channel_open:
            return
        try:
            self.out.write(json.dumps(message) + "\n")
            self.out.flush()
        except OSError:
            self.channel_open = False  # the harness is gone: the main loop ends everything

    # --- requests --------------------------------------------------------------------------------

    def handle(self, message: dict) -> None:
        op = message.get("op")
        if op == "signal":
            for name in message["files"]:
                (self.control / name).touch()
            return
        try:
            if op == "hello":
                answer = {"op": "ok", **self.hello(message["schemes"])}
            elif op == "run":
                self.new_run(int(message["index"]))
                answer = {"op": "ok"}
            elif op == "endpoint":
                answer = {"op": "ok", **self.endpoint(message)}
            elif op == "stop":
                answer = {"op": "ok", "failures": self.end_run()}
            else:
                answer = {"op": "error", "message": f"unknown request {op!r}"}
        except RunFailed as e:
            answer = {"op": "error", "message": str(e)}
        self.send({**answer, "id": message.get("id")})

    def hello(self, names: list[str]) -> dict:
        return {
            "git_commit": git_commit(), "pantheon_version": __version__, "machine": machine(), "sysctls": sysctls(),
            "schemes": {name: {"problem": self.registry.problem(name),
                               "versions": s.versions if (s := self.registry.schemes.get(name)) else None} for name in names},
            "ssh_client": os.environ.get("SSH_CONNECTION", "").split(" ")[0],
            "leftovers": leftovers.clean_agents(),
        }

    def new_run(self, index: int) -> None:
        self._end_processes()  # a run the harness could not stop (its stop request was lost)
        self.run_dir = self.private / f"run{index}"
        self.control = self.run_dir / "control"
        (self.run_dir / "keys").mkdir(parents=True, mode=0o700)
        self.control.mkdir()
        self.processes, self.names, self.sent, self.exit_told = Processes(self.control), [], set(), False

    def endpoint(self, message: dict) -> dict:
        i, side, role = int(message["flow"]), message["side"], message["role"]
        name = side_name(i, side)
        key = self.run_dir / "keys" / f"flow{i}.key"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(message["key"] + "\n")
        scheme = self.registry.schemes[message["scheme"]]
        spec = message.get("spec")
        command = scheme_side(self.control, name, scheme, side, ecn=bool(message.get("ecn", False)),
                              spec=spec if isinstance(spec, str) else None)
        logs = tunnel.EndpointLogs.under(self.run_dir, name, clock=True)
        out = self.run_dir / f"flow{i}.tunnel-{role}.out"
        what = f"tunnel {role} of flow {i}"
        self.names.append(name)
        if role == "server":
            server = self.processes.spawn(what, tunnel.server_command(logs, key, command), out, name)
            self.state.started(server.pid)
            return {"port": wait_for_connect_line(server, out, f"flow {i}: the tunnel server")[1]}
        client = self.processes.spawn(what, tunnel.client_command(message["server"], key, logs, command), out, name)
        self.state.started(client.pid)
        return {}

    # --- reports ---------------------------------------------------------------------------------

    def poll(self) -> None:
        """Sends the launchers' new reports, and says so once if a tunnel endpoint ended."""
        for name in self.names:
            for suffix in REPORTS:
                path = f"control/{name}{suffix}"
                if path in self.sent or not (self.run_dir / path).exists():
                    continue
                text = (self.run_dir / path).read_text(errors="replace")
                if suffix == ".exit":
                    try:
                        json.loads(text)
                    except ValueError:
                        continue  # the launcher is still writing it
                    stderr = self.run_dir / f"control/{name}.stderr"
                    tail = stderr.read_bytes()[-STDERR_TAIL_BYTES:].decode(errors="replace") if stderr.exists() else ""
                    self.send({"op": "state", "path": f"control/{name}.stderr", "text": tail})
                self.send({"op": "state", "path": path, "text": text})
                self.sent.add(path)
        if not self.exit_told and (ended := self.processes.exited()):
            what, status, output = ended
            self.send({"op": "exited", "what": what, "status": status, "output": output})
            self.exit_told = True

    def end_run(self) -> list[str]:
        """Stops the run's sides and endpoints, sends their reports and logs, removes the run's
        files; returns the endpoints' failures (a log cut short by a full disk, Processes.end)."""
        if self.run_dir == self.private:
            return []  # no run
        self.exit_told = True  # they are told to end now
        failures = self._end_processes()
        self.poll()
        shutil.rmtree(self.run_dir / "keys", ignore_errors=True)
        for path in sorted(p for p in self.run_dir.rglob("*") if p.is_file()):
            self.send_file(path)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.run_dir = self.control = self.private
        self.names = []
        return failures

    def _end_processes(self) -> list[str]:
        for name in self.names:
            with contextlib.suppress(OSError):
                (self.control / f"{name}.stop").touch()
        return self.processes.end()

    def send_file(self, path: Path) -> None:
        relative = str(path.relative_to(self.run_dir))
        with open(path, "rb") as f:
            first = True
            while (chunk := f.read(FILE_CHUNK_BYTES)) or first:
                self.send({"op": "file", "path": relative, "first": first,
                           "data": base64.b64encode(zlib.compress(chunk, 1)).decode()})
                first = False

    def close(self) -> None:
        try:
            self._end_processes()
        finally:
            shutil.rmtree(self.private, ignore_errors=True)
            self.state.remove()


class Requests:
    """The harness's requests from stdin, read as they come without blocking the poll: select(2)
    with a short relative timeout, not a reader thread and a queue, whose timed waits hang under
    libfaketime (which the tests wrap around this host, and a user may too)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer, self.closed = fd, b"", False

    def next(self, timeout_s: float) -> dict | None:
        """The next request, or None if none came within `timeout_s` (or the input is closed)."""
        while b"\n" not in self.buffer and not self.closed:
            readable, _, _ = select.select([self.fd], [], [], timeout_s)
            if not readable:
                return None
            chunk = os.read(self.fd, 1 << 16)
            self.closed = not chunk
            self.buffer += chunk
        if b"\n" not in self.buffer:
            return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line) if line.strip() else None

    @property
    def finished(self) -> bool:
        """The input is closed and every request in it was read."""
        return self.closed and b"\n" not in self.buffer


def main() -> int:
    ending = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal ending
        ending = True

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    out = sys.stdout
    sys.stdout = sys.stderr  # a stray print must not corrupt the channel
    agent = Agent(out)
    requests = Requests(sys.stdin.fileno())
    try:
        while not ending and agent.channel_open and not requests.finished:
            message = requests.next(POLL_S)
            if message and message.get("op") == "bye":
                break
            if message:
                agent.handle(message)
            agent.poll()
    finally:
        agent.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
