"""Emulated paths as preset files (`--emulator NAME` or `--emulator FILE.toml`; `pantheon emulators`
lists the built-in ones).

A preset is a TOML file of the emulator's five-parameter path model and its clock; the built-in
ones are the files in presets/ at the repository's root (one per path, named after it, as schemes/
holds one manifest per scheme), and `pantheon calibrate` writes a file of the same form, so a
calibrated path and a built-in one are used the same way. The format:

    kind = "calibrated"            # what sort of path, for the listing
    description = "..."            # optional
    delay_ms = 28                  # one-way propagation delay, each direction (default 0)
    timing = "mahimahi"            # the path model's clock: "us" (the default) or "mahimahi"
    [uplink]                       # data; [downlink] (acknowledgements) likewise
    rate_mbps = 0.57               # a rate, or trace_ms = [ms, ...] (a Mahimahi trace; loops)
    delivery = "poisson"           # "constant" (the default) or "poisson" (rate_mbps is the mean)
    queue_packets = 14             # the queue's limit (or queue_bytes); a limit alone: DropTail, none: infinite
    queue = "codel"                # optional: the discipline (queues.KINDS: droptail, infinite, codel, pie,
                                   # fq-codel, red, dualpi2)
    queue_args = "target=5,interval=100"   # optional: its parameters, Mahimahi's form (docs/emulator.md)
    loss = 0.0477                  # i.i.d. loss probability (default 0)

A direction left out is pantheon-emu's default (12 Mbit/s, infinite queue). A file that does not
read is one line naming the file and the key; the values themselves are judged by the emulator's
own option code when a run starts.

The built-in parameters are the original Pantheon's, from its continuous-testing configuration
(paper §4 and §5): rates in Mbit/s both ways, delay one-way in ms, the queue a DropTail queue on
the uplink (the downlink's is infinite) unless a preset says both, and loss on the uplink.

- Calibrated emulators (§4: each reproduces a real path's results with Bayesian optimisation
  over the five link parameters); the cellular ones deliver as Poisson processes.
- Token-bucket policers (§5.2's pathological paths): as in the original, a link at the contracted
  rate with a one-packet DropTail buffer both ways, so that anything above the rate is dropped.
- ACK aggregation: the downlink delivers rarely or in bursts, so acknowledgements arrive in clumps.
- Buffer sweeps: 12 Mbit/s and 30 ms (bandwidth-delay product 90 000 bytes) with a DropTail buffer
  of 0.1, 1/3, 1/2 and 1 BDP.

Beside them, the queues of today's Internet (kind "AQM", issue 34), which the original did not have:
the buffer sweep's 1-BDP path with CoDel (RFC 8289) in place of DropTail, a home router's FQ-CoDel
(RFC 8290) at a typical access rate, and an L4S path's DualPI2 (RFC 9332).

Every preset of the original's paths runs on Mahimahi's clock (`timing = "mahimahi"`,
docs/emulator.md): the original's parameters were chosen, and the calibrated ones fitted, on
Mahimahi, whose whole-millisecond delays and delivery opportunities are part of what the fit
reproduced; so does the 1-BDP path with CoDel, which Mahimahi has too. The home router and the L4S
path are ours and run on microseconds (DualPI2 aims at a millisecond of queue, which Mahimahi's
clock would round away). `--timing us` (or `mahimahi`) after the preset replaces it.
"""
from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pantheon import queues
from pantheon.errors import PantheonError
from pantheon.repository import ROOT

PRESETS_DIR = ROOT / "presets"
"""The built-in presets, one NAME.toml each."""
TIMINGS = ("us", "mahimahi")
DELIVERIES = ("constant", "poisson")


class PresetError(PantheonError):
    """No emulated path has the name the user gave, or a preset file does not read."""


