"""The `pantheon-sim gym` subprocess: environments stepped over its standard input and output
(crates/sim/src/gym/protocol.rs; docs/gym.md). One process holds every environment of a vector, so
a step of N environments is one request line and one reply.

A subprocess rather than a PyO3 module for the reasons python/pantheon/sim/batch.py gives (no second
build system, no ABI coupling, a crash that is not the trainer's). The process dies with this one
(simulator.spawn), and with the object that started it: `close()`, or the garbage collector
through a weakref finalizer, ends it and reaps it.
"""
from __future__ import annotations

import json
import subprocess
import tempfile
import weakref
from dataclasses import dataclass
from typing import IO, Any, NoReturn

import numpy as np

from pantheon.binaries import binary
from pantheon.errors import PantheonError
from pantheon.sim import simulator

INPUTS = 9
"""Indigo's network inputs (crates/cc/src/indigo/state.rs): delay/200 ms, delivery rate/200 Mbit/s,
sending rate/200 Mbit/s, window/5000 packets, previous action one-hot (5)."""
CWND_SCALE_PACKETS = 5000
"""Indigo's scale of the window input (state.rs's CWND_SCALE_PACKETS)."""
RECORD_VALUES = INPUTS + 6
"""f64 per environment per reply (gym.rs): the observation, then these columns."""
THROUGHPUT_MBPS, DELAY_MS, LOSS_RATE, CWND_PACKETS, DELIVERED_PACKETS, SENT_PACKETS = range(INPUTS, RECORD_VALUES)


_STEP_ONE = [f"step {a}\n".encode() for a in range(5)]
"""A single environment's step requests, by action (Indigo's five)."""


class GymError(PantheonError):
    """The simulator refused a request (a bad path, an episode stepped past its end): its one line."""


@dataclass(frozen=True)
class EpisodeConfig:
    """One episode's request to the simulator."""
    path_options: list[str]
    """pantheon-emu's options for the path."""
    seed: int
    step_ms: float
    steps: int
    max_cwnd_packets: float

    def request(self, env: int) -> str:
        return "reset " + json.dumps({"env": env, "path": self.path_options, "seed": self.seed, "step_ms": self.step_ms,
                                      "steps": self.steps, "max_cwnd_packets": self.max_cwnd_packets})


def _stop(child: subprocess.Popen[bytes], errors: IO[Any]) -> None:
    if child.poll() is None:
        child.kill()
    child.wait()
    for stream in (child.stdin, child.stdout):
        if stream is not None:
            stream.close()
    errors.close()


class GymProcess:
    """One `pantheon-sim gym` process."""

    def __init__(self) -> None:
        # stderr to a file: nothing reads it until the process fails, and a pipe could fill.
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 - the finalizer closes it with the process
        self._child: subprocess.Popen[bytes] = simulator.spawn(
            [str(binary(simulator.PROGRAM)), "gym"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._errors)
        assert self._child.stdin is not None and self._child.stdout is not None, "both are pipes"
        self._stdin, self._stdout = self._child.stdin, self._child.stdout
        self._finalizer = weakref.finalize(self, _stop, self._child, self._errors)

    @property
    def pid(self) -> int:
        return self._child.pid

    def exchange(self, requests: list[str]) -> list[np.ndarray | GymError]:
        """Sends `requests` (lines) at once and returns each reply: its records, an array of shape
        (environments, RECORD_VALUES), or the simulator's error."""
        if not self._finalizer.alive:
            raise GymError("the environment is closed: make a new one")
        try:
            self._stdin.write(("\n".join(requests) + "\n").encode())
            self._stdin.flush()
            return [self._reply() for _ in requests]
        except (BrokenPipeError, EOFError):
            self._ended()

    def step_one(self, action: int) -> np.ndarray | GymError:
        """`exchange` of one environment's step, without building a list per step."""
        if not self._finalizer.alive:
            raise GymError("the environment is closed: make a new one")
        try:
            self._stdin.write(_STEP_ONE[action])
            self._stdin.flush()
            return self._reply()
        except (BrokenPipeError, EOFError):
            self._ended()

    def _ended(self) -> NoReturn:
        self._errors.seek(0)
        why = simulator.message(self._errors.read().decode(errors="replace"))
        self.close()
        raise RuntimeError(f"{simulator.PROGRAM} gym ended unexpectedly: {why or 'no message'}") from None

    def _reply(self) -> np.ndarray | GymError:
        header = self._stdout.readline()
        if not header.startswith(b"ok "):
            if not header:
                raise EOFError
            return GymError(header.decode().rstrip("\n").removeprefix("error "))
        size = int(header[3:])
        data = self._stdout.read(size)
        if len(data) < size:
            raise EOFError
        return np.frombuffer(data, dtype="<f8").reshape(-1, RECORD_VALUES)

    def close(self) -> None:
        self._finalizer()
