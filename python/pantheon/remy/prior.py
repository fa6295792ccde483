"""The prior: what the designer believes about the networks a RemyCC will meet, as a TOML file
(Winstein & Balakrishnan, "TCP ex Machina", SIGCOMM 2013, §3.1 "Prior assumptions"; Sivaraman et
al., "An experimental study of the learnability of congestion control", SIGCOMM 2014, §3).

    delta = 1.0                     # the objective's weight of delay (2013 §3.2)

    [link]
    rate_mbps = [3.16, 316.0]       # the bottleneck's rate, drawn uniformly ...
    rate_draw = "uniform"           # ... or "log-uniform" (as many octaves low as high)
    min_rtt_ms = [150.0, 150.0]     # propagation round trip, drawn uniformly
    buffer = "infinite"             # or buffer_bytes = [lo, hi], or buffer_bdp = [lo, hi]

    [traffic]
    senders = [1, 2]                # degree of multiplexing, an integer drawn uniformly
    mean_on_s = 1.0                 # each sender is on, then off, for exponential times
    mean_off_s = 1.0                # with these means (2013 §3.1's on/off model)

    [training]                      # optional: the optimiser's effort (the command line overrides)
    runtime_s = 10.0                # simulated seconds of each network per evaluation
    networks = 16                   # networks drawn per evaluation (Remy's 16)
    generations = 2                 # stop after this many generations (absent: when one improves nothing)
    pattern = "product"             # the local search's candidates: "product" (Remy's) or "axes"
    split = "uses"                  # the rule split: the most used (Remy's) or "network-share"

    [search.window_increment]       # optional: the optimiser's steps (optimise.py), per axis
    min = 0
    max = 256
    min_change = 1
    max_change = 32
    multiplier = 4
    default = 1

A range is `[lo, hi]`; `lo == hi` fixes the value. Remy's evaluator draws each network's rate,
RTT and sender count uniformly and independently (its 2014 code). For priors whose rates span
orders of magnitude a uniform draw leaves the low octaves almost empty (3.16–316 Mbit/s uniform
puts 1% of networks under 6.3 Mbit/s); the learnability study's link-rate experiment stepped the
rate geometrically across its range instead (that study's evaluator), which "log-uniform" draws
at random: as many networks in each octave.

Every mistake is one line naming the file and the key (`PriorError`, exit 2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from pantheon.errors import PantheonError
from pantheon.toml_config import top_table

TOP_KEYS = {"delta", "link", "traffic", "training", "search"}
TRAINING_KEYS = {"runtime_s", "networks", "generations", "pattern", "split"}
LINK_KEYS = {"rate_mbps", "rate_draw", "min_rtt_ms", "buffer", "buffer_bytes", "buffer_bdp"}
TRAFFIC_KEYS = {"senders", "mean_on_s", "mean_off_s"}
SETTING_KEYS = {"min", "max", "min_change", "max_change", "multiplier", "default"}
RATE_DRAWS = ("uniform", "log-uniform")
PATTERNS = ("product", "axes")
"""The local search's candidates (optimise.candidates): every combination of the axes'
alternatives (Remy's), or each axis's alternatives with the other two held (a compass search)."""
SPLITS = ("uses", "network-share")
"""Which rule a generation's end splits: the most used, every acknowledgement counting (Remy's), or
the one with the largest sum over the networks of its share of each network's uses
(evaluation.Evaluation.network_shares)."""
MAX_SENDERS = 64
MAX_NETWORKS = 10_000
DEFAULT_NETWORKS = 16
"""Networks per evaluation: Remy's evaluator's 16 (four anchors and twelve drawn)."""
MAX_RUNTIME_S = 3600.0
MAX_PRIOR_BYTES = 1 << 16


class PriorError(PantheonError):
    """A prior file that cannot be used: one line naming the file and the key."""


@dataclass(frozen=True)
class Range:
    """A closed interval [lo, hi] of one quantity (lo == hi: a fixed value)."""
    lo: float
    hi: float


@dataclass(frozen=True)
class Setting:
    """How the optimiser searches one axis of the action (Remy's OptimizationSetting): from the
    current value v, the candidates v ± c for c = min_change, min_change·multiplier, ... up to
    max_change, those within [min, max]; `default` is the root rule's value."""
    min: float
    max: float
    min_change: float
    max_change: float
    multiplier: float
    default: float

    def alternatives(self, value: float, decimals: int | None = 4) -> list[float]:
        """`value` first, then each change up and down (Remy's order), rounded to `decimals`
        (Remy keeps 4 decimals of the multiple and the intersend time), repeats left out."""
        found = [value]
        change = self.min_change
        while change <= self.max_change * (1 + 1e-12):
            for proposed in (value + change, value - change):
                rounded = proposed if decimals is None else round(proposed, decimals)
                if self.min <= rounded <= self.max and rounded not in found:
                    found.append(rounded)
            change *= self.multiplier
        return found


@dataclass(frozen=True)
class Search:
    """The action space's steps. The defaults are Remy's (its 2013 code's OptimizationSettings:
    window increment ±1, ±4, ±16 packets within 0..256; window multiple ±0.01, ±0.04, ±0.16 within
    0..1; intersend ±0.05, ±0.2, ±0.8 ms within 0.25..3 ms), the root rule's action (1, 1.0, 3 ms):
    a window that grows by one packet per ack, paced at most one packet per 3 ms."""
    window_increment: Setting = Setting(0, 256, 1, 32, 4, 1)
    window_multiple: Setting = Setting(0, 1, 0.01, 0.5, 4, 1)
    intersend_ms: Setting = Setting(0.25, 3, 0.05, 1, 4, 3)


@dataclass(frozen=True)
class Prior:
    rate_mbps: Range
    min_rtt_ms: Range
    senders: tuple[int, int]
    mean_on_s: float
    mean_off_s: float
    rate_draw: str = "uniform"
    buffer_bytes: Range | None = None
    """A DropTail buffer drawn in this range; None with `buffer_bdp` None too: infinite (Remy's 2014)."""
    buffer_bdp: Range | None = None
    """A DropTail buffer of this many bandwidth-delay products (rate × min RTT), drawn uniformly."""
    delta: float = 1.0
    runtime_s: float = 10.0
    """Simulated seconds of each network per evaluation (Remy's code: 1000)."""
    networks: int = DEFAULT_NETWORKS
    generations: int | None = None
    """The optimiser's generations; None: until one improves no rule."""
    pattern: str = "product"
    """The local search's candidates: one of PATTERNS."""
    split: str = "uses"
    """Which rule a generation's end splits: one of SPLITS."""
    search: Search = field(default_factory=Search)
    source: str = "<prior>"


def _range(table: dict, key: str, where: str, positive: bool, integer: bool = False) -> Range:
    value = table[key]
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise PriorError(f"{where}.{key} must be a range [lo, hi] of two numbers, got {value!r}")
    lo, hi = float(value[0]), float(value[1])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise PriorError(f"{where}.{key} must be finite, got {value!r}")
    if lo > hi:
        raise PriorError(f"{where}.{key}: lo {lo:g} is above hi {hi:g}")
    if positive and lo <= 0:
        raise PriorError(f"{where}.{key} must be positive, got {lo:g}")
    if integer and not (lo.is_integer() and hi.is_integer()):
        raise PriorError(f"{where}.{key} must be whole numbers, got {value!r}")
    return Range(lo, hi)


def _number(table: dict, key: str, where: str, default: float, low: float, high: float,
            strict_low: bool = False, integer: bool = False) -> float:
    value = table.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise PriorError(f"{where}.{key} must be a number, got {value!r}")
    if integer and not float(value).is_integer():
        raise PriorError(f"{where}.{key} must be a whole number, got {value!r}")
    if value < low or (strict_low and value == low) or value > high:
        bound = f"above {low:g}" if strict_low else f"at least {low:g}"
        raise PriorError(f"{where}.{key} must be {bound} and at most {high:g}, got {value:g}")
    return float(value)


def _choice(table: dict, key: str, where: str, choices: tuple[str, ...]) -> str:
    """One of `choices` (the first when the key is absent)."""
    value = table.get(key, choices[0])
    if value not in choices:
        raise PriorError(f"{where}.{key} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _table(parent: dict, key: str, where: str, known: set[str]) -> dict:
    table = parent.get(key, {})
    if not isinstance(table, dict):
        raise PriorError(f"{where}: {key} must be a table ([{key}])")
    if unknown := sorted(set(table) - known):
        raise PriorError(f"{where}: unknown key {key}.{unknown[0]} (known: {', '.join(sorted(known))})")
    return table


def _setting(table: dict, where: str, default: Setting) -> Setting:
    values = {k: _number(table, k, where, getattr(default, k), -1e9, 1e9) for k in SETTING_KEYS}
    s = Setting(**values)
    if s.min > s.max:
        raise PriorError(f"{where}: min {s.min:g} is above max {s.max:g}")
    if not 0 < s.min_change <= s.max_change:
        raise PriorError(f"{where}: need 0 < min_change <= max_change, got {s.min_change:g} and {s.max_change:g}")
    if s.multiplier <= 1:
        raise PriorError(f"{where}.multiplier must be above 1, got {s.multiplier:g}")
    if not s.min <= s.default <= s.max:
        raise PriorError(f"{where}.default {s.default:g} is outside [{s.min:g}, {s.max:g}]")
    return s


def parse(text: str, source: str) -> Prior:
    """The prior a file's text declares; a PriorError naming `source` and the key otherwise."""
    top = top_table(text, source, TOP_KEYS, PriorError)
    link = _table(top, "link", source, LINK_KEYS)
    traffic = _table(top, "traffic", source, TRAFFIC_KEYS)
    for table, name, keys in ((link, "link", ("rate_mbps", "min_rtt_ms")), (traffic, "traffic", ("senders",))):
        for key in keys:
            if key not in table:
                raise PriorError(f"{source}: {name}.{key} is missing (a range [lo, hi])")
    rate = _range(link, "rate_mbps", f"{source}: link", positive=True)
    rtt = _range(link, "min_rtt_ms", f"{source}: link", positive=True)
    rate_draw = _choice(link, "rate_draw", f"{source}: link", RATE_DRAWS)
    buffers = [k for k in ("buffer", "buffer_bytes", "buffer_bdp") if k in link]
    if len(buffers) > 1:
        raise PriorError(f"{source}: link.{buffers[1]}: give one of buffer = \"infinite\", buffer_bytes, buffer_bdp")
    if "buffer" in link and link["buffer"] != "infinite":
        raise PriorError(f"{source}: link.buffer must be \"infinite\" (or give buffer_bytes or buffer_bdp), "
                         f"got {link['buffer']!r}")
    buffer_bytes = _range(link, "buffer_bytes", f"{source}: link", positive=True) if "buffer_bytes" in link else None
    buffer_bdp = _range(link, "buffer_bdp", f"{source}: link", positive=True) if "buffer_bdp" in link else None
    senders = _range(traffic, "senders", f"{source}: traffic", positive=True, integer=True)
    if senders.hi > MAX_SENDERS:
        raise PriorError(f"{source}: traffic.senders: at most {MAX_SENDERS}, got {senders.hi:g}")
    training = _table(top, "training", source, TRAINING_KEYS)
    pattern = _choice(training, "pattern", f"{source}: training", PATTERNS)
    split = _choice(training, "split", f"{source}: training", SPLITS)
    search_table = _table(top, "search", source, set(Search.__dataclass_fields__))
    search = Search(**{axis: _setting(_table(search_table, axis, f"{source}: search", SETTING_KEYS),
                                      f"{source}: search.{axis}", getattr(Search(), axis))
                       for axis in Search.__dataclass_fields__})
    if not search.window_increment.default.is_integer():
        raise PriorError(f"{source}: search.window_increment.default must be a whole number of packets")
    return Prior(
        rate_mbps=rate, min_rtt_ms=rtt, senders=(int(senders.lo), int(senders.hi)),
        mean_on_s=_number(traffic, "mean_on_s", f"{source}: traffic", 1.0, 0.0, 1e6, strict_low=True),
        mean_off_s=_number(traffic, "mean_off_s", f"{source}: traffic", 1.0, 0.0, 1e6, strict_low=True),
        rate_draw=rate_draw, buffer_bytes=buffer_bytes, buffer_bdp=buffer_bdp,
        delta=_number(top, "delta", source, 1.0, 0.0, 1e3),
        runtime_s=_number(training, "runtime_s", f"{source}: training", 10.0, 0.0, MAX_RUNTIME_S, strict_low=True),
        networks=int(_number(training, "networks", f"{source}: training", DEFAULT_NETWORKS, 1, MAX_NETWORKS,
                             integer=True)),
        generations=(int(_number(training, "generations", f"{source}: training", 1, 1, 1e6, integer=True))
                     if "generations" in training else None),
        pattern=pattern, split=split, search=search, source=source)


def load(path: Path) -> Prior:
    """The prior file at `path`; a PriorError when it cannot be read or used."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_PRIOR_BYTES + 1)
    except OSError as e:
        raise PriorError(f"{path}: cannot read the prior ({e.strerror or e})") from None
    if len(data) > MAX_PRIOR_BYTES:
        raise PriorError(f"{path}: larger than {MAX_PRIOR_BYTES} bytes: not a prior file")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise PriorError(f"{path}: not text (UTF-8)") from None
    return parse(text, str(path))