@dataclass(frozen=True)
class Direction:
    rate_mbps: float | None = None
    """Constant rate, or the mean of a Poisson process when `poisson`."""
    poisson: bool = False
    trace_ms: tuple[int, ...] | None = None
    """A Mahimahi trace (delivery opportunities in ms; loops) instead of a rate."""
    queue_packets: int | None = None
    queue_bytes: int | None = None
    loss: float = 0.0
    queue: str | None = None
    """The discipline (queues.KINDS); None: DropTail where a limit is given, else infinite."""
    queue_args: str | None = None
    """The discipline's parameters in Mahimahi's form (`target=5,interval=100`), judged by the emulator."""

    def queue_of(self) -> queues.Queue:
        return queues.Queue(self.queue, None if self.queue_packets is None else str(self.queue_packets),
                            None if self.queue_bytes is None else str(self.queue_bytes), self.queue_args)

    def options(self, name: str, traces_dir: Path, preset: str) -> list[str]:
        """Emulator options for this direction (`name` is uplink or downlink)."""
        opts: list[str] = []
        if self.trace_ms is not None:
            trace = traces_dir / f"{preset}.{name}.trace"
            trace.write_text("".join(f"{t}\n" for t in self.trace_ms))
            opts += [f"--{name}-trace", str(trace)]
        elif self.poisson:
            opts += [f"--{name}-poisson", f"{self.rate_mbps:g}"]
        else:
            opts += [f"--{name}-rate", f"{self.rate_mbps:g}"]
        queue = self.queue_of()
        if self.queue or queue.limit:
            opts += [f"--{name}-queue", queue.discipline]
        if self.queue_packets is not None:
            opts += [f"--{name}-queue-packets", str(self.queue_packets)]
        if self.queue_bytes is not None:
            opts += [f"--{name}-queue-bytes", str(self.queue_bytes)]
        if self.queue_args:
            opts += [f"--{name}-queue-args", self.queue_args]
        if self.loss:
            opts += [f"--{name}-loss", f"{self.loss:g}"]
        return opts

    def mean_rate_mbps(self) -> float | None:
        """The direction's mean delivery rate: its constant rate or Poisson mean, or its trace's
        (a 1500-byte opportunity a line over the trace's period, as the link loops it)."""
        if self.trace_ms is not None:
            return len(self.trace_ms) * 1500 * 8 / (self.trace_ms[-1] * 1000)
        return self.rate_mbps

    def describe(self) -> str:
        if self.trace_ms is not None:
            count = len(self.trace_ms)
            what = (f"trace: {count} deliver{'y' if count == 1 else 'ies'} every {self.trace_ms[-1]} ms "
                    f"({self.mean_rate_mbps():g} Mbit/s)")
        else:
            what = f"{self.rate_mbps:g} Mbit/s{' Poisson' if self.poisson else ''}"
        if not (queue := self.queue_of()).infinite:
            what += f", {queue.words()}"
        if self.loss:
            what += f", loss {self.loss:g}"
        return what

    def toml(self) -> list[str]:
        """This direction's keys, one `key = value` line each (the table header is the caller's)."""
        if self.trace_ms is not None:
            lines = [f"trace_ms = [{', '.join(str(t) for t in self.trace_ms)}]"]
        else:
            lines = [f"rate_mbps = {self.rate_mbps!r}", f'delivery = "{"poisson" if self.poisson else "constant"}"']
        lines += [f"{key} = {value!r}" for key, value in (("queue_packets", self.queue_packets),
                                                           ("queue_bytes", self.queue_bytes)) if value is not None]
        lines += [f'{key} = "{value}"' for key, value in (("queue", self.queue), ("queue_args", self.queue_args)) if value]
        return lines + ([f"loss = {self.loss!r}"] if self.loss else [])


DEFAULT_DIRECTION = Direction(12.0)
"""pantheon-emu's default for a direction the preset leaves out."""


@dataclass(frozen=True)
class Preset:
    name: str
    kind: str
    delay_ms: float
    uplink: Direction
    downlink: Direction
    timing: str = "us"
    """The path model's clock (docs/emulator.md): "us", or "mahimahi" (whole milliseconds)."""
    description: str = ""

    def options(self, traces_dir: Path) -> list[str]:
        """`pantheon emulate` options reproducing this path; trace files go to `traces_dir`."""
        return [
            "--delay", f"{self.delay_ms:g}",
            *self.uplink.options("uplink", traces_dir, self.name),
            *self.downlink.options("downlink", traces_dir, self.name),
            "--timing", self.timing,
        ]

    def toml(self, comment: str = "") -> str:
        """The preset as a file that `lookup` reads back as this preset; `comment` heads it."""
        head = [f"# {line}".rstrip() for line in comment.splitlines()]
        lines = [*head, f'kind = "{_escaped(self.kind)}"']
        if self.description:
            lines.append(f'description = "{_escaped(self.description)}"')
        lines += [f"delay_ms = {self.delay_ms!r}", f'timing = "{self.timing}"']
        for name, direction in (("uplink", self.uplink), ("downlink", self.downlink)):
            lines += ["", f"[{name}]", *direction.toml()]
        return "\n".join(lines) + "\n"


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _number(table: dict, key: str, where: str, *, integer: bool = False, low: float = 0.0,
            low_open: bool = False, high: float = math.inf) -> float | int | None:
    """table[key] if present, checked to be a number (an integer where asked) in its range."""
    if key not in table:
        return None
    value = table[key]
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) \
            or value < low or (low_open and value == low) or value > high:
        what = "an integer" if integer else "a number"
        bound = f"{'>' if low_open else '>='} {low:g}" + (f" and <= {high:g}" if math.isfinite(high) else "")
        raise PresetError(f"{where}.{key} must be {what} {bound}, got {value!r}")
    return value


