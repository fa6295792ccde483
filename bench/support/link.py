"""The path a benchmark emulates each way, as the emulators' options."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    """The same path each way: a delay, and either no rate limit or a rate with a queue of
    `queue_bytes`, DropTail or the AQM `queue` names (in Mahimahi's and pantheon-emu's words)."""
    delay_ms: int
    rate_mbps: int | None  # None: no rate limit, delay only
    queue_bytes: int | None  # the queue's capacity; None with rate_mbps None
    queue: str = "droptail"

    def describe(self) -> str:
        if self.rate_mbps is None:
            return f"{self.delay_ms} ms, unlimited"
        kind = "" if self.queue == "droptail" else f" {self.queue}"
        return f"{self.delay_ms} ms, {self.rate_mbps} Mbit/s, {self.queue_bytes} B{kind}"

    def emulator_options(self) -> list[str]:
        """pantheon-emu's options for this path."""
        options = ["--delay", str(self.delay_ms)]
        for direction in ("uplink", "downlink"):
            if self.rate_mbps is None:
                options += [f"--{direction}-rate", "unlimited"]
            else:
                options += [f"--{direction}-rate", str(self.rate_mbps), f"--{direction}-queue", self.queue,
                            f"--{direction}-queue-bytes", str(self.queue_bytes)]
        return options


GIGABIT = Link(delay_ms=20, rate_mbps=1000, queue_bytes=2_500_000)
"""20 ms at 1000 Mbit/s, a 20-ms queue: case b of emulator_throughput.py, tunnel_overhead.py's path."""
