"""An environment's path as the simulator's options (pantheon-emu's, docs/emulator.md), and the
rate step as a Mahimahi delivery trace.

A constant-rate cell is `--uplink-rate R --downlink-rate R --delay RTT/2`, its queue on the data
direction (the uplink), with the acknowledgements' direction infinite, as `pantheon test`'s
buffer presets have it. A rate step (ccBench's bandwidth changes) is a trace: one 1500-byte
delivery opportunity per line, at a whole millisecond of the link's clock (Winstein et al.,
"Stochastic forecasts achieve high throughput and low delay over cellular networks", NSDI 2013,
§4: Mahimahi's format), the k-th at ⌈12 k / R⌉ ms, so that by t ms ⌊R t / 12⌋ opportunities
have passed at R Mbit/s. The link's clock runs ahead of the run's by the emulator's lead
(crates/sim/src/link_clock.rs), so the step is written at step_at_s + LINK_LEAD_MS, and the trace
lasts the run plus two seconds: it never loops within a run. The downlink stays at the higher of
the two rates, constant.

A preset cell is the preset's own options, its traces included. A topology cell is the topology's
links and routes (pantheon.topology), its links' traces as model files too.
"""
from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np

from pantheon import presets
from pantheon import topology as topologies
from pantheon.calibrate.trace import LINK_LEAD_MS
from pantheon.league.matrix import Environment, Matrix
from pantheon.sim.runner import Model, model_file

BITS_PER_OPPORTUNITY = 1500 * 8
TRACE_TAIL_MS = 2_000
"""How long a step trace outlasts the run: more than the link's largest lead (1.24 s)."""


def step_trace(before_mbps: float, after_mbps: float, step_ms: int, length_ms: int) -> bytes:
    """A Mahimahi trace at `before_mbps` until `step_ms`, then `after_mbps`, `length_ms` long."""
    t_ms = np.arange(1, length_ms + 1, dtype=np.float64)
    rate = np.where(t_ms <= step_ms, before_mbps, after_mbps)
    # Opportunities by the end of each millisecond: the rate integrated, whole ones.
    so_far = np.floor(np.cumsum(rate) * 1e3 / BITS_PER_OPPORTUNITY + 1e-9).astype(np.int64)
    per_ms = np.diff(so_far, prepend=0)
    lines = np.repeat(t_ms.astype(np.int64), per_ms)
    if lines.size == 0 or lines[-1] != length_ms:
        lines = np.append(lines, length_ms)  # the period is the last line's time
    return ("\n".join(map(str, lines.tolist())) + "\n").encode()


class PathBuilder:
    """Options of each environment's path; the traces they need are model files (sim/runner.py),
    numbered as they are first needed: a step trace as its recipe (made where the task runs), a
    preset's as its bytes."""

    def __init__(self, matrix: Matrix, traces_dir: Path) -> None:
        self.matrix = matrix
        self.traces_dir = traces_dir
        self.files: list[Model] = []
        self._index: dict[tuple, int] = {}

    def _file(self, key: tuple, model: Model) -> str:
        if key not in self._index:
            self._index[key] = len(self.files)
            self.files.append(model)
        return model_file(self._index[key])

    def options(self, env: Environment) -> list[str]:
        if env.preset is not None:
            return self._preset(env.preset)
        if env.topology is not None:
            return []
        assert env.rate_mbps is not None and env.rtt_ms is not None
        rate = env.rate_mbps
        options = ["--delay", f"{env.rtt_ms / 2!r}"]
        if env.step_factor is None:
            options += ["--uplink-rate", f"{rate!r}", "--downlink-rate", f"{rate!r}"]
        else:
            after = rate * env.step_factor
            step_ms = round((env.step_at_s or 0.0) * 1e3) + LINK_LEAD_MS
            length_ms = math.ceil(self.matrix.duration_s * 1e3) + TRACE_TAIL_MS
            trace = self._file(("step", rate, after, step_ms, length_ms),
                               functools.partial(step_trace, rate, after, step_ms, length_ms))
            options += ["--uplink-trace", trace, "--downlink-rate", f"{max(rate, after)!r}"]
        if env.queue != "infinite":
            options += ["--uplink-queue", env.queue]
        if (limit := env.limit_bytes()) is not None:
            options += ["--uplink-queue-bytes", str(limit)]
        if env.loss:
            options += ["--uplink-loss", f"{env.loss!r}"]
        return options

    def topology(self, env: Environment) -> dict | None:
        """A topology cell's network as a batch job's `topology` (None for a one-link cell)."""
        if env.topology is None:
            return None
        network = topologies.load(env.topology)
        return network.fields({trace: self._file(("trace", str(trace)), trace.read_bytes())
                               for trace in network.traces()})

    def _preset(self, name: str) -> list[str]:
        """The preset's options with each trace file it writes replaced by a model file."""
        self.traces_dir.mkdir(parents=True, exist_ok=True)
        options = presets.lookup(name).options(self.traces_dir)
        for i, word in enumerate(options):
            if i and options[i - 1].endswith("-trace"):
                options[i] = self._file(("preset", name, options[i - 1]), Path(word).read_bytes())
        return options
