"""Pantheon's own emulated paths, by name (`--emulator NAME`; `pantheon emulators` lists them).

The parameters are the original Pantheon's, from its continuous-testing configuration (paper §4
and §5): rates in Mbit/s both ways, delay one-way in ms, the queue a DropTail queue on the
uplink (the downlink's is infinite) unless a preset says both, and loss on the uplink.

- Calibrated emulators (§4: each reproduces a real path's results with Bayesian optimisation
  over the five link parameters); the cellular ones deliver as Poisson processes.
- Token-bucket policers (§5.2's pathological paths): as in the original, a link at the contracted
  rate with a one-packet DropTail buffer both ways, so that anything above the rate is dropped.
- ACK aggregation: the downlink delivers rarely or in bursts, so acknowledgements arrive in clumps.
- Buffer sweeps: 12 Mbit/s and 30 ms (bandwidth-delay product 90 000 bytes) with a DropTail buffer
  of 0.1, 1/3, 1/2 and 1 BDP.

Every preset runs on Mahimahi's clock (`--timing mahimahi`, docs/emulator.md): the original's
parameters were chosen, and the calibrated ones fitted, on Mahimahi, whose whole-millisecond
delays and delivery opportunities are part of what the fit reproduced. `--timing us` after the
preset replaces it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pantheon.errors import PantheonError


class PresetError(PantheonError):
    """No emulated path has the name the user gave."""


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
        if self.queue_packets is not None:
            opts += [f"--{name}-queue", "droptail", f"--{name}-queue-packets", str(self.queue_packets)]
        if self.queue_bytes is not None:
            opts += [f"--{name}-queue", "droptail", f"--{name}-queue-bytes", str(self.queue_bytes)]
        if self.loss:
            opts += [f"--{name}-loss", f"{self.loss:g}"]
        return opts

    def describe(self) -> str:
        if self.trace_ms is not None:
            period_ms = self.trace_ms[-1]
            rate = len(self.trace_ms) * 1500 * 8 / (period_ms * 1000)
            count = len(self.trace_ms)
            what = f"trace: {count} deliver{'y' if count == 1 else 'ies'} every {period_ms} ms ({rate:g} Mbit/s)"
        else:
            what = f"{self.rate_mbps:g} Mbit/s{' Poisson' if self.poisson else ''}"
        if self.queue_packets is not None:
            what += f", DropTail {self.queue_packets} pkt"
        if self.queue_bytes is not None:
            what += f", DropTail {self.queue_bytes} B"
        if self.loss:
            what += f", loss {self.loss:g}"
        return what


@dataclass(frozen=True)
class Preset:
    name: str
    kind: str
    delay_ms: float
    uplink: Direction
    downlink: Direction

    def options(self, traces_dir: Path) -> list[str]:
        """`pantheon emulate` options reproducing this path; trace files go to `traces_dir`."""
        return [
            "--delay", f"{self.delay_ms:g}",
            *self.uplink.options("uplink", traces_dir, self.name),
            *self.downlink.options("downlink", traces_dir, self.name),
            "--timing", "mahimahi",
        ]


def _calibrated(name: str, rate_mbps: float, delay_ms: float, queue_packets: int, loss: float = 0.0, poisson: bool = False) -> Preset:
    return Preset(
        name, "calibrated", delay_ms,
        Direction(rate_mbps, poisson=poisson, queue_packets=queue_packets, loss=loss),
        Direction(rate_mbps, poisson=poisson),
    )


def _policer(rate_mbps: int, delay_ms: int) -> Preset:
    side = Direction(rate_mbps, queue_packets=1)
    return Preset(f"policer-{rate_mbps}mbps-{delay_ms}ms", "token-bucket policer", delay_ms, side, side)


def _buffer(queue_bytes: int) -> Preset:
    return Preset(f"buffer-{queue_bytes}b", "buffer sweep", 30, Direction(12, queue_bytes=queue_bytes), Direction(12))


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        _calibrated("nepal-wifi", 0.57, 28, 14, loss=0.0477, poisson=True),
        _calibrated("mexico-cellular", 2.64, 88, 130, poisson=True),
        _calibrated("colombia-cellular", 3.04, 130, 426, poisson=True),
        _calibrated("india-wired", 100.42, 27, 173),
        _calibrated("china-wired", 77.72, 51, 94, loss=0.0006),
        _calibrated("mexico-wired", 114.68, 45, 450),
        *[_policer(rate, delay) for rate in (12, 60, 108) for delay in (10, 50)],
        Preset("ack-aggregation-100ms", "ACK aggregation", 10, Direction(12), Direction(trace_ms=(100,))),
        Preset("ack-aggregation-10x200ms", "ACK aggregation", 10, Direction(12), Direction(trace_ms=(200,) * 10)),
        *[_buffer(b) for b in (9_000, 30_000, 45_000, 90_000)],
    ]
}


def lookup(name: str) -> Preset:
    """The preset called `name`, or a PresetError listing the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise PresetError(f"unknown emulator '{name}'; known: {', '.join(PRESETS)} (see pantheon emulators)") from None


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
            if part.startswith("queue"):
                return f"{direction}-queue"
            if part in ("loss", "policer"):
                return f"{direction}-{part}"
    return None


def merge(preset_options: list[str], user_options: list[str]) -> list[str]:
    """Preset options, less those the user sets again, followed by the user's options. Both are
    lists of `--flag value` pairs."""
    overridden = {_slot(flag) for flag in user_options if flag.startswith("--")} - {None}
    kept: list[str] = []
    pairs = zip(preset_options[0::2], preset_options[1::2])
    for flag, value in pairs:
        if _slot(flag) not in overridden:
            kept += [flag, value]
    return kept + user_options


def traces_cache() -> Path:
    """Where presets' trace files live for `pantheon emulate` (stable contents, rewritten freely)."""
    import os

    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    directory = base / "pantheon" / "traces"
    directory.mkdir(parents=True, exist_ok=True)
    return directory
