"""The search space: the paper's five emulator parameters (Yan et al., ATC 2018, §4) — bottleneck
rate, one-way propagation delay, DropTail buffer, i.i.d. loss, constant or Poisson delivery — and
their bounds, derived from the data unless the user gives them.

Derived bounds (Observed, targets.py):
    rate_mbps     from the lowest throughput of a run to twice the highest (log scale)
    delay_ms      from 0 to the smallest median one-way delay of a run (every delay seen is
                  propagation plus queueing and serialisation, so the propagation is below each)
    buffer_bytes  from one packet (1500 bytes) to what twice the highest rate drains in twice the
                  highest p95 delay seen (log scale): a deeper buffer than the data ever filled
                  changes nothing
    loss          from 0 (LOSS_FLOOR) to twice the smallest mean loss rate of a scheme, at least 1% (a scheme's
                  losses are the path's random ones plus its own queue's drops)
    delivery      constant or Poisson
A user's bound that leaves out what the data shows (a rate below a mean throughput, a delay above
every median delay, a loss above every loss rate) is a one-line error.

A candidate is a preset (presets.py) on the microsecond clock the simulator runs: the calibrated
presets' shape, the uplink's buffer and loss, the downlink (acknowledgements) at the same rate with
the same delivery and an infinite queue.

The richer model (`--model trace`, trace.py) is a third kind beside constant and Poisson: the
uplink delivers on a trace inferred from the data, scaled by `rate_scale` (RATE_SCALE: the
inference misses the opportunities no packet used, a few percent), with the same delay, buffer and
loss parameters; the downlink at the scaled trace's mean rate, constant, infinite.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from pantheon import presets
from pantheon.calibrate.targets import CalibrationError, Observed
from pantheon.calibrate.trace import DeliveryTrace

MIN_RATE_MBPS, MAX_RATE_MBPS = 0.001, 1_000_000.0
"""The rates the link model accepts (crates/link/src/bounds.rs): a derived bound is clamped into
them (a run that moved nothing has throughput 0), a user's bound outside them is refused."""
PACKET_BYTES = 1500
"""One full packet on the path: the smallest useful buffer."""
MIN_LOSS_BOUND = 0.01
LOSS_FLOOR = 1e-6
"""The loss is searched on a log scale (a path's loss spans decades, and 1e-4 and 1e-3 differ
for a loss-based scheme as much as 1e-3 and 1e-2), which cannot reach 0: a draw at this floor is
taken as no loss (a 30 s run at 100 Mbit/s sends 250 000 packets; this loses one in four runs)."""
TRACE = "trace"
"""The trace model's kind, beside presets.DELIVERIES."""
RATE_SCALE = (0.8, 1.25)
"""The trace's rate scale is searched within these (log scale): the inferred trace is short of the
truth's opportunities by those it could not see (on the T-Mobile trace path, 3.7%: unused ones at
the ends of busy periods), and a fill at a neighbour's rate can be off either way."""


@dataclass(frozen=True)
class Range:
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.low:g}:{self.high:g}"


def parse_range(text: str, option: str) -> Range:
    """LOW:HIGH, both numbers, 0 <= LOW <= HIGH."""
    try:
        low, high = (float(part) for part in text.split(":"))
    except ValueError:
        raise CalibrationError(f"{option} must be LOW:HIGH (two numbers), got '{text}'") from None
    if not (math.isfinite(low) and math.isfinite(high) and 0 <= low <= high):
        raise CalibrationError(f"{option} must have 0 <= LOW <= HIGH, got '{text}'")
    return Range(low, high)


@dataclass(frozen=True)
class Bounds:
    rate_mbps: Range
    delay_ms: Range
    buffer_bytes: Range | None
    """None: no buffer parameter, an infinite queue (the ablation's first steps, ablation.py)."""
    loss: Range
    deliveries: tuple[str, ...]
    """Some of presets.DELIVERIES."""

    def describe(self) -> str:
        buffer = f"{self.buffer_bytes} B" if self.buffer_bytes else "infinite"
        rate = (f"rate scale {RATE_SCALE[0]:g}:{RATE_SCALE[1]:g} of the inferred trace" if self.deliveries == (TRACE,)
                else f"rate {self.rate_mbps} Mbit/s")
        return (f"{rate}, delay {self.delay_ms} ms, buffer {buffer}, "
                f"loss {self.loss}, delivery {'/'.join(self.deliveries)}")


