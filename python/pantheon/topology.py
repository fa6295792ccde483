"""A small network: links and a route per flow, as the simulator runs it (docs/sim.md, "Topologies";
crates/sim/src/topology.rs) and the league names it (docs/league.md), read from a topology file:

    description = "parking lot: two 12 Mbit/s hops, a long flow over both"
    routes = [["hop1", "hop2"], ["hop1"], ["hop2"]]   # flow i's links, in its data's order
    [[link]]
    name = "hop1"
    path = ["--delay", "10", "--uplink-rate", "12", "--uplink-queue-bytes", "60000"]

The simulator validates a link's options (they are the emulator's); this module reads the few it
needs to know what a flow should get: each link's data rate (`--uplink-rate`, `--uplink-poisson`'s
mean, an `--uplink-trace`'s opportunities, pantheon-emu's 12 Mbit/s when none is given,
`unlimited`) and its delay (`--delay`, each way).

**What a flow should get** is its max-min fair share (Bertsekas and Gallager, *Data Networks*, 2nd
ed., 1992, §6.5.2: "progressive filling"): raise every flow's rate together; when a link is full,
the flows crossing it keep their rate and the others go on rising. On one link that is the link's
rate split evenly; in a parking lot of equal hops every flow gets half a hop, the long one too,
which a scheme whose throughput falls with its round trip or its number of queues does not give
it. A trace's rate is its opportunities within the stretch asked for, on the link's clock: the
run's time plus the lead the link's clock has over the flows (crates/sim/src/link_clock.rs;
LINK_LEAD_MS), as the league's rate steps are written.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pantheon import files
from pantheon.calibrate.trace import LINK_LEAD_MS
from pantheon.errors import PantheonError
from pantheon.repository import ROOT
from pantheon.toml_config import top_table

TOPOLOGIES_DIR = ROOT / "data" / "topologies"
"""The shipped topologies, `NAME.toml`."""
MAX_TOPOLOGY_BYTES = 1 << 20
DEFAULT_RATE_MBPS = 12.0
"""pantheon-emu's rate when a direction names none."""
OPPORTUNITY_BITS = 1500 * 8
KEYS = {"description", "routes", "log_link", "link"}
LINK_SEED_STEP = 0x9E37_79B9_7F4A_7C15
"""pantheon-sim's step between the seeds of neighbouring links (crates/sim/src/topology.rs)."""


class TopologyError(PantheonError):
    """A topology file that cannot be used: one line naming the file and what is wrong."""


@dataclass(frozen=True)
class Link:
    name: str
    path: tuple[str, ...]
    """The emulator's options, trace files as absolute paths."""

    def _option(self, flag: str) -> str | None:
        return next((self.path[i + 1] for i in range(len(self.path) - 1) if self.path[i] == flag), None)

    @property
    def delay_ms(self) -> float:
        return float(self._option("--delay") or 0.0)

    @property
    def trace(self) -> Path | None:
        return None if (name := self._option("--uplink-trace")) is None else Path(name)

    def rate_mbps(self, start_s: float = 0.0, end_s: float | None = None) -> float:
        """The data direction's mean rate over [start_s, end_s) of the run (inf: unlimited;
        end_s None: a trace's whole period)."""
        if (trace := self.trace) is not None:
            return _trace_rate_mbps(str(trace), start_s, end_s)
        if (poisson := self._option("--uplink-poisson")) is not None:
            return float(poisson)
        rate = self._option("--uplink-rate")
        if rate == "unlimited":
            return math.inf
        return DEFAULT_RATE_MBPS if rate is None else float(rate)


@dataclass(frozen=True)
class Topology:
    name: str
    description: str
    routes: tuple[tuple[str, ...], ...]
    links: tuple[Link, ...]
    log_link: str | None = None

    def link(self, name: str) -> Link:
        return next(link for link in self.links if link.name == name)

    def base_delay_ms(self, flow: int) -> float:
        """Flow `flow`'s one-way propagation delay: its route's links' delays."""
        return sum(self.link(name).delay_ms for name in self.routes[flow])

    def fair_shares_mbps(self, start_s: float = 0.0, end_s: float | None = None) -> list[float]:
        """Each flow's max-min fair share over [start_s, end_s) (module header); inf for a flow
        whose every link is unlimited."""
        rates = {link.name: link.rate_mbps(start_s, end_s) for link in self.links}
        return max_min_fair(rates, self.routes)

    def fields(self, path_of: dict[Path, str] | None = None) -> dict[str, Any]:
        """The topology as a batch job's `topology` (docs/sim.md), each trace file replaced by
        `path_of[file]` where given."""
        path_of = path_of or {}
        links = [{"name": link.name,
                  "path": [path_of.get(Path(word), word) if i and link.path[i - 1].endswith("-trace") else word
                           for i, word in enumerate(link.path)]} for link in self.links]
        out: dict[str, Any] = {"routes": [list(r) for r in self.routes], "link": links}
        if self.log_link is not None:
            out["log_link"] = self.log_link
        return out

    def traces(self) -> list[Path]:
        """The trace files its links read, in the order they are named."""
        found = [Path(link.path[i + 1]) for link in self.links for i in range(len(link.path) - 1)
                 if link.path[i].endswith("-trace")]
        return list(dict.fromkeys(found))


def link_seed(seed: int, k: int) -> int:
    """The seed pantheon-sim gives link k of a run seeded `seed` (topology.rs's `link_seed`), which
    an emulator standing for that link takes (league/chain.py)."""
    return (seed + k * LINK_SEED_STEP) % 2**64


