"""Reads the emulator's native per-packet link log (see crates/format/src/link_log.rs for the format)
and summarises one direction: what entered, what left and when, what was dropped."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class LinkLog:
    entries_us: dict[int, int] = field(default_factory=dict)
    """uid -> time the packet entered the path."""
    departures: list[tuple[int, int, int, int]] = field(default_factory=list)
    """(t_us, uid, bytes, lateness_us) per departed packet, in order."""
    drops: list[tuple[int, int, int, str]] = field(default_factory=list)
    """(t_us, uid, bytes, cause) per dropped packet."""
    opportunities_us: list[int] = field(default_factory=list)

    def throughput_mbps(self) -> float:
        """Bits departed over the departure span (Pantheon's definition), Mbit/s."""
        if len(self.departures) < 2:
            return 0.0
        span_us = self.departures[-1][0] - self.departures[0][0]
        bits = 8 * sum(size for _, _, size, _ in self.departures)
        return bits / span_us if span_us > 0 else 0.0

    def delays_us(self) -> list[int]:
        """Per-packet one-way delay through the path as written to the far end, microseconds."""
        return [t + late - self.entries_us[uid] for t, uid, _, late in self.departures]


def read(path: Path) -> LinkLog:
    log = LinkLog()
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            fields = line.split()
            kind = fields[1]
            if kind == "+":
                log.entries_us[int(fields[2])] = int(fields[0])
            elif kind == "-":
                log.departures.append((int(fields[0]), int(fields[2]), int(fields[3]), int(fields[5])))
            elif kind == "d":
                log.drops.append((int(fields[0]), int(fields[2]), int(fields[3]), fields[4]))
            elif kind == "#":
                log.opportunities_us.append(int(fields[0]))
    return log