def bounds(observed: Observed, *, rate_mbps: Range | None = None, delay_ms: Range | None = None,
           buffer_bytes: Range | None = None, loss: Range | None = None,
           deliveries: tuple[str, ...] = presets.DELIVERIES) -> Bounds:
    """The data's bounds, each replaced by the user's where given; a CalibrationError when a
    user's bound leaves out what the data shows."""
    derived = Bounds(
        rate_mbps=Range(max(MIN_RATE_MBPS, observed.min_throughput_mbps), max(MIN_RATE_MBPS, 2 * observed.max_throughput_mbps)),
        delay_ms=Range(0.0, observed.min_median_delay_ms),
        buffer_bytes=Range(PACKET_BYTES, max(2.0 * PACKET_BYTES, 2 * observed.max_p95_delay_ms / 1e3
                                             * 2 * observed.max_throughput_mbps * 1e6 / 8)),
        loss=Range(0.0, min(0.5, max(MIN_LOSS_BOUND, 2 * observed.min_mean_loss))),
        deliveries=deliveries)
    if rate_mbps and rate_mbps.high < observed.max_mean_throughput_mbps:
        raise CalibrationError(f"--rate-mbps {rate_mbps} leaves out the data: a scheme's mean throughput is "
                               f"{observed.max_mean_throughput_mbps:.3g} Mbit/s, so the rate is at least that")
    if rate_mbps and not MIN_RATE_MBPS <= rate_mbps.low <= rate_mbps.high <= MAX_RATE_MBPS:
        raise CalibrationError(f"--rate-mbps {rate_mbps}: the link model's rates are from {MIN_RATE_MBPS:g} to "
                               f"{MAX_RATE_MBPS:g} Mbit/s")
    if delay_ms and delay_ms.low > observed.min_median_delay_ms:
        raise CalibrationError(f"--delay-ms {delay_ms} leaves out the data: a run's median one-way delay is "
                               f"{observed.min_median_delay_ms:.3g} ms, so the propagation delay is below that")
    if buffer_bytes and buffer_bytes.low < 1:
        raise CalibrationError(f"--buffer-bytes {buffer_bytes}: a DropTail buffer holds at least one byte")
    if loss and (loss.high > 1 or loss.low > observed.max_loss):
        raise CalibrationError(f"--loss {loss} leaves out the data: the highest loss rate of a run is "
                               f"{observed.max_loss:.3g} (and a loss probability is at most 1)")
    return Bounds(rate_mbps or derived.rate_mbps, delay_ms or derived.delay_ms, buffer_bytes or derived.buffer_bytes,
                  loss or derived.loss, deliveries)


@dataclass(frozen=True)
class Candidate:
    rate_mbps: float
    """The constant rate, or the Poisson process's mean; with a trace, the scaled trace's mean."""
    delay_ms: float
    buffer_bytes: int | None
    """None: an infinite queue."""
    loss: float
    poisson: bool
    trace: DeliveryTrace | None = None
    """The trace model's inferred trace (trace.py), delivered `rate_scale` times as often."""
    rate_scale: float = 1.0

    @property
    def kind(self) -> str:
        return TRACE if self.trace is not None else "poisson" if self.poisson else "constant"

    def preset(self, name: str = "calibrated", description: str = "") -> presets.Preset:
        if self.trace is not None:
            uplink = presets.Direction(trace_ms=self.trace.scaled(self.rate_scale), queue_bytes=self.buffer_bytes,
                                       loss=self.loss)
            return presets.Preset(name, "calibrated", self.delay_ms, uplink, presets.Direction(self.rate_mbps),
                                  timing="us", description=description)
        return presets.Preset(name, "calibrated", self.delay_ms,
                              presets.Direction(self.rate_mbps, self.poisson, queue_bytes=self.buffer_bytes, loss=self.loss),
                              presets.Direction(self.rate_mbps, self.poisson), timing="us", description=description)

    def params(self) -> dict:
        """The five parameters (as before the trace model, so a refining study's start reads back);
        with a trace also the model, the scale and what the trace is."""
        five = {k: v for k, v in asdict(self).items() if k not in ("trace", "rate_scale")}
        if self.trace is None:
            return five
        return {**five, "model": TRACE, "rate_scale": self.rate_scale, "trace": self.trace.summary()}

    def describe(self) -> str:
        if self.trace is not None:
            rate = (f"trace of {self.trace.source} x{self.rate_scale:.4g} (mean {self.rate_mbps:.4g} Mbit/s, "
                    f"{self.trace.period_ms / 1000:g} s looped)")
        else:
            rate = f"rate {self.rate_mbps:.4g} Mbit/s ({'Poisson' if self.poisson else 'constant'})"
        return (f"{rate}, delay {self.delay_ms:.4g} ms, buffer {f'{self.buffer_bytes} B' if self.buffer_bytes else 'infinite'}, "
                f"loss {self.loss:.3g}")


def traced(trace: DeliveryTrace, rate_scale: float, delay_ms: float, buffer_bytes: int | None, loss: float) -> Candidate:
    """A candidate of the trace model."""
    return Candidate(float(f"{trace.mean_mbps * rate_scale:.6g}"), delay_ms, buffer_bytes, loss, False, trace, rate_scale)


