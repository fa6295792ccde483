"""The report a researcher puts in front of colleagues, in two forms with the same content:
report.html, one self-contained page (styles inline, figures embedded as base64 PNG, nothing
fetched, so it opens offline and can be mailed), and report.pdf, A4 pages drawn with matplotlib
(no browser needed).

Contents: first the ranking, every scheme in one table, best score first (ranking.py: the archive's
score, ln(mean throughput / mean p95 delay), each mean with its Student-t 95% confidence interval),
with a note beside the loss where the emulated path's queue was infinite (packets still queued at
the end count as lost). Where a run used ECN, every table has a column of CE marks beside the loss
(the share of delivered packets an AQM marked instead of dropping). Then, in the order of the original Pantheon's report (Yan et al., ATC 2018,
§3.2): the setup (path — emulated, or real between two hosts and which way the data flowed —
schemes and versions, runs, flows, machine), the two summary plots (each run; scheme means with
1-σ ellipses), the schemes side by side as Flent draws them (the CDF of their packets' delays, box
plots of their runs, their throughput over time), a table per scheme over its valid runs (per flow: mean ± sample standard
deviation of throughput, 95th-percentile and mean one-way delay, loss), then each run: its
numbers, flags and warnings, and its throughput and delay plots. Over a real path every one-way
delay is printed with its clock bound (how far the two hosts' clocks may be off once measured:
harness/clock.py), in the spirit of OWAMP's error estimate (RFC 4656 §4.1.2).
"""
from __future__ import annotations

import base64
import html
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.image as mpimg  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backends.backend_pdf import PdfPages  # noqa: E402

from pantheon import __version__, files, queues  # noqa: E402
from pantheon.analysis.metrics import FlowMetrics, RunMetrics, bound_text  # noqa: E402
from pantheon.analysis.ranking import Ranked  # noqa: E402
from pantheon.wording import counted  # noqa: E402

RANKING_COLUMNS = ("Scheme", "Score", "Throughput\n(Mbit/s)", "95% CI", "95th pct. delay\n(ms)", "95% CI", "Loss\n(%)",
                   "95% CI", "Runs\n(valid of all)")
RANKING_WIDTHS = [0.19, 0.07, 0.11, 0.13, 0.11, 0.12, 0.07, 0.11, 0.09]
"""Fractions of the PDF's text width."""
RANKING_NOTE = ("Score: ln(mean throughput in Mbit/s / mean 95th-percentile one-way delay in ms) over the scheme's valid runs, "
                "higher is better (the archive's). Each mean with its 95% confidence interval (Student's t, n − 1 degrees "
                "of freedom; – with fewer than two valid runs).")
INFINITE_QUEUE_NOTE = ("Loss: the emulated path's queue is infinite (no --uplink-queue, --uplink-queue-bytes or "
                       "--uplink-queue-packets) and drops nothing; packets still queued when a run ended count as lost.")
CE_COLUMN = "CE marks\n(%)"
"""Beside each "Loss\n(%)" where a run used ECN (uses_ecn)."""
CE_DEFINITION = ("CE marks: delivered packets that arrived marked Congestion Experienced / delivered packets, for "
                 "flows that sent ECN-capable packets (RFC 3168: an AQM marks such a packet where it would drop "
                 "another); – for flows without ECN.")
FIGURE_CAPTIONS = {
    "runs": "Each valid run: average throughput against 95th-percentile one-way delay.",
    "means": "Per scheme: mean of its valid runs and the 1-σ ellipse of their spread.",
    "cdf": "Per scheme: the CDF of the one-way delays of its valid runs' packets, pooled.",
    "boxes": "Per scheme: its valid runs' throughput and 95th-percentile delay (quartiles, whiskers to 1.5 IQR, "
             "each run a dot).",
    "overlay": "Throughput over time of each scheme's first valid run, in the bins of the runs' plots.",
    "fct_cdf": "Per scheme: the CDF of the completion times of its valid runs' transfers, pooled (completed ones).",
    "slowdown_cdf": "Per scheme: the CDF of the same transfers' slowdown, FCT / the ideal FCT on the empty path.",
    "slowdown_size": "Per scheme: the slowdown's median and 99th percentile by transfer size, as HPCC and Homa report it.",
    "harm": "Harm (Ware et al., HotNets 2019) that the row's scheme does to the column's, relative to the column's "
            "scheme sharing with itself: the share of its throughput lost and of its 95th-percentile delay added, "
            "with each 95% interval.",
}
FIGURE_SECTIONS = (("Throughput and delay", ("runs", "means")), ("Schemes side by side", ("cdf", "boxes", "overlay")),
                   ("Transfers", ("fct_cdf", "slowdown_cdf", "slowdown_size")), ("Harm", ("harm",)))
