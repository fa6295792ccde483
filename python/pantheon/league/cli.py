"""`pantheon league MATRIX.toml --data-dir DIR`: every scheme in every environment of a matrix, in
the simulator, on Dask; the table, the report and the summary in DIR (docs/league.md).

The same command on the same DIR resumes a league that was stopped (Ctrl-C, a kill, a machine
that went down): the cells journaled are kept and only the others run. A DIR that holds another
matrix's league is refused, so one data dir never mixes two matrices.
"""
from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

from pantheon import cluster, files, schemes
from pantheon.cluster import dashboard_link, dask_client
from pantheon.errors import PantheonError
from pantheon.league import campaign, confirm, entrants, matrix, report, table
from pantheon.progress import Progress
from pantheon.repository import ROOT
from pantheon.sim import simulable
from pantheon.trials import git_commit
from pantheon.wording import counted

MATRIX_COPY = "matrix.toml"
LEAGUES_DIR = ROOT / "leagues"
SHOWN_RANKS = 10


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "league", help="rank every scheme over a matrix of environments, simulated on Dask (pantheon league --help)",
        description="Run every scheme (or --schemes) in every environment of a matrix (TOML: rates, RTTs, buffers, "
        "queues, loss, rate steps, presets, topologies, flows, seeds; docs/league.md) in the simulator, as Dask tasks, and rank "
        "them as ccBench does: in each environment (or time window) the schemes within 10% of the best score win. "
        "Writes DIR/league.parquet (a row per environment x scheme x seed), DIR/report.md and DIR/league.json. "
        "Resumable: the same command continues a stopped league.",
        epilog=f"example:\n  pantheon league {LEAGUES_DIR.relative_to(ROOT)}/ccbench-single.toml --data-dir league-single")
    p.add_argument("matrix", type=Path, metavar="MATRIX.toml", help="the matrix (e.g. leagues/ccbench-single.toml)")
    p.add_argument("--data-dir", type=Path, required=True, help="where the table, the report and the journal go")
    p.add_argument("--schemes", help="comma-separated schemes (default: every available crates/cc congestion "
                   "controller); kernel and QUIC schemes play through their manifests' stand-ins, flagged")
    p.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler (tcp://HOST:8786) whose workers run the "
                   "simulations (default: a LocalCluster here)")
    p.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                   help="without --scheduler: simulations at once (default: every core this process may use)")
    p.add_argument("--confirm", type=int, default=0, metavar="N", help="then run N cells chosen to cover the matrix "
                   "again over the emulator, in real time (pantheon test local; root or user namespaces), and report "
                   "the simulator-vs-emulator difference per cell and overall (default 0)")
    p.add_argument("--confirm-seeds", type=int, default=1, metavar="K", help="with --confirm: run each chosen cell on "
                   "the matrix's first K seeds and compare the means (a two-flow cell's single race is noisy; "
                   "default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress, only the ranking")
    p.set_defaults(run=run)


def _claim(data_dir: Path, given: Path, text: str) -> None:
    """The data dir for this matrix: new, or holding this matrix's league (resumed)."""
    files.writable_dir(data_dir, "--data-dir")
    copy = data_dir / MATRIX_COPY
    if copy.exists():
        if copy.read_text() != text:
            raise PantheonError(f"--data-dir {data_dir} holds the league of another matrix ({copy} differs from "
                                f"{given}): give a new --data-dir")
    elif any(data_dir.iterdir()):
        raise PantheonError(f"--data-dir {data_dir} is not empty and holds no league: give a new --data-dir")
    else:
        files.write_atomic(copy, text)


def _confirm(args: argparse.Namespace, league: matrix.Matrix, players: list[entrants.Entrant],
             competitors: dict[str, entrants.Entrant], rows: list[dict]) -> dict:
    """--confirm N: the chosen cells over the emulator, one line each as they end."""
    chosen = confirm.choose(league, players, args.confirm)
    out = Progress(len(chosen), quiet=args.quiet)
    seeds = f" x {args.confirm_seeds} seeds" if args.confirm_seeds > 1 else ""
    out.write(f"confirming {counted(len(chosen), 'cell')}{seeds} over the emulator, {league.duration_s:g} s each")

    def done(c: confirm.Confirmed) -> None:
        if c.emulated is None:
            out.ended(f"{c.cell.env.name} {c.cell.entrant.name}: FAILED: {c.error}")
            return
        parts = [f"{m} {c.simulated[m]:.3g} -> {c.emulated[m]:.3g}" for m in confirm.METRICS
                 if c.simulated.get(m) is not None and c.emulated.get(m) is not None]
        out.ended(f"{c.cell.env.name} {c.cell.entrant.name}: simulated -> emulated: {', '.join(parts)}")

    try:
        found = confirm.confirm(chosen, league, rows, competitors, args.data_dir, done, seeds=args.confirm_seeds)
    finally:
        out.close()
    return confirm.write(args.data_dir, found)


