"""Where an episode runs: a path drawn at each reset, from presets (built-in names such as the
calibrated emulators, or preset files such as `pantheon calibrate` writes; python/pantheon/presets.py)
or from ranges of the common path's parameters (rate, one-way delay, buffer, loss;
pantheon.sim.batch.link_options). Draws use the environment's seeded generator, so reset(seed=)
repeats them.

The ranges' defaults are the span of the paper's synthetic training set for Indigo (Yan et al.,
USENIX ATC 2018, §6: 5 to 200 Mbit/s, 10 to 80 ms of one-way delay); the rate is drawn
log-uniformly, so that 5 to 20 Mbit/s is as likely as 50 to 200.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from pantheon import presets
from pantheon.errors import PantheonError
from pantheon.sim.batch import link_options

PATH_BYTES = 1500
"""A data datagram on the path (tunnel overhead included), for a buffer in bandwidth-delay products."""


@dataclass(frozen=True)
class DrawnPath:
    name: str
    """What the path is, for info["path"]: a preset's name or the drawn parameters."""
    options: list[str]
    """pantheon-emu's options."""


class PathSampler(Protocol):
    def sample(self, rng: np.random.Generator) -> DrawnPath: ...


@dataclass(frozen=True)
class Presets:
    """One of `names` (built-in presets or preset files), uniformly."""
    names: Sequence[str]
    _options: dict[str, list[str]] = field(init=False, repr=False, compare=False)
    """Each preset's emulator options, read (and its trace files written) once, not per reset."""

    def __post_init__(self) -> None:
        if not self.names:
            raise PantheonError("Presets: give at least one preset name or file")
        traces = presets.traces_cache()
        object.__setattr__(self, "_options", {name: presets.lookup(name).options(traces) for name in self.names})

    @staticmethod
    def of_kind(kind: str) -> Presets:
        """Every built-in preset of `kind` ("calibrated", "buffer sweep", ...)."""
        names = [p.name for p in presets.PRESETS.values() if p.kind == kind]
        if not names:
            kinds = sorted({p.kind for p in presets.PRESETS.values()})
            raise PantheonError(f"no built-in preset is of kind '{kind}'; kinds: {', '.join(kinds)}")
        return Presets(names)

    def sample(self, rng: np.random.Generator) -> DrawnPath:
        name = self.names[int(rng.integers(len(self.names)))]
        return DrawnPath(name, list(self._options[name]))


def _span(name: str, span: tuple[float, float], low: float) -> tuple[float, float]:
    a, b = span
    if not (math.isfinite(a) and math.isfinite(b) and low <= a <= b):
        raise PantheonError(f"{name}: expected (low, high) with {low} <= low <= high, got {span}")
    return a, b


@dataclass(frozen=True)
class Ranges:
    """A constant-rate path with each parameter drawn from its range (low == high fixes it)."""
    rate_mbps: tuple[float, float] = (5.0, 200.0)
    delay_ms: tuple[float, float] = (10.0, 80.0)
    """One way, each direction."""
    queue_bdp: tuple[float, float] | None = None
    """A DropTail buffer of this many bandwidth-delay products (rate × 2·delay); None: infinite."""
    loss: tuple[float, float] = (0.0, 0.0)
    """i.i.d. loss probability on the uplink."""

    def __post_init__(self) -> None:
        if _span("rate_mbps", self.rate_mbps, 0.0)[0] <= 0:
            raise PantheonError(f"rate_mbps: expected positive rates, got {self.rate_mbps}")
        _span("delay_ms", self.delay_ms, 0.0)
        if self.queue_bdp is not None:
            _span("queue_bdp", self.queue_bdp, 0.0)
        if _span("loss", self.loss, 0.0)[1] >= 1:
            raise PantheonError(f"loss: expected probabilities below 1, got {self.loss}")

    def sample(self, rng: np.random.Generator) -> DrawnPath:
        low, high = self.rate_mbps
        rate_mbps = float(math.exp(rng.uniform(math.log(low), math.log(high))))
        delay_ms = float(rng.uniform(*self.delay_ms))
        loss = float(rng.uniform(*self.loss))
        queue_bytes = None
        name = f"{rate_mbps:.3g} Mbit/s, {delay_ms:.3g} ms"
        if self.queue_bdp is not None:
            bdp = float(rng.uniform(*self.queue_bdp))
            # At least two datagrams: a smaller DropTail buffer drops all but a lone sender's packet.
            queue_bytes = max(2 * PATH_BYTES, round(bdp * rate_mbps * 1e6 / 8 * 2 * delay_ms / 1e3))
            name += f", {bdp:.3g} BDP buffer"
        if loss:
            name += f", loss {loss:.3g}"
        return DrawnPath(name, link_options(rate_mbps=rate_mbps, delay_ms=delay_ms, queue_bytes=queue_bytes, loss=loss))


def sampler(paths: PathSampler | str | Sequence[str]) -> PathSampler:
    """`paths` as a sampler: a preset's name or file, or a list of them, stand for `Presets`."""
    if isinstance(paths, str):
        return Presets([paths])
    if isinstance(paths, Sequence):
        return Presets(list(paths))
    return paths
