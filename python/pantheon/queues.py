"""The link's queue disciplines as the path options name them (crates/link/src/queue; docs/emulator.md),
and the one reader of what a path's options say of each direction's queue: what `test local` and
`sim` print as they start (experiment.describe_path), the report's note on an infinite queue, and
the presets' listing all read a queue here.

    --uplink-queue KIND            droptail, infinite, codel, pie, fq-codel, red or dualpi2
    --uplink-queue-packets N       the limit, in packets (or --uplink-queue-bytes N)
    --uplink-queue-args ARGS       the discipline's parameters in Mahimahi's form: target=5,interval=100

The emulator and the simulator judge the values (one line, exit 2, naming the option); this module
only reads what was given, so a path the Rust accepts is always described.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

KINDS = ("droptail", "infinite", "codel", "pie", "fq-codel", "red", "dualpi2")
"""What `--uplink-queue` takes: a copy of pantheon_cli's list, which tests/test_queues.py holds to the
simulator's (the same Rust parses both drivers' options)."""
NAMES = {"droptail": "DropTail", "infinite": "infinite", "codel": "CoDel", "pie": "PIE", "fq-codel": "FQ-CoDel",
         "red": "RED", "dualpi2": "DualPI2"}
"""Each discipline as its paper or RFC writes it: CoDel RFC 8289, PIE RFC 8033, FQ-CoDel RFC 8290,
RED Floyd and Jacobson 1993, DualPI2 RFC 9332."""
DIRECTIONS = ("uplink", "downlink")


def options_dict(options: Sequence[str]) -> dict[str, str]:
    """`--flag value` pairs (or `--flag=value` words) as a dict; the last of a flag wins, as the
    emulator reads them."""
    values: dict[str, str] = {}
    words = list(options)
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--") and "=" in word:
            flag, value = word.split("=", 1)
            values[flag] = value
            i += 1
        else:
            if i + 1 < len(words):
                values[word] = words[i + 1]
            i += 2
    return values


@dataclass(frozen=True)
class Queue:
    """One direction's queue as its options give it; `kind` None: no `--DIR-queue` (a limit alone is
    DropTail's, no limit the infinite default)."""
    kind: str | None = None
    limit_packets: str | None = None
    limit_bytes: str | None = None
    args: str | None = None

    @classmethod
    def of(cls, options: Sequence[str] | dict[str, str], direction: str) -> Queue:
        values = options if isinstance(options, dict) else options_dict(options)
        return cls(values.get(f"--{direction}-queue"), values.get(f"--{direction}-queue-packets"),
                   values.get(f"--{direction}-queue-bytes"), values.get(f"--{direction}-queue-args"))

    @property
    def discipline(self) -> str:
        """The discipline the link runs: the kind given, else DropTail where a limit is given and
        the infinite queue where none is."""
        if self.kind:
            return self.kind
        return "droptail" if self.limit else "infinite"

    @property
    def limit(self) -> str:
        """The limit in words ("100 packets", "90000 bytes"), "" where the options give none."""
        if self.limit_packets:
            return f"{self.limit_packets} packet{'' if self.limit_packets == '1' else 's'}"
        return f"{self.limit_bytes} bytes" if self.limit_bytes else ""

    @property
    def infinite(self) -> bool:
        """Whether the queue never drops: the infinite discipline (an AQM drops or marks whatever its limit)."""
        return self.discipline == "infinite"

    @property
    def aqm(self) -> bool:
        """Whether the discipline is an active queue manager (it drops or marks before the queue is full)."""
        return self.discipline not in ("droptail", "infinite")

    def name(self) -> str:
        return NAMES.get(self.discipline, self.discipline)

    def words(self) -> str:
        """One direction's queue: "infinite", "DropTail 100 packets", "CoDel 1000 packets (target=5,interval=100)"."""
        if self.infinite:
            return "infinite"
        return " ".join(filter(None, (self.name(), self.limit, f"({self.args})" if self.args else "")))

    def plural(self) -> str:
        """Both directions' queue, alike: "infinite queues", "DropTail queues of 9000 bytes",
        "FQ-CoDel queues (target=5,interval=100)"."""
        if self.infinite:
            return "infinite queues"
        of = f" of {self.limit}" if self.limit else ""
        return f"{self.name()} queues{of}" + (f" ({self.args})" if self.args else "")


def describe(options: Sequence[str] | dict[str, str]) -> str:
    """Both directions' queues in words, one phrase when they are alike."""
    up, down = (Queue.of(options, d) for d in DIRECTIONS)
    if up.words() == down.words():
        return up.plural()
    return f"uplink queue {up.words()}, downlink queue {down.words()}"
