"""`pantheon observe SCHEDULE.toml` and `pantheon observe --status`: the observatory's command line
(docs/observatory.md). Dask and the archive's client are imported when a round runs, not here: every
`pantheon` command imports this module."""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from pantheon.errors import PantheonError
from pantheon.observe.journal import Journal, State

DEFAULT_STATE = Path("observatory")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("observe", help="run a schedule of experiments round after round on Dask, uploading each result "
                       "to the archive (pantheon observe --status: what ran)",
                       description="The observatory: runs the experiments SCHEDULE.toml declares (docs/observatory.md), "
                       "each a Dask task, retried when it fails, each result uploaded to the archive as it completes.")
    p.add_argument("schedule", type=Path, nargs="?", metavar="SCHEDULE.toml")
    p.add_argument("--status", action="store_true", help="print what ran, runs, failed and waits for upload, and exit")
    p.add_argument("--once", action="store_true", help="one round (resuming an unfinished one), then exit")
    p.add_argument("--archive", metavar="URL", help="the results archive to upload to (http://HOST:PORT/)")
    p.add_argument("--token", help="the archive's upload token (default: --token-file, "
                   "$PANTHEON_ARCHIVE_TOKEN, or a local archive's own token, as pantheon archive upload)")
    p.add_argument("--token-file", type=Path, metavar="FILE", help="a file holding the upload token")
    p.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler (tcp://HOST:8786) whose workers run the "
                   "experiments (default: a one-worker LocalCluster here)")
    p.add_argument("--state", type=Path, default=DEFAULT_STATE, metavar="DIR",
                   help=f"the journal and the results (default ./{DEFAULT_STATE})")
    p.add_argument("--retries", type=int, default=2, metavar="N", help="runs again of a failed experiment (default 2)")


def _token(args: argparse.Namespace) -> str | None:
    if args.token:
        return args.token
    if args.token_file:
        try:
            return args.token_file.read_text().strip() or None
        except OSError as e:
            raise PantheonError(f"--token-file {args.token_file}: {e.strerror}") from None
    return None


def run(args: argparse.Namespace) -> int:
    if args.status:
        print(status_text(Journal(args.state).read()))
        return 0
    if args.schedule is None:
        raise PantheonError("observe: give a schedule (SCHEDULE.toml) or --status")
    if not 0 <= args.retries <= 100:
        raise PantheonError(f"--retries {args.retries}: give 0 to 100")
    from pantheon.observe import schedule
    from pantheon.observe.round import Uploader, observe

    plan = schedule.load(args.schedule)
    args.state.mkdir(parents=True, exist_ok=True)
    uploader = Uploader(Journal(args.state), args.archive, _token(args))
    return observe(plan, args.state.resolve(), args.once, args.retries, args.scheduler, uploader)


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def status_text(state: State) -> str:
    if not state.rounds:
        return "no round yet (pantheon observe SCHEDULE.toml starts one)"
    last = state.rounds[-1]
    lines = [f"round {last.id}, started {_when(last.started_t)}"
             + (f", ended {_when(last.ended_t)}" if last.ended_t else ", in progress")]
    by_status: dict[str, list[dict]] = {}
    for line in last.experiments.values():
        by_status.setdefault(line["event"], []).append(line)
    for status in ("uploaded", "done", "running", "queued", "failed"):
        for line in by_status.get(status, []):
            extra = {"failed": f": {line.get('reason')}", "uploaded": f" {line.get('url')}",
                     "running": f" on {line.get('worker')}"}.get(status, "")
            lines.append(f"  {status:<9} {line['experiment']}{extra}")
    waiting = state.waiting_uploads()
    if waiting:
        lines.append(f"{len(waiting)} result(s) wait for the archive"
                     + (f" ({state.upload_problem})" if state.upload_problem else ""))
    if last.ended_t is not None:
        next_t = last.next_t
        lines.append(f"next round at {_when(next_t)}" if next_t is not None and math.isfinite(next_t)
                     else "no next round scheduled")
    if state.dashboard:
        lines.append(f"Dask dashboard: {state.dashboard} (while the observatory runs)")
    return "\n".join(lines)
