"""What one run does: which flows, of which schemes, start when, carry what and last how long.

Two ways to say it, both ending in a list of `Flow`s:
- the original Pantheon's: `--flows N --interval S --runtime T` — N flows of one scheme, flow i
  starting i·S seconds in, all stopping at T;
- a scenario file (TOML), which mixes schemes — something the original could not do (paper §7) —
  and workloads (issue 35; docs/harness.md, "Scenarios and workloads"):

      name = "cubic-vs-bbr"        # optional; labels the run
      runtime_s = 30               # optional; defaults to the end of the last flow
      seed = 1                     # optional; the workloads' draws (default 1)
      [[flow]]                     # a bulk flow
      scheme = "cubic"
      start_s = 0
      duration_s = 30
      extra_delay_ms = 30          # optional: this flow's extra one-way delay, each direction
      ecn = true                   # optional: the flow negotiates ECN (default false; `--ecn` sets
                                   # it for every flow: docs/harness.md says how each scheme does)
      [[flow]]                     # a finite flow: one transfer of this many bytes
      scheme = "cubic"
      start_s = 1
      bytes = 1_000_000
      [[workload]]                 # kind: poisson | onoff | cbr | probes (workload.py's models)
      kind = "poisson"
      scheme = "cubic"
      load = 0.5                   # of the bottleneck's rate (the path's uplink, or rate_mbps = R)
      sizes = "websearch"          # a shipped CDF (workloads/*.cdf) or a CDF file
      start_s = 0
      duration_s = 20

A workload is expanded here, once, with the scenario's seed, into the same flows for both drivers:
a Poisson workload is one flow whose transfers are its arrivals; an on/off workload is one bulk
flow per on period; `cbr` is one flow of the unresponsive `cbr` scheme at `rate_mbps` (or following
a rate trace, `rates_mbps = [...]` each for `step_s`), `probes` one of it sending a datagram every
`interval_ms` (crates/cc/src/cbr.rs).
"""
from __future__ import annotations

import math
import random
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pantheon import files, workload
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
MAX_TRANSFERS = 100_000
"""Most transfers in one run (pantheon-sim's bound on a run's senders): ten times the 10 000 short
flows the simulator runs in seconds (docs/sim.md)."""
MAX_EXTRA_DELAY_MS = 10_000.0
"""A flow's extra one-way delay: ten seconds is already beyond any path on Earth."""
ROLES = ("bulk", "finite", "poisson", "onoff", "cbr", "probes")
"""Where a flow came from: a `[[flow]]` without or with `bytes`, or a `[[workload]]` of a kind."""
CBR_SCHEME = "cbr"
"""The scheme of unresponsive traffic and of latency probes (schemes/cbr.toml, crates/cc/src/cbr.rs)."""


class PlanError(PantheonError):
    """The plan cannot run; the message says what to change."""


@dataclass(frozen=True)
class Transfer:
    """A finite transfer: `bytes` delivered to the receiver, begun at `start_s` (seconds since the
    run's start)."""

    start_s: float
    bytes: int


@dataclass(frozen=True)
class Flow:
    """One flow: in the emulator one tunnel pair (one sender and one receiver program), in the
    records one `flow` number. A bulk flow runs at full throttle from its start to its end; a flow
    with `transfers` begins each at its time and stops sending it once it is delivered."""

    scheme: str
    start_s: float
    duration_s: float
    ecn: bool = False
    """The flow's sender negotiates ECN (RFC 3168; its scheme's own way: Scheme.ecn_switch)."""
    transfers: tuple[Transfer, ...] = ()
    """Empty: a bulk flow."""
    extra_delay_ms: float = 0.0
    """Extra one-way propagation delay of this flow alone, in each direction, outside the shared
    bottleneck: its base RTT is 2 · (the path's delay + extra_delay_ms)."""
    cc: str | None = None
    """A crates/cc spec replacing the scheme's own (`cbr:rate_mbps=2`), or None."""
    role: str = "bulk"
    """One of ROLES."""

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

    @property
    def transfers(self) -> int:
        return sum(len(f.transfers) for f in self.flows)

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


PAIR_SEPARATOR = "+"
"""Joins the two schemes of a pair's label: `cubic+bbr` is flow 1 of cubic, flow 2 of bbr."""


def pair(first: str, second: str, runtime_s: float, ecn: bool = False) -> Plan:
    """Two bulk flows sharing the path for the whole run, `first` then `second` (`pantheon harm`:
    every ordered pair's harm comes from these runs and the schemes' runs against themselves)."""
    check_runtime(runtime_s, "--runtime")
    return Plan(f"{first}{PAIR_SEPARATOR}{second}", (Flow(first, 0.0, runtime_s, ecn), Flow(second, 0.0, runtime_s, ecn)),
                runtime_s)