def _unknown(table: dict, allowed: set[str], where: str) -> None:
    if extra := sorted(set(table) - allowed):
        raise PresetError(f"{where}: unknown key '{extra[0]}' (known: {', '.join(sorted(allowed))})")


def _direction(table: object, where: str) -> Direction:
    if not isinstance(table, dict):
        raise PresetError(f"{where} must be a table ([{where.rsplit(' ', 1)[-1]}])")
    _unknown(table, {"rate_mbps", "delivery", "trace_ms", "queue_packets", "queue_bytes", "queue", "queue_args", "loss"},
             where)
    rate = _number(table, "rate_mbps", where, low_open=True)
    trace = table.get("trace_ms")
    if (rate is None) == (trace is None):
        raise PresetError(f"{where} needs exactly one of rate_mbps and trace_ms")
    if trace is not None and (not isinstance(trace, list) or not trace
                              or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in trace)):
        raise PresetError(f"{where}.trace_ms must be a non-empty list of whole milliseconds")
    delivery = table.get("delivery", "constant")
    if delivery not in DELIVERIES or (trace is not None and "delivery" in table):
        raise PresetError(f"{where}.delivery must be one of {', '.join(DELIVERIES)} (with rate_mbps), got {delivery!r}")
    packets = _number(table, "queue_packets", where, integer=True, low=1)
    queue_bytes = _number(table, "queue_bytes", where, integer=True, low=1)
    if packets is not None and queue_bytes is not None:
        raise PresetError(f"{where} has both queue_packets and queue_bytes; a queue has one limit")
    kind, args = _queue(table, where, limited=packets is not None or queue_bytes is not None)
    return Direction(rate_mbps=None if rate is None else float(rate), poisson=delivery == "poisson",
                     trace_ms=None if trace is None else tuple(trace),
                     queue_packets=None if packets is None else int(packets),
                     queue_bytes=None if queue_bytes is None else int(queue_bytes),
                     loss=float(_number(table, "loss", where, high=1.0) or 0.0), queue=kind, queue_args=args)


QUEUE_ARGS = re.compile(r"[a-z_]+=[^,=\s]+(,[a-z_]+=[^,=\s]+)*")
"""Mahimahi's form of a queue's parameters, `key=value` items joined by commas; which keys each
discipline takes, and their values, the emulator judges (docs/emulator.md)."""


def _queue(table: dict, where: str, *, limited: bool) -> tuple[str | None, str | None]:
    """A direction's `queue` and `queue_args`, checked for their form; `limited`: a limit is given."""
    kind, args = table.get("queue"), table.get("queue_args")
    if kind is not None and kind not in queues.KINDS:
        raise PresetError(f"{where}.queue must be one of {', '.join(queues.KINDS)}, got {kind!r}")
    if kind == "droptail" and not limited:
        raise PresetError(f"{where}.queue = \"droptail\" needs a limit: queue_packets or queue_bytes")
    if kind == "infinite" and (limited or args is not None):
        raise PresetError(f"{where}.queue = \"infinite\" takes no limit and no queue_args")
    if args is not None:
        if kind is None:
            raise PresetError(f"{where}.queue_args needs queue (the discipline they are for)")
        if not isinstance(args, str) or not QUEUE_ARGS.fullmatch(args):
            raise PresetError(f"{where}.queue_args must be text of key=value items joined by commas "
                              f"(\"target=5,interval=100\"), got {args!r}")
    return kind, args


def parse(text: str, name: str, source: str) -> Preset:
    """The preset a file's text describes; a PresetError naming `source` and the key otherwise."""
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PresetError(f"{source}: not TOML ({e})") from None
    _unknown(table, {"kind", "description", "delay_ms", "timing", "uplink", "downlink"}, source)
    kind, description = table.get("kind", "preset file"), table.get("description", "")
    if not isinstance(kind, str) or not isinstance(description, str):
        raise PresetError(f"{source}: kind and description must be strings")
    timing = table.get("timing", "us")
    if timing not in TIMINGS:
        raise PresetError(f"{source}: timing must be one of {', '.join(TIMINGS)}, got {timing!r}")
    delay = _number(table, "delay_ms", source) or 0.0
    return Preset(name, kind, float(delay),
                  _direction(table["uplink"], f"{source}: uplink") if "uplink" in table else DEFAULT_DIRECTION,
                  _direction(table["downlink"], f"{source}: downlink") if "downlink" in table else DEFAULT_DIRECTION,
                  timing, description)