"""The report's sections of data-dir figures, each shown where any of its figures was drawn."""
WIDE_FIGURES = ("boxes", "overlay", "slowdown_size", "harm")
RUN_FIGURES = ("throughput", "delay", "probe_rtt")
SCHEME_COLUMNS = ("Flow", "Throughput\n(Mbit/s)", "95th pct. delay\n(ms)", "Mean delay\n(ms)", "Loss\n(%)")
RUN_COLUMNS = ("Flow", "Throughput\n(Mbit/s)", "Sending rate\n(Mbit/s)", "95th pct. delay\n(ms)", "Mean delay\n(ms)",
               "Median delay\n(ms)", "Loss\n(%)", "Delivered\n(packets)")
"""Column headers; a newline breaks a header in two (a <br> in HTML). Delay headers say "(ms)";
over a real path they say what the ± beside each delay is (with_clock)."""
DEFINITIONS = (
    "Throughput: bits delivered over the time from the first delivery to the last. Sending rate: likewise for the sends.",
    "Delay: one-way, per packet (receive − send time); 95th percentile by nearest rank (the ⌈0.95 n⌉-th smallest).",
    "Loss: 1 − bytes delivered / bytes sent; packets still queued when the run ended count as lost.",
    "Capacity: the bottleneck's delivery opportunities over their span; utilization = all flows' throughput / capacity.",
    "Jain's index (Σx)²/(n Σx²) of the flows' throughputs; power = ln(throughput in Mbit/s / 95th pct. delay in ms).",
    "Scheme tables: mean ± sample standard deviation over the valid runs (not failed, not shorter than 80 % of the "
    "configured time). Definitions in full: docs/analysis.md.",
)
CLOCK_DEFINITION = (
    "Clock bound (a real path): a one-way delay subtracts a send time on one host's clock from a receive time on the "
    "other's. The remote clock's offset and drift were measured over the path during each run, and each delay is within "
    "± the bound of the truth: half the least round trip of the clock exchanges kept plus the fit's residual "
    "(docs/clocks.md). A run whose delays fell below zero after the correction, or whose remote clock stepped, is flagged."
)


WORKLOAD_DEFINITION = (
    "Transfers: FCT = the receiver's last byte − the sender's start; slowdown = FCT / ideal FCT, the ideal being "
    "handshake round trips (1 for kernel TCP, 0 for pantheon-udp) × base RTT + base one-way delay (the path's plus "
    "the flow's extra delay) + its bytes on the wire (1500 per packet) / the capacity. Probe RTT: a probe datagram's "
    "acknowledgement's arrival − its send; idle: probes sent while no other flow was active. RTT fairness: the "
    "shortest-RTT bulk flows' mean throughput / the longest-RTT ones'. Percentiles by nearest rank.")


def with_clock(header: tuple[str, ...], bound_ms: float | None, run: bool) -> tuple[str, ...]:
    """The headers, the delay ones saying what the ± beside a delay is where clocks were measured:
    in a run's table each delay is followed by its clock bound, in a scheme's the ± is the runs'
    spread and the header gives the bound."""
    if bound_ms is None:
        return header
    unit = "(ms ± clock)" if run else f"(ms; clock ± {bound_text(bound_ms)})"
    return tuple(h.replace("(ms)", unit) if "delay" in h else h for h in header)

def _num(value: float | None, digits: int = 2, scale: float = 1.0) -> str:
    return "–" if value is None else f"{value * scale:.{digits}f}"


def _mean_sd(stat: dict, digits: int = 2, scale: float = 1.0) -> str:
    if stat["mean"] is None:
        return "–"
    sd = f" ± {stat['sd'] * scale:.{digits}f}" if stat["sd"] is not None else ""
    return f"{stat['mean'] * scale:.{digits}f}{sd}"