def _seconds(value: object) -> float:
    """A TOML value that must be a number (`true` is not 1 second, nor "5" five)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{value!r} is not a number")
    return float(value)


FLOW_KEYS = ("scheme", "start_s", "duration_s", "bytes", "extra_delay_ms", "ecn")
WORKLOAD_KEYS = {
    "poisson": ("scheme", "load", "sizes", "rate_mbps", "start_s", "duration_s", "extra_delay_ms", "ecn"),
    "onoff": ("scheme", "on_s", "off_s", "distribution", "start_s", "duration_s", "extra_delay_ms", "ecn"),
    "cbr": ("rate_mbps", "rates_mbps", "step_s", "start_s", "duration_s", "extra_delay_ms"),
    "probes": ("interval_ms", "start_s", "duration_s", "extra_delay_ms"),
}
"""Each workload kind's keys besides `kind` (the module's docstring and docs/harness.md say what
each means)."""
MAX_PROBE_INTERVAL_MS = 500.0
"""pantheon-udp takes 1 s without an acknowledgement for a dead path (crates/cc/src/cbr.rs): a
datagram at least every 500 ms keeps a probe flow alive."""
MIN_CBR_RATE_MBPS = 1464 * 8 / MAX_PROBE_INTERVAL_MS / 1e3
"""The same bound as a rate: one 1464-byte datagram every 500 ms, 0.023 Mbit/s."""
MAX_TRACE_STEPS = 10_000
"""Most rates in a cbr workload's trace: a scenario file's (MAX_SCENARIO_BYTES) worth."""
DEFAULT_PROBE_INTERVAL_MS = 100.0
"""A probe every 100 ms (issue 35's figure): ten RTT samples a second at 117 kbit/s."""


class _Table:
    """One `[[flow]]` or `[[workload]]` table and where it is, for one-line errors naming both."""

    def __init__(self, where: str, entry: object, keys: tuple[str, ...]) -> None:
        """`keys`: the table's keys (a workload's `kind` is read before its table is made)."""
        if not isinstance(entry, dict):
            raise PlanError(f"{where}: expected a table of keys, got {entry!r}")
        self.where, self.entry = where, entry
        if unknown := sorted(set(entry) - set(keys)):
            raise PlanError(f"{where}: unknown key '{unknown[0]}' (known: {', '.join(keys)})")

    def error(self, key: str, what: str) -> PlanError:
        return PlanError(f"{self.where}: {key} {what}, got {self.entry[key]!r}" if key in self.entry
                         else f"{self.where}: needs {key} ({what})")

    def has(self, key: str) -> bool:
        return key in self.entry

    def number(self, key: str, what: str, ok: Callable[[float], bool], default: float | None = None) -> float:
        """A finite number for which `ok(value)` holds; `default` when absent (None: required)."""
        if key not in self.entry and default is not None:
            return default
        try:
            value = _seconds(self.entry[key])
        except (KeyError, TypeError):
            raise self.error(key, what) from None
        if not (math.isfinite(value) and ok(value)):
            raise self.error(key, what)
        return value

    def text(self, key: str, what: str, default: str | None = None) -> str:
        value = self.entry.get(key, default)
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, what)
        return value.strip()

    def flag(self, key: str) -> bool:
        value = self.entry.get(key, False)
        if not isinstance(value, bool):
            raise self.error(key, "must be true or false")
        return value

    def extra_delay_ms(self) -> float:
        return self.number("extra_delay_ms", f"must be a number of ms from 0 to {MAX_EXTRA_DELAY_MS:g}",
                           lambda v: 0 <= v <= MAX_EXTRA_DELAY_MS, default=0.0)

    def start_s(self) -> float:
        return self.number("start_s", "must be a number of seconds >= 0", lambda v: v >= 0, default=0.0)

    def duration_s(self, until_s: float | None) -> float:
        """duration_s, or to `until_s` (the run's end) where the table may leave it out."""
        if not self.has("duration_s") and until_s is not None:
            return until_s - self.start_s()
        return self.number("duration_s", "must be a number of seconds > 0", lambda v: v > 0)


def _flow(table: _Table, runtime_s: float | None) -> Flow:
    """A `[[flow]]`: bulk, or with `bytes` one finite transfer (whose duration_s may be left out:
    it may last until the run ends)."""
    scheme = table.text("scheme", "must name a scheme")
    start_s = table.start_s()
    duration_s = table.duration_s(None if table.has("duration_s") else runtime_s)
    transfers: tuple[Transfer, ...] = ()
    if table.has("bytes"):
        size = table.number("bytes", f"must be a whole number of bytes from 1 to {workload.MAX_TRANSFER_BYTES}",
                            lambda v: v == int(v) and 1 <= v <= workload.MAX_TRANSFER_BYTES)
        transfers = (Transfer(start_s, int(size)),)
    return Flow(scheme, start_s, duration_s, ecn=table.flag("ecn"), transfers=transfers,
                extra_delay_ms=table.extra_delay_ms(), role="finite" if transfers else "bulk")


