"""Every run of a data dir through the metrics, the plots and the reports (the original Pantheon's `analyze` step; Yan et al., ATC 2018, §3.2).

Writes, into the data dir (or --out):
    perf.json, perf.csv, perf.parquet   the metrics (perf.py)
    summary_runs.png, summary_means.png throughput against 95th-percentile delay (plots.py)
    report.html, report.pdf             the report (report.py)
and beside each run's records its throughput.png and delay.png (for the original Pantheon's
layout: SCHEME_runK_throughput.png and SCHEME_runK_delay.png beside its logs).

A run that failed, or moved data for less than 80 % of its configured time, is analysed and
shown but flagged, and left out of the per-scheme means. What a reader found wrong in a log is
printed as one warning line per kind of problem and kept in perf.json.
"""
from __future__ import annotations

import errno
import math
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from pantheon import __version__, files
from pantheon.analysis import MAX_BIN_MS, MIN_BIN_MS, PERF_FORMAT_VERSION, harm, logs, perf, transfers, workloads
from pantheon.analysis.datadir import DataDir, RunSource, open_data_dir
from pantheon.analysis.events import LinkEvents, Problems
from pantheon.analysis.metrics import RunMetrics, bound_text, delivery_flags, length_flags, run_metrics, scheme_summary
from pantheon.analysis.ranking import Ranked, rank
from pantheon.analysis.series import DEFAULT_BIN_MS, binned
from pantheon.analysis.workloads import RunWorkloads, has_workloads
from pantheon.errors import PantheonError

LATE_FLOW_MS = 100.0
"""A flow whose harness started it later than this is said to have started late: its launcher
polls every 5 ms and a scheme's process takes tens of ms to start, so 100 ms is the harness
falling behind (50 bulk flows released at once started up to 2.4 s late: issue 35 §5)."""
QUIET_STEAL_PCT = 2.0
"""A run whose host had more of its CPU time stolen than this (harness/steal.py) gets a warning:
its delays and rates carry the host's stalls beyond those of the quiet host the simulator models
(pantheon-sim's host.rs: the machine stalled 1% of the time at each crossing of an
acknowledgement's way, which makes 0.6% of a thread's wake-ups 0.5 ms late). Measured on the
development VM: in runs with at most 1.7% stolen the emulator wrote 0.1–0.9% of its departures
more than 0.5 ms late, with 3.0% stolen 1.9–2.3%, with 15–22% stolen 14–23% (harness/steal.py)."""


def host_was_stolen(steal_pct: float | None) -> bool:
    """Whether a run's host had more of its CPU time stolen than a quiet host (QUIET_STEAL_PCT);
    False where steal was not measured."""
    return steal_pct is not None and steal_pct > QUIET_STEAL_PCT


@dataclass
class RunResult:
    source: RunSource
    metrics: RunMetrics
    warnings: list[str]
    acks: dict | None
    figures: dict[str, Path] = field(default_factory=dict)
    delay_sample_ms: np.ndarray | None = None
    """A valid drawn run's one-way delays, every `delay_stride`-th in delivery order (all of them
    when few), for its scheme's delay CDF: kept, where the events are not, at a bounded size."""
    delay_stride: int = 1
    throughput_over_time: tuple[np.ndarray, np.ndarray] | None = None
    """A valid drawn run's all-flows throughput per bin (bin start s, Mbit/s), as in its plot."""
    workloads: RunWorkloads | None = None
    """The run's completed transfers and probe RTTs, where it had workloads (workloads.py)."""


@dataclass
class Analysis:
    data: DataDir
    runs: list[RunResult]
    summaries: dict[str, dict]
    files: list[Path]
    figures: dict[str, Path]
    out: Path
    ranking: list[Ranked] = field(default_factory=list)
    """Every scheme, best score first (ranking.rank)."""


DELAY_SAMPLE = 200_000
"""Most one-way delays a scheme's delay CDF keeps of its runs (a 30 s run at 100 Mbit/s delivers
~250 000 packets): a regular sample, deterministic, drawn in no time, whose quantiles are within
a fraction of a percentile of all the packets'."""


