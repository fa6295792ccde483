"""What the observatory is doing, from its journal: the text `pantheon observe --status` prints, and
the static page STATE_DIR/status.html, rewritten whole (atomically) on every journal line, which any
web server can serve or a browser open as a file. Like the QUIC interop runner's matrix, each
experiment links to its logs; the archive's link of an uploaded result, and Dask's own dashboard,
are linked, not reimplemented."""
from __future__ import annotations

import html
import math
import time
from pathlib import Path

from pantheon.files import write_atomic
from pantheon.observe.journal import Round, State

PAGE = "status.html"
ORDER = ("running", "queued", "failed", "done", "uploaded")
"""The order experiments are listed in: what needs an eye first."""
REFRESH_S = 30
"""How often the page asks the browser to reload it, s."""
EARLIER_ROUNDS = 20
"""How many rounds before the last the page summarises."""


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _next_round(round_: Round) -> str:
    next_t = round_.next_t
    return f"next round at {_when(next_t)}" if next_t is not None and math.isfinite(next_t) else "no next round scheduled"


def _lines(round_: Round) -> list[dict]:
    return sorted(round_.experiments.values(), key=lambda line: (ORDER.index(line["event"]), line["experiment"]))


def status_text(state: State) -> str:
    if not state.rounds:
        return "no round yet (pantheon observe SCHEDULE.toml starts one)"
    last = state.rounds[-1]
    lines = [f"round {last.id}, started {_when(last.started_t)}"
             + (f", ended {_when(last.ended_t)}" if last.ended_t else ", in progress")]
    for line in _lines(last):
        status = line["event"]
        extra = {"failed": f": {line.get('reason')}", "uploaded": f" {line.get('url')}",
                 "running": f" on {line.get('worker')}"}.get(status, "")
        lines.append(f"  {status:<9} {line['experiment']}{extra}")
    waiting = state.waiting_uploads()
    if waiting:
        lines.append(f"{len(waiting)} result(s) wait for the archive"
                     + (f" ({state.upload_problem})" if state.upload_problem else ""))
    lines.append(_next_round(last))
    if state.dashboard:
        lines.append(f"Dask dashboard: {state.dashboard} (while the observatory runs)")
    return "\n".join(lines)


def _link(href: str | None, text: str) -> str:
    return f'<a href="{html.escape(href)}">{html.escape(text)}</a>' if href else html.escape(text)


def _row(round_: Round, line: dict) -> str:
    status = line["event"]
    detail = {"failed": html.escape(str(line.get("reason"))), "running": "on " + html.escape(str(line.get("worker"))),
              "uploaded": _link(line.get("url"), "in the archive"),
              "done": "waits for the archive"}.get(status, "")
    attempts = line.get("attempts")
    logs = " ".join(_link(f"rounds/{round_.id}/{line['experiment']}/attempt{k}.log", f"log {k}")
                    for k in range(1, attempts + 1)) if isinstance(attempts, int) else ""
    return (f'<tr class="{status}"><td>{status}</td><td>{html.escape(line["experiment"])}</td>'
            f"<td>{detail}</td><td>{logs}</td></tr>")


def status_html(state: State) -> str:
    """The status page: the last round's every experiment, the rounds before it counted, the next round."""
    head = (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{REFRESH_S}">'
            "<title>Pantheon observatory</title><style>body{font-family:sans-serif} td{padding:2px 8px}"
            " .failed{background:#fdd} .running{background:#ffd} .uploaded,.done{background:#dfd}</style></head><body>"
            f"<h1>Pantheon observatory</h1><p>as of {_when(time.time())}")
    dashboard = f' · <a href="{html.escape(state.dashboard)}">Dask dashboard</a> (while the observatory runs)' \
        if state.dashboard else ""
    if not state.rounds:
        return head + dashboard + "</p><p>no round yet</p></body></html>\n"
    last = state.rounds[-1]
    parts = [head + dashboard + "</p>",
             f"<h2>Round {html.escape(last.id)}</h2><p>started {_when(last.started_t)}, "
             + (f"ended {_when(last.ended_t)}" if last.ended_t else "in progress") + f"; {_next_round(last)}</p>",
             "<table><tr><th>status</th><th>experiment</th><th></th><th>logs</th></tr>",
             *(_row(last, line) for line in _lines(last)), "</table>"]
    waiting = state.waiting_uploads()
    if waiting:
        parts.append(f"<p>{len(waiting)} result(s) wait for the archive"
                     + (f": {html.escape(state.upload_problem)}" if state.upload_problem else "") + "</p>")
    earlier = state.rounds[-1 - EARLIER_ROUNDS:-1]
    if earlier:
        parts.append("<h2>Earlier rounds</h2><ul>")
        for round_ in reversed(earlier):
            counts: dict[str, int] = {}
            for line in round_.experiments.values():
                counts[line["event"]] = counts.get(line["event"], 0) + 1
            parts.append(f"<li>{html.escape(round_.id)}: "
                         + ", ".join(f"{counts[s]} {s}" for s in ORDER if s in counts) + "</li>")
        parts.append("</ul>")
    return "\n".join(parts) + "\n</body></html>\n"


def write_page(state_dir: Path, state: State) -> None:
    write_atomic(state_dir / PAGE, status_html(state))