def _clock_line(clock: dict | None) -> str:
    """What was measured of the remote host's clock in a run; empty for a local run."""
    if not clock:
        return ""
    return (f"Clocks: the remote host's clock read {clock['offset_us'] / 1000:+.3f} ms from the local one, drifting "
            f"{clock['drift_us_per_s']:+.1f} µs/s; {clock['kept']} of {clock['exchanges']} exchanges kept, least round "
            f"trip {clock['min_rtt_us'] / 1000:.3f} ms; each one-way delay ± {bound_text(clock['bound_us'] / 1000)} ms.")


def _run_line(run: RunMetrics) -> str:
    parts = []
    if run.capacity_mbps:
        parts.append(f"capacity {run.capacity_mbps:.2f} Mbit/s")
    if run.utilization is not None:
        parts.append(f"utilization {100 * run.utilization:.1f} %")
    if run.jain_index is not None:
        parts.append(f"Jain's index {run.jain_index:.3f}")
    if run.power is not None:
        parts.append(f"power {run.power:.2f}")
    if run.rtt_fairness is not None:
        parts.append(f"RTT fairness {run.rtt_fairness:.2f} (shortest / longest RTT's throughput)")
    return " · ".join(parts)


def workload_lines(run: RunMetrics) -> list[str]:
    """Per flow with a workload, its numbers in one line: a finite flow's FCT and slowdown, a flow
    of transfers' percentiles, a probes flow's RTT under load and idle."""
    lines = []
    for m in run.flows:
        if m.fct_ms is not None:
            slowdown = f", slowdown {m.slowdown:.2f}" if m.slowdown is not None else ""
            lines.append(f"Flow {m.flow}: FCT {m.fct_ms:.1f} ms{slowdown}")
        if m.transfers is not None:
            t = m.transfers
            late = m.start_lateness_ms or {}
            lines.append(f"Flow {m.flow}: {t['completed']:,} of {t['count']:,} transfers complete; FCT p50 "
                         f"{_num(t['fct_ms']['p50'], 1)} ms, p99 {_num(t['fct_ms']['p99'], 1)} ms; slowdown p50 "
                         f"{_num(t['slowdown']['p50'])}, p99 {_num(t['slowdown']['p99'])}; start lateness p99 "
                         f"{_num(late.get('p99'), 1)} ms")
        if m.probe_rtt_ms is not None:
            idle = m.probe_rtt_idle_ms
            without = (f" (idle path: p50 {_num(idle['p50'], 1)}, p99 {_num(idle['p99'], 1)} ms)" if idle else "")
            lines.append(f"Flow {m.flow}: probe RTT p50 {_num(m.probe_rtt_ms['p50'], 1)} ms, "
                         f"p99 {_num(m.probe_rtt_ms['p99'], 1)} ms{without}")
    return lines


def _summary_line(summary: dict) -> str:
    run = summary["run"]
    parts = []
    if run["capacity_mbps"]["mean"] is not None:
        parts.append(f"capacity {_mean_sd(run['capacity_mbps'])} Mbit/s")
    if run["utilization"]["mean"] is not None:
        parts.append(f"utilization {_mean_sd(run['utilization'], 1, 100)} %")
    if run["jain_index"]["mean"] is not None:
        parts.append(f"Jain's index {_mean_sd(run['jain_index'], 3)}")
    if summary["power_of_means"] is not None:
        parts.append(f"power of the means {summary['power_of_means']:.2f}")
    return " · ".join(parts)


def _ci(stat: dict, digits: int = 2, scale: float = 1.0) -> str:
    if stat["ci_low"] is None:
        return "–"
    return f"{stat['ci_low'] * scale:.{digits}f}–{stat['ci_high'] * scale:.{digits}f}"


def uses_ecn(analysis) -> bool:
    """Whether a run of the data dir had a flow that sent ECN-capable packets (its ce_rate is a number)."""
    return any(r.metrics.all.ce_rate is not None for r in analysis.runs)


def with_ce(header: tuple[str, ...], ecn: bool, after: str = "Loss\n(%)") -> tuple[str, ...]:
    """The header with CE_COLUMN after the column `after` (the loss, or the ranking's loss CI) where `ecn`."""
    if not ecn:
        return header
    at = header.index(after, header.index("Loss\n(%)")) + 1
    return (*header[:at], CE_COLUMN, *header[at:])


def ranking_header(analysis) -> tuple[str, ...]:
    ecn = uses_ecn(analysis)
    return with_ce(with_clock(RANKING_COLUMNS, _ranking_bound(analysis), run=False), ecn, after="95% CI")