def load(path: Path) -> Preset:
    """The preset file at `path`, named after it (its stem)."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise PresetError(f"emulator file {path}: {e.strerror or e}") from None
    return parse(text, Path(path).stem, str(path))


def _natural(name: str) -> list:
    """Sorts buffer-9000b before buffer-30000b: digits compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


KIND_ORDER = ("calibrated", "token-bucket policer", "ACK aggregation", "buffer sweep", "AQM")
"""The listing's order of the built-in kinds; a kind not named here comes last."""


def _builtin() -> dict[str, Preset]:
    found = [load(path) for path in PRESETS_DIR.glob("*.toml")]
    rank = {kind: i for i, kind in enumerate(KIND_ORDER)}
    found.sort(key=lambda p: (rank.get(p.kind, len(rank)), _natural(p.name)))
    return {p.name: p for p in found}


PRESETS: dict[str, Preset] = _builtin()


def is_file(name: str) -> bool:
    """Whether an --emulator value names a file rather than a built-in preset."""
    return name.endswith(".toml") or os.sep in name


def lookup(name: str) -> Preset:
    """The built-in preset called `name`, or the preset file `name` (a path ending in .toml or with
    a directory in it); a PresetError listing the known ones otherwise."""
    if is_file(name):
        return load(Path(name))
    try:
        return PRESETS[name]
    except KeyError:
        raise PresetError(f"unknown emulator '{name}'; known: {', '.join(PRESETS)} (see pantheon emulators), "
                          f"or a preset file's path (FILE.toml)") from None


def table() -> str:
    """The presets as a human-readable table."""
    rows = [("name", "kind", "delay", "uplink", "downlink")]
    rows += [(p.name, p.kind, f"{p.delay_ms:g} ms", p.uplink.describe(), p.downlink.describe()) for p in PRESETS.values()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def _slot(flag: str) -> str | None:
    """Which parameter an emulator flag sets, so a user's flag replaces a preset's."""
    name = flag.split("=", 1)[0]
    if name in ("--delay", "--timing"):
        return name[2:]
    for direction in ("uplink", "downlink"):
        prefix = f"--{direction}-"
        if name.startswith(prefix):
            part = name[len(prefix):]
            if part in ("rate", "trace", "poisson"):
                return f"{direction}-delivery"
            if part == "queue-args":
                return f"{direction}-queue-args"
            if part.startswith("queue"):
                return f"{direction}-queue"
            if part in ("loss", "policer"):
                return f"{direction}-{part}"
    return None


def merge(preset_options: list[str], user_options: list[str]) -> list[str]:
    """Preset options, less those the user sets again, followed by the user's options. Both are
    lists of `--flag value` pairs. A queue's discipline and limit go together (a user's limit alone
    is a DropTail queue, as on the command line), and its parameters go with them, since they are
    that discipline's; `--DIR-queue-args` alone replaces only the preset's parameters."""
    overridden = {_slot(flag) for flag in user_options if flag.startswith("--")} - {None}
    overridden |= {f"{slot}-args" for slot in overridden if slot and slot.endswith("-queue")}
    kept: list[str] = []
    pairs = zip(preset_options[0::2], preset_options[1::2])
    for flag, value in pairs:
        if _slot(flag) not in overridden:
            kept += [flag, value]
    return kept + user_options


def splice(argv: list[str]) -> list[str]:
    """pantheon-emu's command line (options, `--`, the command) with its first `--emulator NAME`
    (or `--emulator=NAME`) replaced by the preset's options; the options given beside it win
    (merge). What follows `--` is the emulated command's and is left as it is."""
    options, command = (argv[: argv.index("--")], argv[argv.index("--"):]) if "--" in argv else (argv, [])
    for i, arg in enumerate(options):
        if arg == "--emulator" or arg.startswith("--emulator="):
            name = arg.split("=", 1)[1] if "=" in arg else (options[i + 1] if i + 1 < len(options) else "")
            rest = options[:i] + options[i + (1 if "=" in arg else 2):]
            return [*merge(lookup(name).options(traces_cache()), rest), *command]
    return argv


def traces_cache() -> Path:
    """Where presets' trace files live for `pantheon emulate` (stable contents, rewritten freely)."""
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    directory = base / "pantheon" / "traces"
    directory.mkdir(parents=True, exist_ok=True)
    return directory
