"""The observatory's journal: one JSON object a line, appended and fsync'd before the observatory acts
on it, in STATE_DIR/journal.jsonl. It is the only record of what a round did: `--status` reads it, a
restarted observatory replays it to resume the round it was in (finished experiments are not run again;
one that was running is run again from scratch) and to send the results still waiting for the archive.

An experiment's statuses, in order: queued, running, done or failed, then uploaded (a done one). A
line cut short by a crash is the last one and is skipped on reading: what it said had not happened.

The writer keeps the state the journal describes up to date line by line (not by reading the file
again) and hands it to `on_change` after every line: the status page (status.py) is rewritten so.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

NAME = "journal.jsonl"
FINISHED = ("done", "failed", "uploaded")
"""An experiment in one of these is not run again in its round."""


@dataclass
class Round:
    id: str
    started_t: float
    """Unix time the round started, s."""
    experiments: dict[str, dict] = field(default_factory=dict)
    """Experiment id -> its latest journal line (its status is "event")."""
    ended_t: float | None = None
    next_t: float | None = None
    """Unix time the next round starts, s; None: no next round (--once, or no period)."""


@dataclass
class State:
    rounds: list[Round] = field(default_factory=list)
    dashboard: str | None = None
    """The Dask dashboard's link the running (or last) observatory announced."""
    upload_problem: str | None = None
    """Why the last upload attempt left results waiting (None once one landed)."""

    def current(self) -> Round | None:
        """The last round if it has not ended: the one a restart resumes."""
        return self.rounds[-1] if self.rounds and self.rounds[-1].ended_t is None else None

    def waiting_uploads(self) -> list[tuple[Round, dict]]:
        """Every done experiment whose result has not reached the archive, in any round."""
        return [(r, line) for r in self.rounds for line in r.experiments.values() if line["event"] == "done"]


def _apply(state: State, line: dict) -> None:
    """Updates `state` with one journal line."""
    event = line.get("event")
    if event == "start":
        state.dashboard = line.get("dashboard")
    elif event == "upload-waits":
        state.upload_problem = line.get("reason")
    elif event == "uploaded":
        state.upload_problem = None
    if event == "round":
        state.rounds.append(Round(line["round"], line["t"], next_t=line.get("next_t")))
        return
    # Mostly the last round's; an upload may finish an older round's result.
    found = next((r for r in reversed(state.rounds) if r.id == line.get("round")), None)
    if found is None:
        return
    if event == "round-end":
        found.ended_t = line["t"]
        found.next_t = line.get("next_t")
    elif "experiment" in line:
        found.experiments[line["experiment"]] = line


class Journal:
    def __init__(self, state_dir: Path, on_change: Callable[[State], None] | None = None) -> None:
        self.path = state_dir / NAME
        self.on_change = on_change
        """Called with the state after every line written (the status page)."""
        self._state: State | None = None
        """What the file says, kept by the writer line by line; None until first needed."""

    def write(self, event: str, **fields: object) -> None:
        line = {"event": event, "t": round(time.time(), 3), **fields}
        text = json.dumps(line, sort_keys=True) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, text.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        state = self.state()
        _apply(state, json.loads(text))
        if self.on_change is not None:
            self.on_change(state)

    def state(self) -> State:
        """The journal's state as this writer knows it (read from the file once)."""
        if self._state is None:
            self._state = self.read()
        return self._state

    def read(self) -> State:
        """The state, read from the file (what another process sees)."""
        state = State()
        if not self.path.is_file():
            return state
        for text in self.path.read_text().splitlines():
            try:
                line = json.loads(text)
            except ValueError:
                continue
            _apply(state, line)
        return state