def ranking_rows(ranking: list[Ranked], display, ecn: bool = False) -> list[list[str]]:
    """One row per scheme in the ranking's order, the ranked ones numbered; with `ecn` the mean
    share of CE-marked deliveries after the loss."""
    rows = []
    for i, r in enumerate(ranking, 1):
        name = f"{i}. {display(r.label)}" if r.score is not None else display(r.label)
        ce = [_num(r.ce_rate["mean"], 2, 100)] if ecn else []
        rows.append([name, _num(r.score), _num(r.throughput_mbps["mean"]), _ci(r.throughput_mbps),
                     _num(r.delay_p95_ms["mean"], 1), _ci(r.delay_p95_ms, 1), _num(r.loss_rate["mean"], 2, 100),
                     _ci(r.loss_rate, 2, 100), *ce, f"{r.valid_runs} of {r.runs}"])
    return rows


def unranked_line(analysis, display) -> str:
    """The schemes without a valid run, each with why (the first flag of its first run)."""
    from pantheon.analysis.analyze import no_valid_run

    why = no_valid_run(analysis.runs)
    return "; ".join(f"{display(label)}: no valid run ({reason})" for label, reason in why.items())


def infinite_queue(analysis) -> bool:
    """Whether the data flowed through an emulated queue without a limit: an emulated or simulated
    path (metadata's emulator_options; none is the default path) whose uplink, the data's way, has
    the infinite queue (no limit, no AQM: queues.py reads it). Unknown (the original Pantheon's
    data dirs, a real path) is False."""
    meta = analysis.data.metadata
    if analysis.data.layout != "harness" or "remote" in meta:
        return False
    return queues.Queue.of(meta.get("emulator_options") or [], "uplink").infinite


def _ranking_bound(analysis) -> float | None:
    bounds = [s["delay_bound_ms"] for s in analysis.summaries.values() if s.get("delay_bound_ms") is not None]
    return max(bounds) if bounds else None


def _ranking_notes(analysis, display) -> list[str]:
    notes = [RANKING_NOTE]
    if infinite_queue(analysis):
        notes.append(INFINITE_QUEUE_NOTE)
    if line := unranked_line(analysis, display):
        notes.append(f"Not ranked: {line}.")
    return notes


def scheme_rows(summary: dict, ecn: bool = False) -> list[list[str]]:
    def row(name: str, s: dict) -> list[str]:
        ce = [_mean_sd(s["ce_rate"], 2, 100) if "ce_rate" in s else "–"] if ecn else []
        return [name, _mean_sd(s["throughput_mbps"]), _mean_sd(s["delay_p95_ms"], 1), _mean_sd(s["delay_mean_ms"], 1),
                _mean_sd(s["loss_rate"], 2, 100), *ce]
    rows = [row(f"Flow {flow}", s) for flow, s in summary["flows"].items()]
    if len(rows) != 1:
        rows.append(row("All flows", summary["all"]))
    return rows


def run_rows(run: RunMetrics, display, ecn: bool = False) -> list[list[str]]:
    """Per flow, then all flows; a flow's scheme is named beside it when the run mixes schemes;
    each delay followed by the run's clock bound where it has one; with `ecn` the CE marks after the loss."""
    mixed = len({m.scheme for m in run.flows}) > 1
    bound = f" ± {bound_text(run.delay_bound_ms)}" if run.delay_bound_ms is not None else ""

    def delay(value: float | None) -> str:
        return _num(value, 1) + (bound if value is not None else "")

    def row(m: FlowMetrics) -> list[str]:
        name = "All flows" if m.flow == "all" else f"Flow {m.flow}" + (f" ({display(m.scheme)})" if mixed and m.scheme else "")
        ce = [_num(m.ce_rate, 2, 100)] if ecn else []
        return [name, _num(m.throughput_mbps), _num(m.ingress_mbps), delay(m.delay_p95_ms), delay(m.delay_mean_ms),
                delay(m.delay_median_ms), _num(m.loss_rate, 2, 100), *ce, f"{m.delivered_packets:,} of {m.sent_packets:,}"]
    return [row(m) for m in run.flows] + ([row(run.all)] if len(run.flows) != 1 else [])


