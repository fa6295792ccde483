"""What one direction of a path saw, as the analysis needs it: every packet that entered (a send),
every packet that left (a delivery, with its one-way delay), and, where the path was emulated,
every delivery opportunity of the bottleneck (its capacity). This is the common ground of the
readers (logs.py): this project's per-packet records and the original Pantheon's merged text logs
(Yan et al., ATC 2018, §3.2) both become LinkEvents, and the metrics are computed from it alone.

Times are integer microseconds since the run's clock started (t0); flows are numbered from 1, as
in the original Pantheon's logs and reports. Arrays are numpy, one element per event.

Problems records what a reader found unsound and left out (or kept with a caveat), with counts
and the first few line (or row) numbers, so a researcher can look at the file.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SHOWN_LINE_NUMBERS = 5


@dataclass
class LinkEvents:
    send_flow: np.ndarray
    send_t_us: np.ndarray
    send_bytes: np.ndarray
    recv_flow: np.ndarray
    recv_t_us: np.ndarray
    recv_bytes: np.ndarray
    delay_us: np.ndarray
    """One-way delay of each delivery (receive − send time); negative only when clocks disagree."""
    opportunity_t_us: np.ndarray | None = None
    """Delivery opportunities of the bottleneck; None where the path was not emulated."""
    opportunity_bytes: np.ndarray | None = None
    send_ecn: np.ndarray | None = None
    """Each send's ECN codepoint (RFC 3168 §5: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE); None where the
    source does not say (the original Pantheon's text logs)."""
    recv_ce: np.ndarray | None = None
    """Whether each delivery arrived marked Congestion Experienced; None likewise."""

    @property
    def flows(self) -> list[int]:
        return sorted(set(np.unique(self.send_flow).tolist()) | set(np.unique(self.recv_flow).tolist()))

    @classmethod
    def build(cls, send: tuple, recv: tuple, opportunities: tuple | None = None, ecn: tuple | None = None) -> LinkEvents:
        """From (flow, t_us, bytes) sends, (flow, t_us, bytes, delay_us) deliveries, optional
        (t_us, bytes) opportunities and optional (each send's codepoint, each delivery's CE mark),
        as sequences or arrays; every array becomes int64 (the CE marks bool)."""
        as64 = lambda values: np.asarray(values, dtype=np.int64).reshape(-1)  # noqa: E731
        opp = (None, None) if opportunities is None else (as64(opportunities[0]), as64(opportunities[1]))
        marks = (None, None) if ecn is None else (as64(ecn[0]), np.asarray(ecn[1], dtype=bool).reshape(-1))
        return cls(*map(as64, send), *map(as64, recv), *opp, *marks)


@dataclass
class Problems:
    """Counts and first line numbers of what a reader found wrong in one file."""

    source: str
    unit: str = "line"
    found: dict[str, tuple[int, list[int]]] = field(default_factory=dict)

    def add(self, what: str, numbers) -> None:
        numbers = np.asarray(numbers, dtype=np.int64).reshape(-1)
        if numbers.size == 0:
            return
        count, shown = self.found.get(what, (0, []))
        shown = sorted(shown + numbers[:SHOWN_LINE_NUMBERS].tolist())[:SHOWN_LINE_NUMBERS]
        self.found[what] = (count + int(numbers.size), shown)

    def count(self, what: str) -> int:
        return self.found.get(what, (0, []))[0]

    def messages(self) -> list[str]:
        """One line per kind of problem: `FILE: truncated lines: 3 (lines 7, 9, 12)`."""
        lines = []
        for what, (count, shown) in self.found.items():
            where = ", ".join(map(str, shown)) + (", ..." if count > len(shown) else "")
            unit = self.unit + ("s" if len(shown) > 1 else "")
            lines.append(f"{self.source}: {what}: {count} ({unit} {where})")
        return lines