def suggest(trial, space: Bounds, trace: DeliveryTrace | None = None) -> Candidate:
    """A candidate drawn by an Optuna trial (optuna.Trial: ask/tell) within `space`, rounded to what
    the emulator's options carry (6 significant digits, whole bytes). Each delivery kind has
    parameters of its own (`constant.rate_mbps`, ...), so the sampler models each kind's trials
    apart (TPESampler(group=True)): the best buffer for constant delivery says little about the
    best for Poisson. The trace kind (`trace`, given) draws a rate scale in place of the rate."""
    delivery = trial.suggest_categorical("delivery", list(space.deliveries))
    rate_name = "rate_scale" if delivery == TRACE else "rate_mbps"
    low, high = RATE_SCALE if delivery == TRACE else (space.rate_mbps.low, space.rate_mbps.high)
    rate = trial.suggest_float(f"{delivery}.{rate_name}", low, high, log=True)
    delay = trial.suggest_float(f"{delivery}.delay_ms", space.delay_ms.low, space.delay_ms.high)
    buffer = None if space.buffer_bytes is None else trial.suggest_int(
        f"{delivery}.buffer_bytes", int(space.buffer_bytes.low), int(space.buffer_bytes.high), log=True)
    loss = trial.suggest_float(f"{delivery}.loss", max(LOSS_FLOOR, space.loss.low), max(LOSS_FLOOR, space.loss.high),
                               log=True)
    return from_params({"delivery": delivery, f"{delivery}.{rate_name}": rate, f"{delivery}.delay_ms": delay,
                        f"{delivery}.buffer_bytes": buffer, f"{delivery}.loss": loss}, trace)


def from_params(params: dict, trace: DeliveryTrace | None = None) -> Candidate:
    """The candidate of a trial's parameters (as `suggest` draws them)."""
    kind = params["delivery"]
    loss, buffer = params[f"{kind}.loss"], params.get(f"{kind}.buffer_bytes")
    loss = 0.0 if loss <= LOSS_FLOOR else float(f"{loss:.6g}")
    buffer = None if buffer is None else round(buffer)
    delay = float(f"{params[f'{kind}.delay_ms']:.6g}")
    if kind == TRACE:
        if trace is None:
            raise CalibrationError("a trace model's trial needs its inferred trace")
        return traced(trace, float(f"{params[f'{kind}.rate_scale']:.6g}"), delay, buffer, loss)
    return Candidate(float(f"{params[f'{kind}.rate_mbps']:.6g}"), delay, buffer, loss, kind == "poisson")


def refine_point(start: Candidate, space: Bounds) -> dict[str, float]:
    """Where the refining phase (search.Refine) starts: `start`, within the bounds, for the
    parameters that vary (Optuna leaves a one-value range out of CMA-ES's space)."""
    def inside(value: float, r: Range, floor: float = 0.0) -> float:
        return min(max(value, r.low, floor), max(r.high, floor))

    rate = (("rate_scale", (inside(start.rate_scale, Range(*RATE_SCALE)), Range(*RATE_SCALE), 0.0))
            if start.trace is not None else ("rate_mbps", (inside(start.rate_mbps, space.rate_mbps), space.rate_mbps, 0.0)))
    point = {rate[0]: rate[1],
             "delay_ms": (inside(start.delay_ms, space.delay_ms), space.delay_ms, 0.0),
             "loss": (inside(start.loss, space.loss, LOSS_FLOOR), space.loss, LOSS_FLOOR)}
    if space.buffer_bytes is not None and start.buffer_bytes is not None:
        point["buffer_bytes"] = (inside(float(start.buffer_bytes), space.buffer_bytes), space.buffer_bytes, 0.0)
    return {name: value for name, (value, r, floor) in point.items() if max(r.low, floor) < max(r.high, floor)}


def refined(trial, space: Bounds, kind: str, trace: DeliveryTrace | None = None) -> Candidate:
    """A candidate of the refining phase: one delivery kind, the other four parameters on the
    scales `suggest` uses (the buffer continuous, for CMA-ES, rounded to bytes)."""
    if kind == TRACE:
        trial.suggest_float("rate_scale", *RATE_SCALE, log=True)
    else:
        trial.suggest_float("rate_mbps", space.rate_mbps.low, space.rate_mbps.high, log=True)
    trial.suggest_float("delay_ms", space.delay_ms.low, space.delay_ms.high)
    if space.buffer_bytes is not None:
        trial.suggest_float("buffer_bytes", space.buffer_bytes.low, space.buffer_bytes.high, log=True)
    trial.suggest_float("loss", max(LOSS_FLOOR, space.loss.low), max(LOSS_FLOOR, space.loss.high), log=True)
    return from_refined(trial.params, kind, trace)


def from_refined(params: dict, kind: str, trace: DeliveryTrace | None = None) -> Candidate:
    """The candidate of a refining trial's parameters."""
    return from_params({"delivery": kind, **{f"{kind}.{name}": value for name, value in params.items()}}, trace)