def _title(analysis) -> tuple[str, str]:
    labels = list(analysis.summaries)
    valid = sum(r.metrics.valid for r in analysis.runs)
    sub = (f"{analysis.data.path.resolve().name} · {counted(len(analysis.runs), 'run')} of {counted(len(labels), 'scheme')}, "
           f"{valid} valid · pantheon analyze {__version__}")
    if analysis.data.metadata.get("simulated"):
        sub += f" · simulated by pantheon-sim {analysis.data.metadata.get('simulator', {}).get('version', '')}".rstrip()
    if "remote" in analysis.data.metadata:
        sub += " · a real path between two hosts"
    return "Pantheon report", sub


def _scheme_order(analysis) -> list[str]:
    """The ranking's order, where there is one."""
    return [r.label for r in analysis.ranking] or list(analysis.summaries)


def _definitions(analysis) -> tuple[str, ...]:
    workloads = any(r.workloads is not None or r.metrics.rtt_fairness is not None for r in analysis.runs)
    return (DEFINITIONS + ((CE_DEFINITION,) if uses_ecn(analysis) else ()) + ((WORKLOAD_DEFINITION,) if workloads else ())
            + ((CLOCK_DEFINITION,) if any(r.metrics.delay_bound_ms is not None for r in analysis.runs) else ()))


# --- HTML -------------------------------------------------------------------------------------

CSS = """
body { margin: 0; background: #f6f6f4; color: #1d1d1f; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto,
       "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1120px; margin: 0 auto; padding: 32px 40px 64px; background: #fff; box-shadow: 0 0 12px rgba(0,0,0,.06); }
h1 { font-size: 28px; margin: 0 0 4px; letter-spacing: -.01em; }
h2 { font-size: 20px; margin: 40px 0 12px; padding-bottom: 6px; border-bottom: 1px solid #e3e3e0; }
h3 { font-size: 16px; margin: 28px 0 8px; display: flex; align-items: center; gap: 8px; }
.sub { color: #666; margin: 0; }
.swatch { width: 12px; height: 12px; border-radius: 3px; display: inline-block; }
.muted { color: #666; font-weight: normal; font-size: 14px; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 6px 0; }
th, td { padding: 5px 12px; text-align: right; border-bottom: 1px solid #ecece9; white-space: nowrap; }
th { font-weight: 600; color: #444; border-bottom: 1.5px solid #bbb; font-size: 13px; }
td:first-child, th:first-child { text-align: left; }
tr.total td { font-weight: 600; }
table.setup th { text-align: left; border: none; color: #666; font-weight: 500; padding: 3px 24px 3px 0; vertical-align: top; }
table.setup td { text-align: left; border: none; padding: 3px 0; white-space: normal; }
code { font: 13px/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; background: #f3f3f1; padding: 1px 4px;
       border-radius: 3px; }
.figs { display: flex; flex-wrap: wrap; gap: 16px; }
.figs figure { flex: 1 1 480px; margin: 0; }
figure img { width: 100%; height: auto; display: block; }
.line { color: #444; font-size: 14px; margin: 4px 0 0; }
.flag { display: inline-block; background: #fdecea; color: #a32020; border-radius: 4px; padding: 1px 8px; font-size: 13px;
        margin: 2px 6px 2px 0; }
.warn { display: block; background: #fff6e0; color: #7a5200; border-radius: 4px; padding: 2px 8px; font-size: 13px; margin: 3px 0; }
.run { margin-top: 8px; padding-top: 4px; }
ol.defs { color: #444; font-size: 14px; padding-left: 20px; }
footer { margin-top: 48px; color: #888; font-size: 13px; }
"""


