"""The one reader of the link's native per-packet log, which pantheon-emu and pantheon-sim write
with one writer (crates/format/src/link_log.rs states the format). Its lines, after a `#` header:

    t_us + uid bytes                        the packet entered the path
    t_us - uid bytes delay_us lateness_us   it left, written to the far end lateness_us late; a
                                            last token `ce` when the queue marked it CE (RFC 3168)
    t_us d uid bytes cause                  it was dropped (cause: DROP_CAUSES)
    t_us # 1500                             a delivery opportunity of the bottleneck

`read` takes the whole log; `opportunities_us` and `first_entry_us` read only what the harness's
records and the simulator's replays need, without building the rest (a 30 s run at 100 Mbit/s
logs a million lines).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from pantheon.errors import PantheonError

DROP_CAUSES = ("loss", "policer", "queue", "aqm")
"""Why the link dropped a packet: its random loss, its policer, a queue full to its limit, or an
AQM's decision (CoDel, PIE, FQ-CoDel, RED, DualPI2: crates/link/src/queue)."""


class LinkLogError(PantheonError):
    """A line that is not the native link log's; the message names the file and the line."""


class Event(NamedTuple):
    t_us: int
    kind: str
    """"+" entered, "-" left, "d" dropped, "#" a delivery opportunity."""
    uid: int | None
    """None for an opportunity."""
    size_bytes: int


@dataclass(frozen=True)
class Departure:
    t_us: int
    uid: int
    size_bytes: int
    lateness_us: int
    """How long after its scheduled time the packet was written to the far end."""
    ce: bool = False
    """The queue marked it Congestion Experienced instead of dropping it."""


@dataclass
class LinkLog:
    events: list[Event] = field(default_factory=list)
    """Every line, in file (= time) order: what a replay of the queue walks."""
    entries_us: dict[int, int] = field(default_factory=dict)
    """uid -> time the packet entered the path."""
    departures: list[Departure] = field(default_factory=list)
    drops: list[tuple[int, int, int, str]] = field(default_factory=list)
    """(t_us, uid, bytes, cause) per dropped packet."""
    opportunities_us: list[int] = field(default_factory=list)

    def dropped_uids(self, cause: str) -> list[int]:
        return [uid for _, uid, _, c in self.drops if c == cause]

    def marked_uids(self) -> list[int]:
        """The packets the queue marked CE, in the order they left."""
        return [d.uid for d in self.departures if d.ce]

    def delay_us(self, departure: Departure) -> int:
        """One-way delay through the path of a departed packet, as written to the far end."""
        return departure.t_us + departure.lateness_us - self.entries_us[departure.uid]

    def throughput_mbps(self) -> float:
        """Bits departed over the departure span (Pantheon's definition), Mbit/s."""
        if len(self.departures) < 2:
            return 0.0
        span_us = self.departures[-1].t_us - self.departures[0].t_us
        bits = 8 * sum(d.size_bytes for d in self.departures)
        return bits / span_us if span_us > 0 else 0.0


def _lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of every event line."""
    with open(path) as f:
        for number, line in enumerate(f, start=1):
            if not line.startswith("#"):
                yield number, line.split()


def read(path: Path) -> LinkLog:
    log = LinkLog()
    for number, fields in _lines(path):
        try:
            t_us, kind = int(fields[0]), fields[1]
            if kind == "#":
                log.events.append(Event(t_us, kind, None, int(fields[2])))
                log.opportunities_us.append(t_us)
                continue
            uid, size = int(fields[2]), int(fields[3])
            if kind == "+":
                log.entries_us[uid] = t_us
            elif kind == "-":
                if len(fields) not in (6, 7) or fields[6:] not in ([], ["ce"]):
                    raise ValueError("a departure is 't_us - uid bytes delay_us lateness_us [ce]'")
                log.departures.append(Departure(t_us, uid, size, int(fields[5]), ce=len(fields) == 7))
            elif kind == "d":
                if len(fields) != 5 or fields[4] not in DROP_CAUSES:
                    raise ValueError(f"a drop's cause is one of {', '.join(DROP_CAUSES)}")
                log.drops.append((t_us, uid, size, fields[4]))
            else:
                raise ValueError(f"unknown kind {kind!r}")
        except (IndexError, ValueError) as e:
            raise LinkLogError(f"{path}:{number}: not a line of the native link log ({e})") from None
        log.events.append(Event(t_us, kind, uid, size))
    return log


def opportunities_us(path: Path) -> list[int]:
    """The times of the delivery opportunities, µs since the log's base."""
    with open(path) as f:
        return [int(line.split(" ", 1)[0]) for line in f if not line.startswith("#") and " # " in line]


def first_entry_us(path: Path, size_bytes: int) -> int | None:
    """When the first packet of `size_bytes` entered the path; None if none did."""
    for _, fields in _lines(path):
        if fields[1] == "+" and int(fields[3]) == size_bytes:
            return int(fields[0])
    return None