def _flow_table(where: str, entry: object) -> _Table:
    table = _Table(where, entry, FLOW_KEYS)
    if not (table.has("scheme") and table.has("start_s") and (table.has("duration_s") or table.has("bytes"))):
        raise PlanError(f"{where}: needs scheme, start_s and duration_s (or bytes: a finite flow)")
    return table


def _workload(table: _Table, kind: str, runtime_s: float, rng: random.Random, rate_mbps: float | None,
              scenario_dir: Path) -> list[Flow]:
    """The flows of one `[[workload]]` (workload.py's models), drawn from `rng`."""
    start_s, extra_delay_ms = table.start_s(), table.extra_delay_ms()
    if start_s >= runtime_s:
        raise PlanError(f"{table.where}: start_s = {start_s:g} is not before runtime_s = {runtime_s:g}")
    duration_s = min(table.duration_s(runtime_s), runtime_s - start_s)  # nothing begins after the run
    if kind == "cbr":
        return [Flow(CBR_SCHEME, start_s, duration_s, extra_delay_ms=extra_delay_ms, cc=_cbr_spec(table), role="cbr")]
    if kind == "probes":
        interval = table.number("interval_ms", f"must be a number of ms > 0 and at most {MAX_PROBE_INTERVAL_MS:g}",
                                lambda v: 0 < v <= MAX_PROBE_INTERVAL_MS, default=DEFAULT_PROBE_INTERVAL_MS)
        return [Flow(CBR_SCHEME, start_s, duration_s, extra_delay_ms=extra_delay_ms, cc=f"cbr:interval_ms={interval:g}",
                     role="probes")]
    scheme, ecn = table.text("scheme", "must name a scheme"), table.flag("ecn")
    if kind == "onoff":
        on_s = table.number("on_s", "must be a number of seconds > 0 (the mean on period)", lambda v: v > 0)
        off_s = table.number("off_s", "must be a number of seconds > 0 (the mean off period)", lambda v: v > 0)
        distribution = table.text("distribution", "must be exponential or fixed", default="exponential")
        if distribution not in ("exponential", "fixed"):
            raise table.error("distribution", "must be exponential or fixed")
        return [Flow(scheme, on_start_s, on_duration_s, ecn=ecn, extra_delay_ms=extra_delay_ms, role="onoff")
                for on_start_s, on_duration_s in workload.on_periods(rng, on_s, off_s, distribution == "exponential",
                                                                     start_s, duration_s)]
    load = table.number("load", "must be a fraction of the bottleneck's rate in (0, 1)", lambda v: 0 < v < 1)
    if table.has("rate_mbps") or rate_mbps is None:
        rate_mbps = table.number("rate_mbps", "must be the bottleneck's rate in Mbit/s > 0 (the path's uplink rate "
                                 "is not constant: say which rate the load is a fraction of)", lambda v: v > 0)
    try:
        sizes = workload.load_sizes(table.text("sizes", "must name a size distribution (websearch, datamining) or a "
                                               "CDF file"), scenario_dir)
    except workload.WorkloadError as e:
        raise PlanError(f"{table.where}: sizes: {e}") from None
    expected = workload.expected_arrivals(sizes, load, rate_mbps, duration_s)
    if expected > MAX_TRANSFERS:
        raise PlanError(f"{table.where}: about {expected:,.0f} arrivals, more than the {MAX_TRANSFERS:,} a run may "
                        f"have: shorten duration_s or lower load")
    arrivals = workload.poisson_arrivals(rng, sizes, load, rate_mbps, start_s, duration_s)
    transfers = tuple(Transfer(t_s, size) for t_s, size in arrivals)
    return [Flow(scheme, start_s, runtime_s - start_s, ecn=ecn, transfers=transfers, extra_delay_ms=extra_delay_ms,
                 role="poisson")]