def _load(source: RunSource) -> tuple[LinkEvents, list[Problems]]:
    """Data-direction events of a run: exact records where they exist, else the text log;
    capacity from the text log's delivery opportunities. A logs.LogError names a file that
    cannot be read at all."""
    if source.records is not None:
        events, problems = logs.read_records(source.records)
        found = [problems]
        if source.datalink is not None:
            capacity, text_problems = logs.read_text_log(source.datalink, capacity_only=True)
            events.opportunity_t_us, events.opportunity_bytes = capacity.opportunity_t_us, capacity.opportunity_bytes
            found.append(text_problems)
        return events, found
    if source.datalink is not None:
        events, problems = logs.read_text_log(source.datalink)
        return events, [problems]
    return LinkEvents.build(([], [], []), ([], [], [], [])), []


def _ack_summary(source: RunSource) -> dict | None:
    """The reverse path, kept apart from the headline: all acknowledgements together."""
    if source.records is None:
        return None
    try:
        events, _ = logs.read_records(source.records, direction="ack")
    except logs.LogError:
        return None  # the data direction's reading said so, and flagged the run
    if not events.send_t_us.size:
        return None
    m = run_metrics(events).all
    return {"throughput_mbps": m.throughput_mbps, "delay_p95_ms": m.delay_p95_ms, "delay_mean_ms": m.delay_mean_ms,
            "loss_rate": m.loss_rate, "sent_packets": m.sent_packets, "delivered_packets": m.delivered_packets}


def display_name(data: DataDir, scheme: str) -> str:
    look = data.looks.get(scheme)
    if look:
        return look.display
    return data.metadata.get("schemes", {}).get(scheme, {}).get("display", scheme)


def judge_run(data: DataDir, source: RunSource) -> tuple[LinkEvents, RunMetrics, list[str], dict[int, str]]:
    """A run's events, metrics (their flags saying why it is not valid), the readers' warnings
    and each flow's scheme. The one verdict on a run: the analysis's, and the line a campaign
    ends with (verdict_line). A file that cannot be read flags the run, naming the file."""
    return _judge(data, source)[:4]


def _judge(data: DataDir, source: RunSource) -> tuple[LinkEvents, RunMetrics, list[str], dict[int, str], RunWorkloads | None]:
    """judge_run's, and what the report draws of the run's workloads (None without any)."""
    unreadable = []
    try:
        events, problems = _load(source)
    except logs.LogError as e:
        events, problems, unreadable = LinkEvents.build(([], [], []), ([], [], [], [])), [], [f"unreadable: {e}"]
    flow_schemes = {i + 1: f.scheme for i, f in enumerate(source.flows)}
    if not flow_schemes and source.label in data.looks:
        flow_schemes = {flow: source.label for flow in events.flows}
    metrics = run_metrics(events, flow_schemes)
    warnings = [line for p in problems for line in p.messages()]
    warnings += [f"flow {i} started {late:.0f} ms after it was due: the harness could not start it on time"
                 for i, late in enumerate(source.start_lateness_ms, start=1) if late is not None and late > LATE_FLOW_MS]
    if host_was_stolen(source.host_steal_pct):
        warnings.append(f"the hypervisor stole {source.host_steal_pct:.1f}% of the host's CPU time during the run "
                        f"(/proc/stat): its programs stood still that share of the time, so its delays and rates "
                        f"are the host's as well as the path's")
    drawn = None
    if has_workloads(source) and not unreadable:
        try:
            found, drawn = workloads.apply(data, source, events, metrics)
            warnings += found
        except (OSError, pa.ArrowException, KeyError, ValueError) as e:
            unreadable.append(f"unreadable: the workload records of {source.outputs} ({type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''})")
    flags = [f"failed: {reason}" for reason in source.failures] + source.flags + unreadable
    if source.records is None and source.datalink is None:
        flags.append("no records: the run left neither records.parquet nor datalink.log")
    elif not events.send_t_us.size and not unreadable:
        flags.append("no packets in the records")
    elif not unreadable:  # records that could not be read say nothing of what the run moved
        # A flow of finite transfers moves data only while a transfer lasts: no length to judge.
        lasting = {str(i + 1): f for i, f in enumerate(source.flows) if not f.transfers}
        starts = {flow: f.start_s for flow, f in lasting.items()}
        durations = {flow: f.duration_s for flow, f in lasting.items()}
        runtime_s = source.runtime_s if lasting or not source.flows else None
        flags += delivery_flags(metrics) + length_flags(metrics, runtime_s, durations, data.head_start_s, starts,
                                                        data.metadata.get("machine", {}).get("cpus"))
    metrics.flags = flags
    metrics.delay_bound_ms, metrics.host_steal_pct = source.delay_bound_ms, source.host_steal_pct
    return events, metrics, warnings, flow_schemes, drawn


