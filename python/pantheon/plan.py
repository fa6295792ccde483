"""What one run does: which flows, of which schemes, start when and last how long.

Two ways to say it, both ending in a list of `Flow`s:
- the original Pantheon's: `--flows N --interval S --runtime T` — N flows of one scheme, flow i
  starting i·S seconds in, all stopping at T;
- a scenario file (TOML), which mixes schemes — something the original could not do (paper §7):

      name = "cubic-vs-bbr"        # optional; labels the run
      runtime_s = 30               # optional; defaults to the end of the last flow
      [[flow]]
      scheme = "cubic"
      start_s = 0
      duration_s = 30
      [[flow]]
      scheme = "bbr"
      start_s = 10
      duration_s = 20
      ecn = true                   # optional: the flow negotiates ECN (default false; `--ecn` sets
                                   # it for every flow: docs/harness.md says how each scheme does)
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from pantheon import files
from pantheon.errors import PantheonError

MAX_RUNTIME_S = 86_400.0
"""Longest run: a day (Pantheon's runs last 30 s; a longer one is a typo, and 1e300 ran forever).
pantheon-sim has the same bound (crates/sim/src/scenario.rs)."""
MAX_FLOWS = 100
"""Most flows in one run, emulated or simulated (the same experiment). Over the emulator each is a
scheme's sender and receiver through its own tunnel pair: setting one up took 0.36 s on a 2-core
machine (issue 18: `--flows 1000` spent minutes before the first packet), and 50 flows there
already started seconds late."""
MAX_SCENARIO_BYTES = 1 << 20
"""A scenario of MAX_FLOWS flows is a few kB; a bigger file is not one (it was read whole)."""


class PlanError(PantheonError):
    """The plan cannot run; the message says what to change."""


@dataclass(frozen=True)
class Flow:
    scheme: str
    start_s: float
    duration_s: float
    ecn: bool = False
    """The flow's sender negotiates ECN (RFC 3168; its scheme's own way: Scheme.ecn_switch)."""

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass(frozen=True)
class Plan:
    label: str
    """Names the runs in the data dir: the scheme, or the scenario's name."""
    flows: tuple[Flow, ...]
    runtime_s: float

    @property
    def schemes(self) -> list[str]:
        return sorted({f.scheme for f in self.flows})

    def with_ecn(self) -> Plan:
        """The plan with every flow negotiating ECN (`--ecn`)."""
        return replace(self, flows=tuple(replace(f, ecn=True) for f in self.flows))


def check_runtime(runtime_s: float, name: str) -> None:
    """PlanError unless `runtime_s` (the value of `name`) is a run's length: positive, finite, at
    most MAX_RUNTIME_S."""
    # NaN compares false with everything, so "<= 0" alone would let it through (and into JSON).
    if not math.isfinite(runtime_s) or not 0 < runtime_s <= MAX_RUNTIME_S:
        raise PlanError(f"{name} must be a positive, finite number of seconds up to {MAX_RUNTIME_S:g} (one day), "
                        f"got {runtime_s:g}")


def uniform(scheme: str, flows: int, interval_s: float, runtime_s: float, ecn: bool = False) -> Plan:
    check_runtime(runtime_s, "--runtime")
    if not 1 <= flows <= MAX_FLOWS:
        raise PlanError(f"--flows must be from 1 to {MAX_FLOWS}, got {flows}")
    if not math.isfinite(interval_s) or interval_s < 0:
        raise PlanError(f"--interval must be a finite number of seconds, not negative, got {interval_s:g}")
    if (flows - 1) * interval_s >= runtime_s:
        raise PlanError(
            f"the last of {flows} flows would start at {(flows - 1) * interval_s:g} s, "
            f"not before the run ends at {runtime_s:g} s: lower --interval or raise --runtime"
        )
    return Plan(scheme, tuple(Flow(scheme, i * interval_s, runtime_s - i * interval_s, ecn) for i in range(flows)),
                runtime_s)


def _seconds(value: object) -> float:
    """A TOML value that must be a number (`true` is not 1 second, nor "5" five)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{value!r} is not a number")
    return float(value)


def scenario(path: Path) -> Plan:
    """Reads a scenario file; a PlanError names the file and what is wrong."""
    try:
        data = tomllib.loads(files.read_small_text(path, MAX_SCENARIO_BYTES))
    except OSError as e:
        raise PlanError(f"{path}: cannot read the scenario: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise PlanError(f"{path}: not valid TOML: {e}") from None
    except ValueError as e:
        raise PlanError(f"{path}: cannot read the scenario: {e}") from None
    raw = data.get("flow")
    if not isinstance(raw, list) or not raw:
        raise PlanError(f"{path}: no [[flow]] entries; each needs scheme, start_s and duration_s")
    flows = []
    for i, entry in enumerate(raw, start=1):
        try:
            flow = Flow(str(entry["scheme"]), _seconds(entry["start_s"]), _seconds(entry["duration_s"]))
        except (KeyError, TypeError, ValueError) as e:
            raise PlanError(f"{path}: flow {i}: needs scheme, start_s and duration_s ({type(e).__name__}: {e})") from None
        if unknown := sorted(set(entry) - {"scheme", "start_s", "duration_s", "ecn"}):
            raise PlanError(f"{path}: flow {i}: unknown key '{unknown[0]}' (known: scheme, start_s, duration_s, ecn)")
        if not isinstance(ecn := entry.get("ecn", False), bool):
            raise PlanError(f"{path}: flow {i}: ecn must be true or false, got {ecn!r}")
        flow = replace(flow, ecn=ecn)
        if not (math.isfinite(flow.start_s) and math.isfinite(flow.duration_s)) or flow.start_s < 0 or flow.duration_s <= 0:
            raise PlanError(f"{path}: flow {i}: start_s must be finite and >= 0, duration_s finite and > 0")
        flows.append(flow)
    try:
        runtime_s = _seconds(data.get("runtime_s", max(f.end_s for f in flows)))
    except (TypeError, ValueError) as e:
        raise PlanError(f"{path}: runtime_s must be a number of seconds ({e})") from None
    check_runtime(runtime_s, f"{path}: runtime_s")
    if len(flows) > MAX_FLOWS:
        raise PlanError(f"{path}: {len(flows)} flows, more than the {MAX_FLOWS} a run may have")
    if any(f.start_s >= runtime_s for f in flows):
        raise PlanError(f"{path}: a flow starts after runtime_s = {runtime_s:g}")
    label = str(data.get("name", path.stem))
    return Plan(label, tuple(flows), runtime_s)