def image_html(path: Path, alt: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def table_html(header: tuple[str, ...], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h).replace(chr(10), '<br>')}</th>" for h in header)
    body = "".join(
        f'<tr{" class=total" if r[0] == "All flows" else ""}>' + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
        for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_report(analysis, display) -> str:
    title, sub = _title(analysis)
    looks = analysis.data.looks
    ecn = uses_ecn(analysis)
    parts = [f"<header><h1>{title}</h1><p class=sub>{html.escape(sub)}</p></header>", "<h2>Ranking</h2>",
             table_html(ranking_header(analysis), ranking_rows(analysis.ranking, display, ecn)),
             *(f"<p class=line>{html.escape(note)}</p>" for note in _ranking_notes(analysis, display)),
             "<h2>Setup</h2><table class=setup>"]
    for what, value in analysis.data.setup:
        shown = f"<code>{html.escape(value)}</code>" if what == "Emulator options" else html.escape(value)
        parts.append(f"<tr><th>{html.escape(what)}</th><td>{shown}</td></tr>")
    parts.append("</table>")
    for heading, keys in FIGURE_SECTIONS:
        if not any(key in analysis.figures for key in keys):
            continue
        parts.append(f"<h2>{heading}</h2><div class=figs>")
        for key in (key for key in keys if key in analysis.figures):
            caption = FIGURE_CAPTIONS[key]
            wide = " style='flex-basis: 100%'" if key in WIDE_FIGURES else ""
            parts.append(f"<figure{wide}>{image_html(analysis.figures[key], caption)}"
                         f"<figcaption class=line>{caption}</figcaption></figure>")
        parts.append("</div>")
    parts.append("<h2>Schemes</h2>")
    for label in _scheme_order(analysis):
        summary = analysis.summaries[label]
        look = looks[label]
        parts.append(f'<h3><span class=swatch style="background:{look.color}"></span>{html.escape(look.display)}'
                     f' <span class=muted>{summary["valid_runs"]} valid of {summary["runs"]} runs</span></h3>')
        if summary["valid_runs"]:
            parts.append(table_html(with_ce(with_clock(SCHEME_COLUMNS, summary["delay_bound_ms"], run=False), ecn),
                                    scheme_rows(summary, ecn)))
            parts.append(f"<p class=line>{html.escape(_summary_line(summary))}</p>")
        else:
            parts.append("<p class=line>No valid run: see the flags of its runs below.</p>")
    parts.append("<h2>Runs</h2>")
    for result in analysis.runs:
        source, run = result.source, result.metrics
        look = looks[source.label]
        parts.append(f'<div class=run><h3><span class=swatch style="background:{look.color}"></span>'
                     f'{html.escape(look.display)}, run {source.number}</h3>')
        parts += [f"<span class=flag>{html.escape(f)}</span>" for f in run.flags]
        parts += [f"<span class=warn>{html.escape(w)}</span>" for w in result.warnings]
        if run.flows:
            parts.append(table_html(with_ce(with_clock(RUN_COLUMNS, run.delay_bound_ms, run=True), ecn),
                                    run_rows(run, display, ecn)))
            if line := _run_line(run):
                parts.append(f"<p class=line>{html.escape(line)}</p>")
            parts += [f"<p class=line>{html.escape(line)}</p>" for line in workload_lines(run)]
        if line := _clock_line(source.clock):
            parts.append(f"<p class=line>{html.escape(line)}</p>")
        for key in RUN_FIGURES:
            if key in result.figures:
                parts.append(f"<figure>{image_html(result.figures[key], f'{look.display} run {source.number} {key}')}</figure>")
        parts.append("</div>")
    parts.append("<h2>Definitions</h2><ol class=defs>" + "".join(f"<li>{html.escape(d)}</li>" for d in _definitions(analysis)) + "</ol>")
    parts.append(f"<footer>Written by pantheon analyze {__version__}. The numbers are in perf.json and perf.csv beside "
                 "this page.</footer>")
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">'
            f"<title>{html.escape(title)}: {html.escape(analysis.data.path.resolve().name)}</title><style>{CSS}</style></head>"
            f"<body><main>{''.join(parts)}</main></body></html>\n")


# --- PDF --------------------------------------------------------------------------------------

A4_IN = (8.27, 11.69)
LEFT, RIGHT, TOP, BOTTOM = 0.08, 0.92, 0.94, 0.05