def verdict_line(data_dir: Path) -> str:
    """How many runs of a campaign are valid, by the analysis's rule, and why the others are not
    (the first flag of the first such run): what `pantheon test` and `pantheon sim` end with, so
    that the campaign and its analysis never disagree."""
    data = open_data_dir(data_dir)
    flagged = [(source, metrics.flags) for source in data.runs
               if (metrics := judge_run(data, source)[1]).flags]
    line = f"{len(data.runs) - len(flagged)} of {len(data.runs)} runs valid"
    if flagged:
        source, flags = flagged[0]
        line += f"; {source.name}: {flags[0]}" + (f" (and {len(flagged) - 1} more flagged runs)" if len(flagged) > 1 else "")
    return line


def analyse_run(data: DataDir, source: RunSource, bin_ms: float, draw: bool, delay_sample: int = DELAY_SAMPLE) -> RunResult:
    """One run's metrics, flags (judge_run) and plots; a valid drawn run keeps at most
    `delay_sample` of its delays and its throughput over time for the report's scheme plots."""
    events, metrics, warnings, flow_schemes, drawn = _judge(data, source)
    result = RunResult(source, metrics, warnings, _ack_summary(source), workloads=drawn)
    if draw and metrics.valid:
        delays_us = events.delay_us[events.delay_us >= 0]
        result.delay_stride = max(1, math.ceil(delays_us.size / max(1, delay_sample)))
        result.delay_sample_ms = delays_us[::result.delay_stride] / 1000.0
    if draw and events.send_t_us.size:
        # Imported where drawn: matplotlib takes ~0.4 s to import, which every command that only
        # judges runs (the harness's verdict, the archive's upload check, `pantheon --help`) would pay.
        from pantheon.analysis import plots
        names = {flow: display_name(data, scheme) for flow, scheme in flow_schemes.items()}
        series = binned(events, bin_ms)
        if metrics.valid and series.throughput_mbps:
            result.throughput_over_time = (series.start_s, np.sum(list(series.throughput_mbps.values()), axis=0))
        end_s = max(t for t in (metrics.all.last_delivery_s, metrics.all.last_send_s) if t is not None)
        span = (min(0.0, metrics.all.first_send_s or 0.0), end_s + bin_ms / 1000)
        title = f"{display_name(data, source.label)}, run {source.number}"
        capacity = f"; capacity {metrics.capacity_mbps:.2f} Mbit/s (shaded)" if metrics.capacity_mbps else ""
        result.figures["throughput"] = plots.save(
            plots.throughput_figure(series, metrics, f"{title}: throughput{capacity}", names, span),
            source.outputs / f"{source.plot_prefix}throughput.png")
        bound = f" (clock ± {bound_text(metrics.delay_bound_ms)} ms)" if metrics.delay_bound_ms is not None else ""
        result.figures["delay"] = plots.save(
            plots.delay_figure(events, metrics, f"{title}: per-packet one-way delay{bound}", names, span),
            source.outputs / f"{source.plot_prefix}delay.png")
        if drawn is not None and drawn.probe_rtts:
            result.figures["probe_rtt"] = plots.save(
                plots.probe_rtt_figure(drawn.probe_rtts, f"{title}: probe round-trip time", names, span),
                source.outputs / f"{source.plot_prefix}probe_rtt.png")
    return result