def max_min_fair(capacities: dict[str, float], routes: Sequence[Sequence[str]]) -> list[float]:
    """Progressive filling (module header): each route's max-min fair rate over links of these
    capacities (inf: unlimited)."""
    share = [math.nan] * len(routes)
    left = dict(capacities)
    rising = set(range(len(routes)))
    while rising:
        crossing = {name: [f for f in rising if name in routes[f]] for name in left}
        levels = {name: left[name] / len(flows) for name, flows in crossing.items() if flows}
        if not levels or math.isinf(level := min(levels.values())):
            for f in rising:
                share[f] = math.inf
            break
        full = [name for name, value in levels.items() if value == level]
        for f in {f for name in full for f in crossing[name]}:
            share[f] = level
            rising.discard(f)
            for name in routes[f]:
                left[name] -= level
    return share


@functools.lru_cache(maxsize=16)
def _trace_ms(path: str) -> np.ndarray:
    try:
        text = files.read_small_text(Path(path), 256 << 20)
        times = np.array([int(line) for line in text.split()], dtype=np.int64)
    except (OSError, ValueError) as e:
        raise TopologyError(f"{path}: cannot read the trace ({e})") from None
    if times.size == 0 or times[-1] <= 0 or np.any(np.diff(times) < 0):
        raise TopologyError(f"{path}: not a Mahimahi trace (ms timestamps, non-decreasing, the last above 0)")
    return times


def _trace_rate_mbps(path: str, start_s: float, end_s: float | None) -> float:
    times = _trace_ms(path)
    period = int(times[-1])
    if end_s is None:
        return times.size * OPPORTUNITY_BITS / (period * 1e3)

    def passed(t_ms: float) -> int:  # opportunities at or before t_ms of the looping trace
        loops, into = divmod(t_ms, period)
        return int(loops) * times.size + int(np.searchsorted(times, into, side="right"))

    if end_s <= start_s:
        return _trace_rate_mbps(path, 0.0, None)
    count = passed(end_s * 1e3 + LINK_LEAD_MS) - passed(start_s * 1e3 + LINK_LEAD_MS)
    return count * OPPORTUNITY_BITS / ((end_s - start_s) * 1e6)


def shipped() -> list[str]:
    return sorted(p.stem for p in TOPOLOGIES_DIR.glob("*.toml"))


def _strings(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TopologyError(f"{where} must be a list of strings")
    return value


def parse(text: str, source: Path, name: str) -> Topology:
    """The topology a file's text declares (trace files relative to `source`'s folder)."""
    top = top_table(text, str(source), KEYS, TopologyError)
    tables = top.get("link")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise TopologyError(f"{source}: no [[link]]: a topology needs at least one link")
    links = []
    for k, table in enumerate(tables, 1):
        if unknown := sorted(set(table) - {"name", "path"}):
            raise TopologyError(f"{source}: link {k}: unknown key {unknown[0]!r} (known: name, path)")
        if not isinstance(link_name := table.get("name"), str) or not link_name:
            raise TopologyError(f"{source}: link {k}: name is missing")
        given = _strings(table.get("path", []), f"{source}: link {link_name}: path")
        # `--flag=value` as two words, as the emulator's parser takes either.
        words = [part for w in given for part in (w.split("=", 1) if w.startswith("--") and "=" in w else [w])]
        words = [str(source.parent / w) if i and words[i - 1].endswith("-trace") else w for i, w in enumerate(words)]
        link = Link(link_name, tuple(words))
        try:
            link.rate_mbps()
            _ = link.delay_ms
        except ValueError as e:
            raise TopologyError(f"{source}: link {link_name}: {e}") from None
        links.append(link)
    names = [link.name for link in links]
    if len(set(names)) != len(names):
        raise TopologyError(f"{source}: a link name is used twice")
    routes_value = top.get("routes")
    if not isinstance(routes_value, list) or not routes_value:
        raise TopologyError(f"{source}: routes is missing: a list of routes, one per flow")
    routes = []
    for i, route in enumerate(routes_value):
        hops = _strings(route, f"{source}: routes[{i}]")
        if not hops:
            raise TopologyError(f"{source}: routes[{i}] is empty")
        if len(set(hops)) != len(hops):
            raise TopologyError(f"{source}: routes[{i}] names a link twice")
        if unknown_hops := [h for h in hops if h not in names]:
            raise TopologyError(f"{source}: routes[{i}] names {unknown_hops[0]!r}, which is no link")
        routes.append(tuple(hops))
    log_link = top.get("log_link")
    if log_link is not None and log_link not in names:
        raise TopologyError(f"{source}: log_link {log_link!r} is not a link")
    description = top.get("description", "")
    return Topology(name, str(description), tuple(routes), tuple(links), log_link)


@functools.lru_cache(maxsize=64)
def load(name: str) -> Topology:
    """A shipped topology by name (data/topologies/NAME.toml) or a topology file by path."""
    path = Path(name) if name.endswith(".toml") else TOPOLOGIES_DIR / f"{name}.toml"
    if not path.is_file():
        raise TopologyError(f"no topology {name!r}: shipped ones are {', '.join(shipped())}, or give a file NAME.toml")
    try:
        text = files.read_small_text(path, MAX_TOPOLOGY_BYTES)
    except (OSError, ValueError) as e:
        raise TopologyError(f"{path}: cannot read the topology ({e})") from None
    return parse(text, path.resolve(), name if not name.endswith(".toml") else path.stem)
