"""`pantheon analyze DATA_DIR`, and the analysis at the end of `pantheon test`. The analysis
itself (matplotlib above all) is imported only when it runs, so other subcommands start quickly."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pantheon.analysis import DEFAULT_BIN_MS


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "analyze", help="metrics, plots and a report of a data dir (pantheon analyze DATA_DIR)",
        description="Analyse every run of a data dir (of pantheon test, or of the original Pantheon): "
        "throughput, 95th-percentile one-way delay, loss, capacity, fairness; plots over time per run, "
        "throughput against delay per scheme; perf.json, perf.csv, perf.parquet, report.html, report.pdf. "
        "Definitions: docs/analysis.md.",
        epilog="example:\n  pantheon analyze data/nepal --bin-ms 100",
    )
    parser.add_argument("data_dir", type=Path, metavar="DATA_DIR", help="a data dir (pantheon test --data-dir)")
    parser.add_argument("--bin-ms", type=float, default=DEFAULT_BIN_MS, help="time bin of the plots over time, ms (default 500)")
    parser.add_argument("--out", type=Path, help="where the outputs go (default: DATA_DIR; run plots stay beside each run)")
    parser.add_argument("--no-plots", action="store_true", help="numbers only: perf.json and the table, no plots or report")
    parser.add_argument("--no-report", action="store_true", help="no report.html / report.pdf")
    parser.add_argument("--quiet", action="store_true", help="no progress lines (warnings are still printed)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pantheon.analysis.analyze import analyze

    analysis = analyze(args.data_dir, out=args.out, bin_ms=args.bin_ms, draw=not args.no_plots,
                       reports=not args.no_report, quiet=args.quiet)
    if not args.quiet:
        print(summary_text(analysis))
    return 0


def after_campaign(data_dir: Path, quiet: bool) -> bool:
    """The analysis at the end of `pantheon test`: never raises, so a failure cannot lose the
    campaign's data or change its exit status; says in one line what went wrong instead."""
    try:
        from pantheon.analysis.analyze import analyze

        analysis = analyze(data_dir, quiet=True)
    except Exception as e:  # noqa: BLE001 - any failure here is reported, the data stays
        print(f"pantheon: analysis of {data_dir} failed ({type(e).__name__}: {e}); "
              f"the data is intact, retry with: pantheon analyze {data_dir}", file=sys.stderr)
        return False
    if not quiet:
        print(summary_text(analysis), file=sys.stderr)
    return True


def _first_run(analysis, label: str) -> int:
    return next(r.source.number for r in analysis.runs if r.source.label == label)


def campaign_line(data_dir: Path, runs: int, failed: int) -> str:
    """The line a campaign ends with: how many runs ran to the end, and how many of them the
    analysis counts as valid (analyze.verdict_line: its rule, not a second copy), with why
    where one is not. Never raises, so a campaign's data and exit status do not depend on it."""
    try:
        from pantheon.analysis.analyze import verdict_line

        verdict = verdict_line(data_dir)
    except Exception as e:  # noqa: BLE001 - the campaign's line must be printed whatever the data holds
        verdict = f"not judged ({type(e).__name__}: {e})"
    return f"pantheon: {runs - failed} of {runs} runs ok, {verdict}; data in {data_dir}"


def summary_text(analysis) -> str:
    """A few lines for the terminal, in the report's ranking order (best score first): per scheme,
    its score and the mean throughput, delay and loss of its valid runs (and CE marks where its
    flows used ECN); the schemes without a valid run last, each with why."""
    from pantheon.analysis.analyze import display_name, no_valid_run
    from pantheon.analysis.metrics import bound_text

    why = no_valid_run(analysis.runs)
    lines = [f"Real path, data flowing {value}" for what, value in analysis.data.setup if what == "Data flow"]
    order = [r.label for r in analysis.ranking] or list(analysis.summaries)
    scores = {r.label: r.score for r in analysis.ranking}
    for label in order:
        s = analysis.summaries[label]
        tput, delay, loss = (s["all"][k]["mean"] for k in ("throughput_mbps", "delay_p95_ms", "loss_rate"))
        clock = f" ± {bound_text(s['delay_bound_ms'])} ms (clock)" if s.get("delay_bound_ms") is not None else ""
        if label in why:
            lines.append(f"{display_name(analysis.data, label)}: no valid run ({s['valid_runs']} of {s['runs']} runs valid); "
                         f"run {_first_run(analysis, label)}: {why[label]}")
            continue
        score = f"score {scores[label]:.2f}: " if scores.get(label) is not None else "no score: "
        ce_rate = s["all"].get("ce_rate", {}).get("mean")
        ce = f", CE marks {100 * ce_rate:.2f} %" if ce_rate is not None else ""
        lines.append(f"{display_name(analysis.data, label)}: {score}{tput:.2f} Mbit/s, 95th percentile delay {delay:.1f} ms"
                     f"{clock}, loss {100 * loss:.2f} %{ce} ({s['valid_runs']} of {s['runs']} runs valid)")
    lines.append(f"pantheon analyze: wrote {len(analysis.files)} files; perf.json and the report are in {analysis.out}")
    return "\n".join(lines)