def no_valid_run(results: list[RunResult]) -> dict[str, str]:
    """The schemes none of whose runs is valid, each with the first flag of its first run: what a
    reader sees instead of its numbers."""
    why: dict[str, str] = {}
    for r in results:
        why.setdefault(r.source.label, r.metrics.flags[0] if r.metrics.flags else "")
    valid = {r.source.label for r in results if r.metrics.valid}
    return {label: reason for label, reason in why.items() if label not in valid}


def analyze(data_dir: Path, *, out: Path | None = None, bin_ms: float = DEFAULT_BIN_MS, draw: bool = True,
            reports: bool = True, quiet: bool = False) -> Analysis:
    """Analyses every run of a data dir and writes the outputs; returns what it wrote."""
    # NaN compares false with everything: "<= 0" alone let it through, to a traceback.
    if not (math.isfinite(bin_ms) and MIN_BIN_MS <= bin_ms <= MAX_BIN_MS):
        raise PantheonError(f"--bin-ms must be from {MIN_BIN_MS:g} to {MAX_BIN_MS:g} ms (one hour), got {bin_ms:g}")
    data = open_data_dir(data_dir)
    option = "--out" if out else "the data dir"
    out = Path(out) if out else data.path
    files.writable_dir(out, option)
    try:
        return _analyze(data, out, bin_ms, draw, reports, quiet)
    except OSError as e:
        # Every output is written atomically: what an earlier analysis wrote is still whole.
        if not (files.out_of_space(e) or e.errno in (errno.EROFS, errno.EACCES)):
            raise
        raise PantheonError(f"cannot write the analysis into {e.filename or out}: {e.strerror or e}; "
                            "the outputs of an earlier analysis are as they were") from None


def _analyze(data: DataDir, out: Path, bin_ms: float, draw: bool, reports: bool, quiet: bool) -> Analysis:
    from pantheon.analysis import plots, report  # where drawn, as in analyse_run
    results = []
    runs_of = Counter(source.label for source in data.runs)
    for i, source in enumerate(data.runs):
        if not quiet:
            print(f"pantheon analyze: [{i + 1}/{len(data.runs)}] {source.name}", file=sys.stderr, flush=True)
        result = analyse_run(data, source, bin_ms, draw, DELAY_SAMPLE // runs_of[source.label])
        for line in result.warnings:
            print(f"pantheon analyze: warning: {source.name}: {line}", file=sys.stderr)
        results.append(result)

    by_label: dict[str, dict[int, RunMetrics]] = {}
    for r in results:
        by_label.setdefault(r.source.label, {})[r.source.number] = r.metrics
    summaries = {label: scheme_summary(list(runs.values())) for label, runs in by_label.items()}
    displays = {label: display_name(data, label) for label in by_label}
    meta = {"format_version": PERF_FORMAT_VERSION, "pantheon_version": __version__,
            "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "data_dir": str(data.path.resolve()),
            "layout": data.layout, "bin_ms": bin_ms, "definitions": "docs/analysis.md"}
    document = perf.perf_document(by_label, summaries, displays,
                                  {(r.source.label, r.source.number): r.warnings for r in results},
                                  {(r.source.label, r.source.number): r.acks for r in results}, meta)
    written = [perf.write_perf_json(document, out / "perf.json"), *perf.write_table(perf.flat_table(by_label, displays), out)]
    figures: dict[str, Path] = {}
    points = [plots.RunPoint(r.source.label, r.source.number, r.metrics.all.delay_p95_ms, r.metrics.all.throughput_mbps)
              for r in results if r.metrics.valid and r.metrics.all.delay_p95_ms]
    missing = [f"{displays[label]} ({why})" for label, why in no_valid_run(results).items()]
    ranking = rank({label: list(runs.values()) for label, runs in by_label.items()})
    if draw:
        figures["runs"] = plots.save(plots.runs_figure(points, data.looks, missing), out / "summary_runs.png")
        figures["means"] = plots.save(plots.means_figure(points, data.looks, missing), out / "summary_means.png")
        figures.update(_scheme_figures(results, [r.label for r in ranking], data.looks, missing, out))
        figures.update(_workload_figures(results, [r.label for r in ranking], data.looks, out))
    matrix = None
    if data.metadata.get("arguments", {}).get("command") == "harm":
        matrix = harm.harm_matrix(harm.pair_shares(([f.scheme for f in r.source.flows], r.metrics) for r in results))
        written.append(harm.write_harm_json(matrix, out / harm.HARM_FILE))
    elif (data.path / harm.HARM_FILE).exists():
        matrix = harm.read_harm_json(data.path / harm.HARM_FILE)
    if draw and matrix:
        figures["harm"] = plots.save(plots.harm_figure(matrix, lambda scheme: display_name(data, scheme)), out / "harm.png")
    written += list(figures.values()) + [p for r in results for p in r.figures.values()]
    analysis = Analysis(data, results, summaries, written, figures, out, ranking)
    if draw and reports:
        written += report.write_reports(analysis, out, lambda scheme: display_name(data, scheme))
    return analysis


def _workload_figures(results: list[RunResult], order: list[str], looks: dict, out: Path) -> dict[str, Path]:
    """Where runs had transfers, the schemes side by side over their valid runs' completed
    transfers pooled: the CDF of their FCTs and of their slowdowns, and the slowdown's p50 and p99
    by size bucket (transfers.by_size); nothing for a data dir without transfers."""
    from pantheon.analysis import plots
    pooled: dict[str, tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]] = {}
    for label in order:
        for r in results:
            if r.source.label == label and r.metrics.valid and r.workloads is not None and r.workloads.fct_ms.size:
                sizes, fcts, slows = pooled.setdefault(label, ([], [], []))
                sizes.append(r.workloads.size_bytes)
                fcts.append(r.workloads.fct_ms)
                slows.append(r.workloads.slowdown)
    if not pooled:
        return {}
    joined = {label: tuple(np.concatenate(parts) for parts in lists) for label, lists in pooled.items()}
    fct = {label: fcts for label, (_, fcts, _) in joined.items()}
    slowdown = {label: slows[np.isfinite(slows)] for label, (_, _, slows) in joined.items()}
    buckets = {label: transfers.by_size(sizes, slows) for label, (sizes, _, slows) in joined.items()}
    return {"fct_cdf": plots.save(plots.value_cdf_figure(fct, looks, "Flow completion time (ms)", "FCT of the transfers, "
                                                         "CDF per scheme"), out / "summary_fct_cdf.png"),
            "slowdown_cdf": plots.save(plots.value_cdf_figure(slowdown, looks, "Slowdown (FCT / ideal FCT)",
                                                              "Slowdown of the transfers, CDF per scheme"),
                                       out / "summary_slowdown_cdf.png"),
            "slowdown_size": plots.save(plots.slowdown_by_size_figure(buckets, looks), out / "summary_slowdown_by_size.png")}


