"""Progress of a long command (`test local`, `test remote`, `sim`, `schemes check`, the demo): one
mechanism for all of them.

On a terminal: a bar (tqdm) on stderr, redrawn in place, with the current run, the share of the
campaign done, the time elapsed and the time left; each finished run's line is printed above it.
The bar moves within a run as well (harness runs report how far their run time has gone), so the
time left is an estimate from the first seconds on, not only once a run has finished.
Not on a terminal (a log file, a pipe, CI): plain lines, one when a run starts and one when it
ends, nothing redrawn. With --quiet: nothing.
"""
from __future__ import annotations

import sys
from typing import TextIO

from tqdm import tqdm

BAR_FORMAT = "{desc} {percentage:3.0f}%|{bar}| {elapsed} elapsed, {remaining} left"
REDRAW_S = 0.25
"""Least time between two redraws of the bar."""
# smoothing=0: the rate is the campaign's average so far, not tqdm's recent-speed blend, which
# after a run's first fraction of a second (its set-up) predicted hours.


class Progress:
    """The runs of one command, counted as they end (runs may end out of order: `pantheon sim`
    runs them in parallel). `lines=False`: no run lines in plain mode, the command prints its own
    (`schemes check`'s table)."""

    def __init__(self, total: int, *, quiet: bool, lines: bool = True, stream: TextIO | None = None) -> None:
        self.total = total
        """Runs the command will make."""
        self.done = 0
        """Runs ended so far."""
        self.quiet, self.lines = quiet, lines
        self.stream = stream or sys.stderr
        self.bar: tqdm | None = None
        """The bar on a terminal; None in plain mode and with --quiet."""
        if not quiet and self.stream.isatty():
            self.bar = tqdm(total=total, file=self.stream, bar_format=BAR_FORMAT, mininterval=REDRAW_S, smoothing=0,
                            dynamic_ncols=True, leave=False)

    def started(self, label: str) -> None:
        """A run named `label` ("cubic run 1/3") started."""
        if self.bar is not None:
            self.bar.set_description_str(f"[{self.done + 1}/{self.total}] {label}", refresh=False)
            self.bar.refresh()
        elif self.lines and not self.quiet:
            print(f"[{self.done + 1}/{self.total}] {label} ...", file=self.stream, flush=True)

    def tick(self, elapsed_s: float, total_s: float) -> None:
        """The current run is `elapsed_s` of its `total_s` seconds in (terminal only)."""
        if self.bar is not None and total_s > 0:
            self.bar.update(self.done + min(elapsed_s / total_s, 1.0) - self.bar.n)

    def ended(self, line: str) -> None:
        """A run ended; `line` says how ("cubic run 1/3 ok"), after its number."""
        self.done += 1
        if self.bar is not None:
            self.bar.update(self.done - self.bar.n)
        if self.lines and not self.quiet:
            self.write(f"[{self.done}/{self.total}] {line}")

    def write(self, line: str, stream: TextIO | None = None) -> None:
        """A line above the bar (to stderr unless `stream` is given), even with --quiet: callers
        print what --quiet silences through `ended`."""
        if self.bar is not None:
            tqdm.write(line, file=stream or self.stream)
        else:
            print(line, file=stream or self.stream, flush=True)

    def close(self) -> None:
        """Clears the bar: what stays on the terminal is the runs' lines."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