class PdfPagesWriter:
    """Flows headings, text, tables and images down A4 pages, starting a page when one is full."""

    def __init__(self, path: Path) -> None:
        self.pdf = PdfPages(path, metadata={"Title": "Pantheon report", "Creator": f"pantheon analyze {__version__}"})
        self.fig = plt.figure(figsize=A4_IN)
        self.page = 1
        self.y = TOP

    def _line_height(self, points: float) -> float:
        return points * 1.45 / 72 / A4_IN[1]

    def new_page(self) -> None:
        self._finish_page()
        self.fig = plt.figure(figsize=A4_IN)
        self.page += 1
        self.y = TOP

    def _finish_page(self) -> None:
        self.fig.text(RIGHT, 0.025, f"{self.page}", ha="right", fontsize=8, color="#888888")
        self.pdf.savefig(self.fig)
        plt.close(self.fig)

    def room(self, height: float) -> None:
        if self.y - height < BOTTOM:
            self.new_page()

    def text(self, text: str, size: float = 9, color: str = "#222222", weight: str = "normal", wrap: int = 110,
             x: float = LEFT, gap: float = 0.0) -> None:
        for line in textwrap.wrap(text, wrap, break_on_hyphens=False) or [""]:
            self.room(self._line_height(size))
            self.fig.text(x, self.y, line, fontsize=size, color=color, weight=weight, va="top")
            self.y -= self._line_height(size)
        self.y -= gap

    def heading(self, text: str, size: float = 13, color: str | None = None, keep_with: float = 0.12) -> None:
        self.room(self._line_height(size) + keep_with)
        self.y -= 0.006
        if color:
            self.fig.patches.append(plt.Rectangle((LEFT, self.y - 0.011), 0.012, 0.0085, color=color,
                                                  transform=self.fig.transFigure, figure=self.fig))
        self.fig.text(LEFT + (0.02 if color else 0), self.y, text, fontsize=size, weight="bold", va="top", color="#111111")
        self.y -= self._line_height(size) + 0.004

    def table(self, header: tuple[str, ...], rows: list[list[str]], widths: list[float], size: float = 8) -> None:
        """Columns of the given widths (fractions of the text width); first left-aligned, the rest right."""
        height = self._line_height(size) * 1.25
        inches = [w * (RIGHT - LEFT) * A4_IN[0] for w in widths]
        # headers wrapped to their column: about 0.7 em per bold character, to be safe
        header = tuple(textwrap.fill(h.replace("\n", " "), max(6, int(w * 72 / (size * 0.7))), break_on_hyphens=False)
                       for h, w in zip(header, inches))
        header_lines = max(h.count("\n") + 1 for h in header)
        self.room(height * (len(rows) + header_lines))
        edges = [LEFT]
        for w in widths:
            edges.append(edges[-1] + w * (RIGHT - LEFT))
        for i, row in enumerate([list(header), *rows]):
            for j, cell in enumerate(row):
                x = edges[j] if j == 0 else edges[j + 1] - 0.005
                self.fig.text(x, self.y, cell, fontsize=size, va="top", ha="left" if j == 0 else "right",
                              multialignment="left" if j == 0 else "right", linespacing=1.2,
                              weight="bold" if i == 0 or row[0] == "All flows" else "normal",
                              color="#444444" if i == 0 else "#111111")
            self.y -= height * (header_lines if i == 0 else 1)
            line_color = "#999999" if i == 0 else "#e4e4e4"
            self.fig.add_artist(plt.Line2D([LEFT, RIGHT], [self.y + height * 0.2] * 2, color=line_color, linewidth=0.6,
                                           transform=self.fig.transFigure))
        self.y -= 0.006

    def image(self, path: Path, width: float = RIGHT - LEFT, x: float = LEFT, advance: bool = True) -> float:
        picture = mpimg.imread(path)
        height = width * A4_IN[0] * picture.shape[0] / picture.shape[1] / A4_IN[1]
        if advance:
            self.room(height)
        ax = self.fig.add_axes((x, self.y - height, width, height))
        ax.imshow(picture, interpolation="none")  # embedded as is: no resampling, crisp and fast
        ax.set_axis_off()
        if advance:
            self.y -= height + 0.01
        return height

    def close(self) -> None:
        self._finish_page()
        self.pdf.close()


def pdf_report(analysis, display, path: Path) -> Path:
    with files.atomic_path(path) as tmp:
        _pdf_pages(analysis, display, PdfPagesWriter(tmp))
    return path


def _widths(widths: list[float], ecn: bool, at: int, ce_width: float = 0.08) -> list[float]:
    """A table's column widths, with the CE column's inserted at `at` where `ecn` and the others
    narrowed to keep the total."""
    if not ecn:
        return widths
    scale = (sum(widths) - ce_width) / sum(widths)
    narrowed = [w * scale for w in widths]
    return [*narrowed[:at], ce_width, *narrowed[at:]]