def _scheme_figures(results: list[RunResult], order: list[str], looks: dict, missing: list[str], out: Path) -> dict[str, Path]:
    """The schemes side by side, in the ranking's order, over their valid runs: the delay CDF of
    their packets pooled, box plots of their runs' throughput and 95th-percentile delay, and the
    throughput over time of each one's first valid run."""
    from pantheon.analysis import plots
    delays: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}
    boxes: dict[str, list[tuple[float, float]]] = {}
    overlay: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for label in order:
        for r in results:
            if r.source.label != label or not r.metrics.valid:
                continue
            if r.delay_sample_ms is not None and r.delay_sample_ms.size:
                values, weights = delays.setdefault(label, ([], []))
                values.append(r.delay_sample_ms)
                weights.append(np.full(r.delay_sample_ms.size, float(r.delay_stride)))
            if r.metrics.all.delay_p95_ms is not None:
                boxes.setdefault(label, []).append((r.metrics.all.throughput_mbps, r.metrics.all.delay_p95_ms))
            if r.throughput_over_time is not None:
                overlay.setdefault(label, r.throughput_over_time)
    pooled = {label: (np.concatenate(v), np.concatenate(w)) for label, (v, w) in delays.items()}
    return {"cdf": plots.save(plots.delay_cdf_figure(pooled, looks, missing), out / "summary_delay_cdf.png"),
            "boxes": plots.save(plots.boxes_figure(boxes, looks, missing), out / "summary_boxes.png"),
            "overlay": plots.save(plots.overlay_figure(overlay, looks, missing), out / "summary_throughput.png")}
