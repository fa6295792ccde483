"""`pantheon observe SCHEDULE.toml` and `pantheon observe --status`: the observatory's command line
(docs/observatory.md). Dask and the archive's client are imported when a round runs, not here: every
`pantheon` command imports this module."""
from __future__ import annotations

import argparse
from pathlib import Path

from pantheon import files
from pantheon.errors import PantheonError
from pantheon.observe.journal import Journal
from pantheon.observe.status import status_text, write_page

DEFAULT_STATE = Path("observatory")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("observe", help="run a schedule of experiments round after round on Dask, uploading each result "
                       "to the archive (pantheon observe --status: what ran)",
                       description="The observatory: runs the experiments SCHEDULE.toml declares (docs/observatory.md), "
                       "each a Dask task, retried when it fails, each result uploaded to the archive as it completes.",
                       epilog="example:\n  pantheon observe examples/observatory-smoke.toml --once "
                       "--archive http://127.0.0.1:8080/")
    p.add_argument("schedule", type=Path, nargs="?", metavar="SCHEDULE.toml")
    p.add_argument("--status", action="store_true", help="print what ran, runs, failed and waits for upload, and exit (the same as STATE/status.html)")
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
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.status:
        print(status_text(Journal(args.state).read()))
        return 0
    if args.schedule is None:
        raise PantheonError("observe: give a schedule (SCHEDULE.toml) or --status")
    if not 0 <= args.retries <= 100:
        raise PantheonError(f"--retries {args.retries}: give 0 to 100")
    from pantheon.archive.client import archive_url, token_from_file
    from pantheon.observe import schedule
    from pantheon.observe.round import Uploader, observe

    if args.archive:
        archive_url(args.archive, "--archive")  # before a round, not as each of its results waits for upload
    plan = schedule.load(args.schedule)
    files.writable_dir(args.state, "--state")
    state_dir = args.state.resolve()
    uploader = Uploader(Journal(state_dir, on_change=lambda state: write_page(state_dir, state)), args.archive,
                        args.token or (token_from_file(args.token_file) if args.token_file else None))
    return observe(plan, state_dir, args.once, args.retries, args.scheduler, uploader)
