"""The control channel of `pantheon test remote`: one ssh connection per campaign, the user's own
OpenSSH client and configuration (keys, agent, ProxyJump, ControlMaster; `-F FILE` when given),
carrying the JSON lines of remote_agent.py (its header lists them) on the remote command's stdin
and stdout.

The transport is `ssh_argv` alone; a `Channel` runs any argv that starts the agent, so the
protocol can be driven without ssh (the agent as a local subprocess). ssh runs in a session of
its own, so the user's Ctrl-C reaches the harness, which then stops the run through the channel,
not ssh. If the harness is killed, ssh's stdin closes, the agent reads the end of its input and
ends everything it started.
"""
from __future__ import annotations

import base64
import contextlib
import json
import queue
import shlex
import subprocess
import tempfile
import threading
import time
import zlib
from pathlib import Path

from pantheon.errors import PantheonError

REMOTE_COMMAND = 'cd {dir} && PYTHONPATH="$PWD/python" exec .venv/bin/python -m pantheon.harness.remote_agent'
"""The agent, from the remote checkout: PYTHONPATH makes that checkout's package the one that
runs, whichever checkout the virtual environment was installed from."""
SSH_OPTIONS = ["-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20", "-o", "ServerAliveInterval=5",
               "-o", "ServerAliveCountMax=3"]
"""No terminal; BatchMode: a missing key or host key is an error, never a prompt; a host that does
not answer is an error within 20 s, before REQUEST_TIMEOUT_S; keepalives: a path that dies is
noticed within ~15 s, not at the next request."""
REQUEST_TIMEOUT_S = 60.0
CLOSE_TIMEOUT_S = 10.0


class ChannelError(PantheonError):
    """The agent cannot be reached (ssh failed, or the connection is gone) or refused a request."""


def ssh_argv(destination: str, ssh_config: Path | None, remote_dir: str) -> list[str]:
    return ["ssh", *(["-F", str(ssh_config)] if ssh_config else []), *SSH_OPTIONS, destination,
            REMOTE_COMMAND.format(dir=shlex.quote(remote_dir))]


def ssh_hostname(destination: str, ssh_config: Path | None) -> str:
    """The HostName ssh connects to for `destination` (`ssh -G`: the configuration applied)."""
    done = subprocess.run(["ssh", *(["-F", str(ssh_config)] if ssh_config else []), "-G", destination],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise ChannelError(f"ssh -G {destination}: {done.stderr.strip() or f'exit status {done.returncode}'}")
    return next((line.split(None, 1)[1] for line in done.stdout.splitlines() if line.startswith("hostname ")), destination)


class Channel:
    """One conversation with an agent. Requests are answered in order; the reader thread writes
    the agent's reports (`state`, `file`) under `run_dir` as they arrive, so a request's answer is
    only seen once everything the agent sent before it is on disk."""

    def __init__(self, argv: list[str], peer: str) -> None:
        self.peer = peer
        """How errors name the far side ("root@host:/dir")."""
        self.run_dir: Path | None = None
        """Where the agent's reports and logs of the current run go."""
        self.exits: list[dict] = []
        """`exited` reports of the current run."""
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the channel; close() closes it)
        self.answers: queue.Queue[dict | None] = queue.Queue()
        self.last_id = 0
        """The id of the last request sent."""
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    @property
    def open(self) -> bool:
        return self.reader.is_alive()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            op = message.get("op")
            if op == "state":
                self._write(message["path"], message["text"].encode(), replace=True)
            elif op == "file":
                self._write(message["path"], zlib.decompress(base64.b64decode(message["data"])), replace=message["first"])
            elif op == "exited":
                self.exits.append(message)
            else:
                self.answers.put(message)
        self.answers.put(None)

    def _write(self, relative: str, data: bytes, *, replace: bool) -> None:
        if self.run_dir is None or Path(relative).is_absolute() or ".." in Path(relative).parts:
            raise ValueError(f"the agent sent a file outside the run: {relative!r}")
        path = self.run_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if replace:
            # Whole at once (rename): the harness may be reading the file meanwhile.
            partial = path.with_name(path.name + ".partial")
            partial.write_bytes(data)
            partial.replace(path)
        else:
            with open(path, "ab") as f:
                f.write(data)

    def ssh_said(self) -> str:
        """The last line ssh (or the agent) wrote on stderr."""
        self.stderr.seek(0)
        lines = self.stderr.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else ""

    def lost(self) -> ChannelError:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2)
        said = self.ssh_said() or f"ssh exited with status {self.proc.returncode}"
        return ChannelError(f"lost the connection to {self.peer}: {said}")

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            raise self.lost() from None

    def request(self, message: dict, timeout_s: float = REQUEST_TIMEOUT_S) -> dict:
        """The agent's answer; ChannelError if it refused (its message) or cannot answer. Answers
        carry their request's id, so one left over from a request the user interrupted (Ctrl-C)
        is never taken for a later request's."""
        self.last_id += 1
        self.send({**message, "id": self.last_id})
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                answer = self.answers.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise ChannelError(f"{self.peer}: no answer to {message['op']!r} within {timeout_s:g} s") from None
            if answer is None:
                self.answers.put(None)  # every later request fails the same way
                raise self.lost()
            if answer.get("id") == self.last_id:
                break
        if answer["op"] == "error":
            raise ChannelError(answer["message"])
        return answer

    def close(self) -> None:
        """Ends the agent (which ends what it started) and ssh."""
        with contextlib.suppress(ChannelError, OSError):
            self.send({"op": "bye"})
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()