def _cbr_spec(table: _Table) -> str:
    """A cbr workload's crates/cc spec: a constant `rate_mbps`, or a rate trace, `rates_mbps` (a
    list) each lasting `step_s`, looping (crates/cc/src/cbr.rs)."""
    rate_rule = f"a rate in Mbit/s of at least {MIN_CBR_RATE_MBPS:g}"
    if not table.has("rates_mbps"):
        if table.has("step_s"):
            raise PlanError(f"{table.where}: step_s goes with rates_mbps, a rate trace")
        rate = table.number("rate_mbps", f"must be {rate_rule} (or give rates_mbps and step_s, a rate trace)",
                            lambda v: v >= MIN_CBR_RATE_MBPS)
        return f"cbr:rate_mbps={rate:g}"
    if table.has("rate_mbps"):
        raise PlanError(f"{table.where}: give rate_mbps (a constant rate) or rates_mbps (a rate trace), not both")
    rates = table.entry["rates_mbps"]
    if not (isinstance(rates, list) and rates and len(rates) <= MAX_TRACE_STEPS
            and all(not isinstance(r, bool) and isinstance(r, int | float) and math.isfinite(r) and r >= MIN_CBR_RATE_MBPS
                    for r in rates)):
        raise table.error("rates_mbps", f"must be a list of 1 to {MAX_TRACE_STEPS} rates, each {rate_rule}")
    step_s = table.number("step_s", "must be a number of seconds > 0 (how long each rate of rates_mbps lasts)",
                          lambda v: v > 0)
    return f"cbr:rates_mbps={'/'.join(f'{float(r):g}' for r in rates)},step_s={step_s:g}"


def _window_end_s(table: _Table) -> float | None:
    """Where a table's own times end, when it says (for the default runtime)."""
    if table.has("duration_s"):
        return table.start_s() + table.number("duration_s", "must be a number of seconds > 0", lambda v: v > 0)
    return None


def scenario(path: Path, rate_mbps: float | None = None) -> Plan:
    """Reads a scenario file, workloads drawn; `rate_mbps` is the path's bottleneck rate (its
    constant uplink rate), which a Poisson workload's load is a fraction of unless it gives its own
    `rate_mbps`. A PlanError names the file, the table and the key that are wrong."""
    try:
        data = tomllib.loads(files.read_small_text(path, MAX_SCENARIO_BYTES))
    except OSError as e:
        raise PlanError(f"{path}: cannot read the scenario: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise PlanError(f"{path}: not valid TOML: {e}") from None
    except ValueError as e:
        raise PlanError(f"{path}: cannot read the scenario: {e}") from None
    if unknown := sorted(set(data) - {"name", "runtime_s", "seed", "flow", "workload"}):
        raise PlanError(f"{path}: unknown key '{unknown[0]}' (known: name, runtime_s, seed, [[flow]], [[workload]])")
    raw_flows, raw_workloads = data.get("flow", []), data.get("workload", [])
    if not isinstance(raw_flows, list) or not isinstance(raw_workloads, list) or not (raw_flows or raw_workloads):
        raise PlanError(f"{path}: no [[flow]] entries (nor [[workload]]); a flow needs scheme, start_s and duration_s")
    if len(raw_flows) > MAX_FLOWS:
        raise PlanError(f"{path}: {len(raw_flows)} flows, more than the {MAX_FLOWS} a run may have")
    flow_tables = [_flow_table(f"{path}: flow {i}", entry) for i, entry in enumerate(raw_flows, start=1)]
    workload_tables = []
    for i, entry in enumerate(raw_workloads, start=1):
        kind = entry.get("kind") if isinstance(entry, dict) else None
        if kind not in WORKLOAD_KEYS:
            raise PlanError(f"{path}: workload {i}: kind must be one of {', '.join(WORKLOAD_KEYS)}, got {kind!r}")
        workload_tables.append((_Table(f"{path}: workload {i} ({kind})", entry, ("kind", *WORKLOAD_KEYS[kind])), str(kind)))
    if "runtime_s" in data:
        try:
            runtime_s = _seconds(data["runtime_s"])
        except TypeError as e:
            raise PlanError(f"{path}: runtime_s must be a number of seconds ({e})") from None
    else:
        ends = [end for table in (*flow_tables, *(t for t, _ in workload_tables)) if (end := _window_end_s(table))]
        if not ends:
            raise PlanError(f"{path}: say runtime_s: no flow or workload gives a duration_s to end the run by")
        runtime_s = max(ends)
    check_runtime(runtime_s, f"{path}: runtime_s")
    seed = data.get("seed", 1)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise PlanError(f"{path}: seed must be a whole number, got {seed!r}")
    rng = random.Random(seed)
    flows = [_flow(table, runtime_s) for table in flow_tables]
    for table, kind in workload_tables:
        flows += _workload(table, kind, runtime_s, rng, rate_mbps, path.parent)
    if len(flows) > MAX_FLOWS:
        raise PlanError(f"{path}: {len(flows)} flows (on/off periods count one each), more than the {MAX_FLOWS} a run "
                        f"may have")
    if (transfers := sum(len(f.transfers) for f in flows)) > MAX_TRANSFERS:
        raise PlanError(f"{path}: {transfers:,} transfers, more than the {MAX_TRANSFERS:,} a run may have")
    if late := next((i for i, f in enumerate(flows, 1) if f.start_s >= runtime_s), None):
        raise PlanError(f"{path}: flow {late} starts after runtime_s = {runtime_s:g}")
    label = str(data.get("name", path.stem))
    return Plan(label, tuple(flows), runtime_s)