def _pdf_pages(analysis, display, pages: PdfPagesWriter) -> None:
    title, sub = _title(analysis)
    looks = analysis.data.looks
    ecn = uses_ecn(analysis)
    pages.text(title, size=20, weight="bold")
    pages.text(sub, size=9, color="#666666", gap=0.012)
    pages.heading("Ranking")
    pages.table(ranking_header(analysis), ranking_rows(analysis.ranking, display, ecn),
                _widths(RANKING_WIDTHS, ecn, at=8), size=7.5)
    for note in _ranking_notes(analysis, display):
        pages.text(note, size=8, color="#444444", gap=0.003, wrap=125)
    pages.y -= 0.006
    pages.heading("Setup")
    for what, value in analysis.data.setup:
        y = pages.y
        pages.text(what, size=8.5, color="#666666")
        pages.y = y
        pages.text(value, size=8.5, x=LEFT + 0.17, wrap=95)
    pages.y -= 0.01
    if analysis.figures:
        pages.heading("Throughput and delay", keep_with=0.3)
        half = (RIGHT - LEFT - 0.02) / 2
        height = pages.image(analysis.figures["runs"], width=half, advance=False)
        pages.image(analysis.figures["means"], width=half, x=LEFT + half + 0.02, advance=False)
        pages.y -= height + 0.012
    if "cdf" in analysis.figures:
        pages.heading("Schemes side by side", keep_with=0.3)
        pages.image(analysis.figures["cdf"], width=(RIGHT - LEFT) * 0.6)
        pages.image(analysis.figures["boxes"])
        pages.image(analysis.figures["overlay"])
    if "fct_cdf" in analysis.figures:
        pages.heading("Transfers", keep_with=0.3)
        half = (RIGHT - LEFT - 0.02) / 2
        height = pages.image(analysis.figures["fct_cdf"], width=half, advance=False)
        pages.image(analysis.figures["slowdown_cdf"], width=half, x=LEFT + half + 0.02, advance=False)
        pages.y -= height + 0.012
        pages.image(analysis.figures["slowdown_size"])
    if "harm" in analysis.figures:
        pages.heading("Harm", keep_with=0.3)
        pages.image(analysis.figures["harm"])
        pages.text(FIGURE_CAPTIONS["harm"], size=8, color="#444444", gap=0.006, wrap=125)
    pages.heading("Schemes")
    for label in _scheme_order(analysis):
        summary = analysis.summaries[label]
        look = looks[label]
        pages.heading(f"{look.display}  ({summary['valid_runs']} of {summary['runs']} runs valid)", size=10, color=look.color,
                      keep_with=0.08)
        if summary["valid_runs"]:
            pages.table(with_ce(with_clock(SCHEME_COLUMNS, summary["delay_bound_ms"], run=False), ecn),
                        scheme_rows(summary, ecn), _widths([0.2, 0.2, 0.2, 0.2, 0.2], ecn, at=5))
            pages.text(_summary_line(summary), size=8, color="#444444", gap=0.006, wrap=140)
        else:
            pages.text("No valid run: see the flags of its runs below.", size=8, color="#444444")
    for result in analysis.runs:
        source, run = result.source, result.metrics
        look = looks[source.label]
        pages.new_page()
        pages.heading(f"{look.display}, run {source.number}", color=look.color)
        for flag in run.flags:
            pages.text(f"Flagged: {flag}", size=8.5, color="#a32020")
        for warning in result.warnings:
            pages.text(f"Warning: {warning}", size=8.5, color="#7a5200")
        if run.flows:
            pages.table(with_ce(with_clock(RUN_COLUMNS, run.delay_bound_ms, run=True), ecn), run_rows(run, display, ecn),
                        _widths([0.18, 0.11, 0.11, 0.11, 0.1, 0.1, 0.08, 0.21], ecn, at=7), size=7.5)
            if line := _run_line(run):
                pages.text(line, size=8, color="#444444", gap=0.006, wrap=140)
            for line in workload_lines(run):
                pages.text(line, size=8, color="#444444", gap=0.003, wrap=140)
        if line := _clock_line(source.clock):
            pages.text(line, size=8, color="#444444", gap=0.006, wrap=140)
        for key in RUN_FIGURES:
            if key in result.figures:
                pages.image(result.figures[key])
    pages.new_page()
    pages.heading("Definitions")
    for i, definition in enumerate(_definitions(analysis), 1):
        pages.text(f"{i}. {definition}", size=8.5, wrap=115, gap=0.003)
    pages.close()


def write_reports(analysis, out: Path, display) -> list[Path]:
    """report.html and report.pdf; display(scheme) names a scheme for readers."""
    html_path = out / "report.html"
    files.write_atomic(html_path, html_report(analysis, display))
    return [html_path, pdf_report(analysis, display, out / "report.pdf")]