def run(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise PantheonError(f"--jobs must be at least 1, got {args.jobs}")
    if args.confirm < 0:
        raise PantheonError(f"--confirm must be a number of cells (0 or more), got {args.confirm}")
    known = schemes.registry()
    names = None if args.schemes is None else [n.strip() for n in args.schemes.split(",") if n.strip()]
    if names == []:
        raise PantheonError("--schemes names no scheme")
    players = entrants.resolve(known, names)
    league = matrix.load(args.matrix, set(simulable.simulable(known)))
    if not 1 <= args.confirm_seeds <= len(league.seeds):
        raise PantheonError(f"--confirm-seeds must be from 1 to the matrix's {len(league.seeds)} seed(s), "
                            f"got {args.confirm_seeds}")
    competitors = {name: entrants.entrant(known, name) for name in league.competitors}
    playing = {e.name for e in players}
    baselines = [e for name, e in competitors.items() if name not in playing]
    # The cluster first: a scheduler that cannot be reached leaves no data dir claimed.
    client = dask_client(args.scheduler, threads=args.jobs)
    try:
        _claim(args.data_dir, args.matrix, league.text)
    except BaseException:
        cluster.close(client)
        raise
    cells = campaign.cells(league, players, baselines)
    already = len({table.key(r) for r in campaign.done_rows(args.data_dir)} & {c.key for c in cells})
    where = f"Dask at {args.scheduler}" if args.scheduler else f"a LocalCluster of {args.jobs} threads"
    out = Progress(len(cells), quiet=args.quiet, lines=False)
    out.write(f"league {league.name}: {len(league.environments)} environments x {len(players)} schemes x "
              f"{len(league.seeds)} seed(s) = {len(cells)} runs" + (f" ({already} done before)" if already else "")
              + f"; {where} (dashboard {dashboard_link(client)})")
    started = time.monotonic()
    step = max(1, len(cells) // 10)
    shown = [already]

    def progress(p: campaign.Progress) -> None:
        if out.bar is not None:
            out.bar.update(p.done - out.bar.n)
        elif not args.quiet and (p.done - shown[0] >= step or p.done == p.total):
            shown[0] = p.done
            out.write(f"[{p.done}/{p.total}] runs done, {p.failed} failed, {p.elapsed_s:.0f} s")

    try:
        rows = campaign.run(league, cells, competitors, args.data_dir, client, progress)
    except KeyboardInterrupt:
        out.close()
        # The tasks cancelled in flight are Dask's to mention, not the user's to read.
        logging.getLogger("distributed").setLevel(logging.ERROR)
        raise KeyboardInterrupt(f"interrupted: the runs finished are journaled in {args.data_dir / campaign.PARTS_DIR}; "
                                "the same command resumes the league") from None
    finally:
        out.close()
        cluster.close(client)
    campaign.finish(args.data_dir, rows)
    data = report.summary(league, players, rows, git_commit(), time.monotonic() - started)
    if args.confirm:
        data["confirm"] = _confirm(args, league, players, competitors, rows)
    path = report.write(args.data_dir, data, rows)
    print(f"{'rank':>4}  {'scheme':<24} {'wins':>11}  {'share':>5}  {'relative':>8}")
    for r in data["ranking"][:SHOWN_RANKS]:
        name = r["scheme"] + (f" (as {r['stand_in']})" if r["stand_in"] else "")
        print(f"{r['rank']:>4}  {name:<24} {r['wins']:>5}/{r['contests']:<5}  {r['win_share']:>5.0%}  "
              f"{r['mean_relative_score']:>8.2f}")
    print(f"table: {args.data_dir / table.TABLE_FILE}; report: {path}; {data['failed_rows']} of {data['rows']} runs failed")
    return 1 if data["failed_rows"] else 0
