"""The pictures: per run, throughput and per-packet one-way delay over time; per data dir, every
run's throughput against its 95th-percentile delay, and each scheme's mean with the 1-σ ellipse of
its runs (the style of Figure 2 in Yan et al., ATC 2018).

The delay axis of the summary plots is inverted, so that better (more throughput, less delay) is
up and to the right, and logarithmic when the delays span a wide range. A scheme's ellipse is the
1-σ contour of the bivariate normal fitted to its runs (mean and sample covariance), computed in
the coordinates of the plot (log10 of the delay on a log axis), so it looks like what it means.
And, as Flent draws them, the schemes side by side: the CDF of their packets' one-way delays, box
plots of their runs' throughput and delay, their throughput over time on shared axes.

Dense scatters (a 30 s run at 100 Mbit/s delivers ~250 000 packets) are rasterized, so a PNG or a
PDF page stays small and quick to draw. Everything uses matplotlib's Agg backend (no display).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from pantheon import files  # noqa: E402
from pantheon.analysis.events import LinkEvents  # noqa: E402
from pantheon.analysis.metrics import RunMetrics  # noqa: E402
from pantheon.analysis.series import Series  # noqa: E402

FLOW_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")
CAPACITY_COLOR = "#f2e6d0"
MEAN_MARKER_RADIUS_PT = 3.5
"""Radius of a scheme's mean marker in the summary plot, which no label covers."""
LABEL_GAP_PT = 5.0
"""From a mean's centre to the nearest edge of its label, when the label sits beside it: just clear of the marker."""
LEADER_PT = 9.0
"""A label farther than this from its dot's centre gets a leader line to it."""
LABEL_RINGS = 16
"""How many rings, each a label's height farther out, a label may move to find a free place."""
COVER_COST = 1000.0
"""The cost of each px² of a label over another label, a dot or the frame's edge: these are
what make a plot unreadable, so they outweigh everything else."""
LINE_POINT_COST_PX2 = 40.0
"""The cost of a label covering one point of a drawn line (an ellipse's outline, a leader; the
points are ~3 px apart) or of a leader crossing a label at one of its LEADER_SAMPLES points."""
DISTANCE_COST_PX = 6.0
"""The cost of each px a label sits farther from its dot than beside it: one ring out (a label's
height, ~13 px) costs about as much as covering two points of a line."""
LEADER_SAMPLES = 24
"""Points along a leader line checked against the labels it might cross."""
BESIDE_DEG = (0, 180, 30, -30, 150, -150, 90, -90)
"""Directions tried first, right of the dot first, as a reader scans."""
LEGEND_ROWS = 14
"""Most schemes in one column of the runs' legend: the axes' height of 8-point lines."""
LEGEND_COLUMN_IN = 1.6
"""Width a legend column adds to the figure, inches: a display name of ~20 characters at 8 points."""
LOG_DELAY_RANGE = 4.0
"""Log delay axis when the largest delay is at least this many times the smallest."""
STYLE: dict[str, Any] = {
    "font.family": "DejaVu Sans", "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.color": "#dddddd",
    "grid.linewidth": 0.6, "legend.frameon": False, "legend.fontsize": 9, "figure.dpi": 100,
    "savefig.dpi": 150, "savefig.bbox": "tight", "savefig.pad_inches": 0.1,
}
matplotlib.style.use(STYLE)


@dataclass(frozen=True)
class RunPoint:
    """One run in the summary plots."""
    label: str
    number: int
    delay_p95_ms: float
    throughput_mbps: float


def flow_color(index: int) -> str:
    return FLOW_COLORS[index % len(FLOW_COLORS)]


def _flow_name(flow: int, flow_schemes: dict[int, str]) -> str:
    scheme = flow_schemes.get(flow)
    return f"Flow {flow}" + (f" ({scheme})" if scheme else "")


def throughput_figure(series: Series, metrics: RunMetrics, title: str, flow_schemes: dict[int, str],
                      span_s: tuple[float, float] | None = None) -> Figure:
    """Capacity shaded, each flow's ingress rate dashed and throughput solid, one colour per flow."""
    fig, ax = plt.subplots(figsize=(10, 3.6))
    edges = np.append(series.start_s, series.start_s[-1] + series.bin_ms / 1000) if series.start_s.size else np.zeros(0)
    step = lambda values: np.append(values, values[-1:])  # noqa: E731
    if series.capacity_mbps is not None:
        ax.fill_between(edges, 0, step(series.capacity_mbps), step="post", color=CAPACITY_COLOR, linewidth=0,
                        label=f"Capacity (mean {metrics.capacity_mbps:.2f} Mbit/s)" if metrics.capacity_mbps else "Capacity")
    by_flow = {int(m.flow): m for m in metrics.flows}
    for i, flow in enumerate(sorted(series.throughput_mbps)):
        color, m = flow_color(i), by_flow[flow]
        name = _flow_name(flow, flow_schemes)
        ax.step(edges, step(series.ingress_mbps[flow]), where="post", color=color, linestyle=(0, (4, 2)), linewidth=1,
                alpha=0.8, label=f"{name} ingress, mean {m.ingress_mbps:.2f} Mbit/s")
        ax.step(edges, step(series.throughput_mbps[flow]), where="post", color=color, linewidth=1.6,
                label=f"{name} throughput, mean {m.throughput_mbps:.2f} Mbit/s")
    if span_s:
        ax.set_xlim(*span_s)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("Time (s)")
    ax.set_ylabel("Throughput (Mbit/s)")
    ax.set_title(title, loc="left")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    return fig


def delay_figure(events: LinkEvents, metrics: RunMetrics, title: str, flow_schemes: dict[int, str],
                 span_s: tuple[float, float] | None = None) -> Figure:
    """Every delivered packet's one-way delay at its delivery time, one colour per flow."""
    fig, ax = plt.subplots(figsize=(10, 3.6))
    by_flow = {int(m.flow): m for m in metrics.flows}
    for i, flow in enumerate(events.flows):
        mine = (events.recv_flow == flow) & (events.delay_us >= 0)
        m = by_flow[flow]
        p95 = f"95th percentile {m.delay_p95_ms:.1f} ms" if m.delay_p95_ms is not None else "no delivery"
        ax.plot(events.recv_t_us[mine] / 1e6, events.delay_us[mine] / 1000, linestyle="none", marker=".",
                markersize=2, markeredgewidth=0, alpha=0.7, color=flow_color(i), rasterized=True,
                label=f"{_flow_name(flow, flow_schemes)}: {p95}")
    if span_s:
        ax.set_xlim(*span_s)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("Time (s)")
    ax.set_ylabel("One-way delay (ms)")
    ax.set_title(title, loc="left")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, markerscale=8)
    return fig


def _not_shown(ax, missing: Sequence[str]) -> None:
    """Below the axes, the schemes that have no point, each with why, so none is silently absent."""
    if missing:
        ax.text(0, -0.16, "Not shown: " + "; ".join(missing), transform=ax.transAxes, ha="left", va="top", fontsize=8,
                color="#a32020", wrap=True)


def _delay_axis(ax, delays_ms: list[float]) -> bool:
    """Inverted delay axis, logarithmic when the range is wide; True when logarithmic."""
    low, high = (min(delays_ms), max(delays_ms)) if delays_ms else (1.0, 1.0)
    log = low > 0 and high / low >= LOG_DELAY_RANGE
    if log:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.invert_xaxis()
    ax.set_xlabel("95th percentile one-way delay (ms)")
    ax.set_ylabel("Average throughput (Mbit/s)")
    ax.annotate("Better", xy=(1.0, 1.07), xytext=(0.92, 1.02), xycoords="axes fraction", textcoords="axes fraction",
                ha="right", va="bottom", fontsize=9, color="#555555",
                arrowprops={"arrowstyle": "->", "color": "#555555", "linewidth": 1})
    return log


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    """Area shared by two boxes (x0, y0, x1, y1), px²."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def _inside(points: np.ndarray, box: tuple[float, float, float, float]) -> int:
    """How many of the (n, 2) points lie in the box."""
    if not points.size:
        return 0
    return int(((points[:, 0] > box[0]) & (points[:, 0] < box[2]) & (points[:, 1] > box[1]) & (points[:, 1] < box[3])).sum())


def label_offsets(dots_px: list[tuple[float, float]], sizes_px: list[tuple[float, float]], frame: Bbox,
                  dot_radius_px: float, gap_px: float, lines_px: np.ndarray | None = None) -> list[tuple[float, float]]:
    """Where each label's centre goes, as an offset from its dot in px: the place of least cost
    beside the dot (its nearest edge gap_px from the dot's centre; right first, then left, the
    diagonals, above and below) or on rings ever farther out, a label's height apart. A place
    costs what it covers (labels placed before, dots, the frame's edge: COVER_COST; points of the
    drawn lines, lines_px (n, 2), the ellipses' outlines: LINE_POINT_COST_PX2), what its leader
    line to the dot crosses, and its distance from the dot (DISTANCE_COST_PX). The labels of
    crowded dots are placed first, while there is room near them; each leader then counts as a
    drawn line for the labels after it."""
    dots = [(x - dot_radius_px, y - dot_radius_px, x + dot_radius_px, y + dot_radius_px) for x, y in dots_px]
    lines = np.zeros((0, 2)) if lines_px is None else np.asarray(lines_px, dtype=np.float64).reshape(-1, 2)
    near_px = 4 * max((h for _, h in sizes_px), default=0.0)
    crowd = [sum(abs(x - u) < near_px and abs(y - v) < near_px for u, v in dots_px) for x, y in dots_px]
    offsets: list[tuple[float, float]] = [(0.0, 0.0)] * len(dots_px)
    placed: list[tuple[float, float, float, float]] = []
    along = np.linspace(0.0, 1.0, LEADER_SAMPLES)[:, None]
    for i in sorted(range(len(dots_px)), key=lambda i: (-crowd[i], -dots_px[i][1])):
        (x, y), (w, h) = dots_px[i], sizes_px[i]
        best: tuple[float, tuple[float, float]] | None = None
        for ring in range(LABEL_RINGS):
            reach = gap_px + ring * h
            distance_cost = DISTANCE_COST_PX * ring * h
            if best is not None and best[0] <= distance_cost:
                break  # farther out can only cost more
            angles = BESIDE_DEG if ring == 0 else range(0, 360, 15)
            for deg in angles:
                dx, dy = np.cos(np.radians(deg)), np.sin(np.radians(deg))
                # a box whose nearest edge is `reach` from the dot in this direction
                cx, cy = x + dx * (w / 2 + reach), y + dy * (h / 2 + reach)
                box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
                outside = w * h - _overlap(box, (frame.x0, frame.y0, frame.x1, frame.y1))
                covered = sum(_overlap(box, other) for other in placed) + sum(_overlap(box, d) for d in dots) + outside
                cost = COVER_COST * covered + LINE_POINT_COST_PX2 * _inside(lines, box) + distance_cost
                if ring:
                    leader = np.array([x, y]) + along * np.array([cx - x, cy - y])
                    cost += LINE_POINT_COST_PX2 * sum(_inside(leader, other) for other in placed)
                if best is None or cost < best[0]:
                    best = (cost, (cx - x, cy - y))
        assert best is not None
        offsets[i] = best[1]
        dx_px, dy_px = best[1]
        placed.append((x + dx_px - w / 2, y + dy_px - h / 2, x + dx_px + w / 2, y + dy_px + h / 2))
        if np.hypot(dx_px, dy_px) > gap_px + max(w, h):
            lines = np.vstack([lines, np.array([x, y]) + along * np.array([dx_px, dy_px])])
    return offsets


def _label_means(fig: Figure, ax, named_dots: list[tuple[str, float, float, str]]) -> list:
    """Each scheme's name next to its mean (label_offsets), off the ellipses where it can be; a
    leader line from the name to its dot where the name had to move away from it."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # the Agg canvas's, which this module selects
    ax.autoscale_view()  # the limits are settled lazily; the dots' places depend on them
    frame = ax.get_window_extent(renderer)
    text_style = {"fontsize": 9, "fontweight": "bold"}
    sizes = []
    for name, *_ in named_dots:
        probe = ax.text(0, 0, name, **text_style)
        box = probe.get_window_extent(renderer)
        sizes.append((box.width, box.height))
        probe.remove()
    px_per_pt = fig.dpi / 72
    dots = [tuple(ax.transData.transform((x, y))) for _, x, y, _ in named_dots]
    drawn = [ax.transData.transform(line.get_xydata()) for line in ax.lines]  # the ellipses' outlines
    offsets = label_offsets(dots, sizes, frame, MEAN_MARKER_RADIUS_PT * px_per_pt, LABEL_GAP_PT * px_per_pt,
                            np.vstack(drawn) if drawn else None)
    labels = []
    for (name, x, y, color), (w, h), (dx, dy) in zip(named_dots, sizes, offsets):
        # the gap from the dot's centre to the nearest point of its label, px
        gap = float(np.hypot(max(abs(dx) - w / 2, 0), max(abs(dy) - h / 2, 0)))
        leader = {"arrowstyle": "-", "color": color, "linewidth": 0.7, "shrinkA": 1, "shrinkB": MEAN_MARKER_RADIUS_PT,
                  "alpha": 0.8} if gap > LEADER_PT * px_per_pt else None
        labels.append(ax.annotate(name, (x, y), xytext=(dx / px_per_pt, dy / px_per_pt), textcoords="offset points",
                                  ha="center", va="center", color=color, arrowprops=leader, **text_style))
    return labels


def runs_figure(points: list[RunPoint], looks: dict, missing: Sequence[str] = ()) -> Figure:
    """One marker per valid run, coloured by scheme, the legend beside the axes (matplotlib's
    constrained layout makes room for it: inside, 21 schemes' legend covered the title and the
    points); the schemes without a run named below."""
    labels = list(dict.fromkeys(p.label for p in points))
    columns = max(1, math.ceil(len(labels) / LEGEND_ROWS))
    fig, ax = plt.subplots(figsize=(5.6 + LEGEND_COLUMN_IN * columns, 4.2), layout="constrained")
    _delay_axis(ax, [p.delay_p95_ms for p in points])
    for label in labels:
        mine = [p for p in points if p.label == label]
        ax.scatter([p.delay_p95_ms for p in mine], [p.throughput_mbps for p in mine], s=36, color=looks[label].color,
                   edgecolor="white", linewidth=0.6, zorder=3, label=looks[label].display)
    ax.margins(x=0.12, y=0.2)
    ax.set_title(f"Each run ({len(points)} valid)", loc="left")
    if points:
        fig.legend(loc="outside right upper", ncols=columns, scatterpoints=1, fontsize=8, frameon=False)
    _not_shown(ax, missing)
    return fig


def ellipse_xy(xs: np.ndarray, ys: np.ndarray, log: bool, points: int = 100) -> tuple[np.ndarray, np.ndarray] | None:
    """The 1-σ contour of the runs' bivariate normal, in data coordinates; None for fewer than
    two runs. On a log delay axis the fit is of log10(delay)."""
    if xs.size < 2:
        return None
    u = np.log10(xs) if log else xs
    cov = np.cov(np.vstack([u, ys]))
    values, vectors = np.linalg.eigh(cov)
    theta = np.linspace(0, 2 * np.pi, points)
    circle = np.vstack([np.cos(theta), np.sin(theta)]) * np.sqrt(np.maximum(values, 0))[:, None]
    shape = vectors @ circle
    ex, ey = u.mean() + shape[0], ys.mean() + shape[1]
    return (10 ** ex if log else ex), ey


def means_figure(points: list[RunPoint], looks: dict, missing: Sequence[str] = ()) -> Figure:
    """Per scheme: the mean of its runs and their 1-σ ellipse, labelled with its name; the schemes
    without a valid run named below."""
    fig, ax = plt.subplots(figsize=(5.6, 4.2))
    log = _delay_axis(ax, [p.delay_p95_ms for p in points])
    means = []
    for label in dict.fromkeys(p.label for p in points):
        mine = [p for p in points if p.label == label]
        xs = np.array([p.delay_p95_ms for p in mine])
        ys = np.array([p.throughput_mbps for p in mine])
        mean_x = 10 ** np.log10(xs).mean() if log else xs.mean()
        color = looks[label].color
        contour = ellipse_xy(xs, ys, log)
        if contour is not None:
            ax.fill(*contour, color=color, alpha=0.15, linewidth=0)
            ax.plot(*contour, color=color, linewidth=1)
        ax.scatter([mean_x], [ys.mean()], s=(2 * MEAN_MARKER_RADIUS_PT) ** 2, color=color, edgecolor="white",
                   linewidth=0.8, zorder=3)
        means.append((looks[label].display, mean_x, ys.mean(), color))
    ax.margins(x=0.12, y=0.2)
    _label_means(fig, ax, means)
    ax.set_title("Mean of the runs and 1-σ ellipse, per scheme", loc="left")
    _not_shown(ax, missing)
    return fig


CDF_POINTS = 1000
"""Points of a scheme's delay CDF line, evenly spaced in probability: a smooth line, drawn in no time."""
CDF_LOW = 0.01
"""On a log delay axis, the axis starts at the smallest of the schemes' delays at this fraction."""


def cdf_points(values: np.ndarray, weights: np.ndarray, points: int = CDF_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """The weighted empirical CDF of the values at `points` + 1 probabilities from 0 to 1: x, the
    smallest value whose cumulative weight reaches each probability (nearest rank), and the
    probabilities. Each value stands for `weight` packets (a regular sample's stride)."""
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    probabilities = np.linspace(0.0, 1.0, points + 1)
    index = np.minimum(np.searchsorted(cumulative, probabilities * cumulative[-1], side="left"), values.size - 1)
    return values[order][index], probabilities


def delay_cdf_figure(delays: dict[str, tuple[np.ndarray, np.ndarray]], looks: dict, missing: Sequence[str] = ()) -> Figure:
    """One line per scheme: the CDF of the one-way delays of its valid runs' packets pooled
    (`delays`: label -> (delays in ms, the weight of each)); a log delay axis when wide."""
    fig, ax = plt.subplots(figsize=(5.6, 4.2))
    lines = {label: cdf_points(values, weights) for label, (values, weights) in delays.items() if values.size}
    # the range from the schemes' 1st percentiles: a few early packets' near-zero delays would
    # otherwise stretch a log axis over decades of nothing
    low = min((float(x[np.searchsorted(p, CDF_LOW)]) for x, p in lines.values()), default=0.0)
    high = max((float(x[-1]) for x, _ in lines.values()), default=0.0)
    for label, (x, p) in lines.items():
        ax.plot(x, p, color=looks[label].color, linewidth=1.6, label=looks[label].display)
    if low > 0 and high / low >= LOG_DELAY_RANGE:
        ax.set_xscale("log")
        ax.set_xlim(low / 1.2, high * 1.2)
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("One-way delay (ms)")
    ax.set_ylabel("Fraction of packets")
    ax.set_title("Per-packet one-way delay, CDF per scheme", loc="left")
    if lines:
        ax.legend(loc="best", fontsize=8)
    _not_shown(ax, missing)
    return fig


def boxes_figure(runs: dict[str, list[tuple[float, float]]], looks: dict, missing: Sequence[str] = ()) -> Figure:
    """Side by side, one box per scheme: its valid runs' throughput (left) and 95th-percentile
    one-way delay (right); `runs`: label -> [(throughput Mbit/s, p95 delay ms)] per run. Boxes
    are the quartiles, whiskers reach 1.5 IQR, and every run is a dot."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    labels = list(runs)
    for ax, column, name in ((axes[0], 0, "Throughput (Mbit/s)"), (axes[1], 1, "95th percentile one-way delay (ms)")):
        data = [[run[column] for run in runs[label]] for label in labels]
        if labels:
            drawn = ax.boxplot(data, patch_artist=True, tick_labels=[looks[label].display for label in labels],
                               widths=0.6, showfliers=False, medianprops={"color": "#222222"})
            for box, label in zip(drawn["boxes"], labels):
                box.set(facecolor=looks[label].color, alpha=0.35, edgecolor=looks[label].color)
            for i, (values, label) in enumerate(zip(data, labels), 1):
                ax.scatter(np.full(len(values), i), values, s=14, color=looks[label].color, zorder=3, edgecolor="white",
                           linewidth=0.5)
            ax.tick_params(axis="x", labelrotation=30 if len(labels) > 3 else 0, labelsize=8)
        ax.set_ylabel(name)
        ax.set_ylim(0, 1.08 * max((v for values in data for v in values), default=1.0))
        ax.grid(axis="x", visible=False)
    axes[0].set_title("Each scheme's valid runs", loc="left")
    fig.tight_layout()
    if missing:  # below the rotated names, which _not_shown's place under the axes would cover
        fig.text(0.01, 0.0, "Not shown: " + "; ".join(missing), ha="left", va="top", fontsize=8, color="#a32020", wrap=True)
    return fig


def overlay_figure(series: dict[str, tuple[np.ndarray, np.ndarray]], looks: dict, missing: Sequence[str] = ()) -> Figure:
    """The schemes' throughput over time on shared axes, one line per scheme: its first valid
    run's all-flows throughput in the bins of the runs' own plots (`series`: label -> (bin start
    s, Mbit/s))."""
    fig, ax = plt.subplots(figsize=(10, 3.6))
    top = 0.0
    for label, (start_s, mbps) in series.items():
        if not start_s.size:
            continue
        width_s = float(start_s[1] - start_s[0]) if start_s.size > 1 else 0.0
        ax.step(np.append(start_s, start_s[-1] + width_s), np.append(mbps, mbps[-1:]), where="post",
                color=looks[label].color, linewidth=1.4, label=looks[label].display)
        top = max(top, float(mbps.max()))
    ax.set_ylim(0, 1.08 * top or 1.0)
    ax.set_xlabel("Time (s)")
    ax.set_ylabel("Throughput (Mbit/s)")
    ax.set_title("Throughput over time: each scheme's first valid run", loc="left")
    if series:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    _not_shown(ax, missing)
    return fig


def save(fig: Figure, path: Path) -> Path:
    """Writes the figure atomically (files.atomic_path), in the format its name's suffix says."""
    try:
        with files.atomic_path(path) as tmp:
            fig.savefig(tmp, format=path.suffix.removeprefix("."))
    finally:
        plt.close(fig)
    return path


def value_cdf_figure(values: dict[str, np.ndarray], looks: dict, xlabel: str, title: str) -> Figure:
    """One line per scheme: the CDF of its values (the FCTs or the slowdowns of its valid runs'
    transfers, pooled; `values`: label -> values), on a log axis when they span a wide range."""
    fig, ax = plt.subplots(figsize=(5.6, 4.2))
    lines = {label: cdf_points(v, np.ones(v.size)) for label, v in values.items() if v.size}
    for label, (x, p) in lines.items():
        ax.plot(x, p, color=looks[label].color, linewidth=1.6, label=f"{looks[label].display} ({values[label].size:,})")
    low = min((float(x[0]) for x, _ in lines.values()), default=0.0)
    high = max((float(x[-1]) for x, _ in lines.values()), default=0.0)
    if low > 0 and high / low >= LOG_DELAY_RANGE:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("Fraction of transfers")
    ax.set_title(title, loc="left")
    if lines:
        ax.legend(loc="best", fontsize=8)
    return fig


def _size_name(max_bytes: int | None, low_bytes: int) -> str:
    """A size bucket's label: "≤10 kB", ..., ">10 MB"."""
    def size(b: int) -> str:
        return f"{b / 1e6:g} MB" if b >= 1_000_000 else f"{b / 1e3:g} kB"
    return f"≤{size(max_bytes)}" if max_bytes is not None else f">{size(low_bytes)}"


def _or_nan(value: float | None) -> float:
    return np.nan if value is None else value


def slowdown_by_size_figure(buckets: dict[str, list[dict]], looks: dict) -> Figure:
    """Per scheme, the slowdown's median (solid) and 99th percentile (dashed) in each size bucket
    (transfers.by_size: label -> its buckets), as HPCC's and Homa's figures draw them; a bucket
    without transfers leaves a gap."""
    fig, ax = plt.subplots(figsize=(10, 3.8))
    names: list[str] = []
    for label, rows in buckets.items():
        low = 0
        names = []
        for row in rows:
            names.append(_size_name(row["max_bytes"], low))
            low = row["max_bytes"] or low
        x = np.arange(len(rows))
        color = looks[label].color
        ax.plot(x, [_or_nan(r["slowdown_p50"]) for r in rows], color=color, marker="o", linewidth=1.6,
                label=f"{looks[label].display} p50")
        ax.plot(x, [_or_nan(r["slowdown_p99"]) for r in rows], color=color, marker="^", linewidth=1.2, linestyle=(0, (4, 2)),
                label=f"{looks[label].display} p99")
    ax.set_xticks(range(len(names)), [f"{n}\n({sum(rows[i]['count'] for rows in buckets.values()):,})"
                                      for i, n in enumerate(names)])
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("Transfer size (transfers in the bucket)")
    ax.set_ylabel("Slowdown (FCT / ideal FCT)")
    ax.set_title("Slowdown by transfer size: median (solid) and 99th percentile (dashed)", loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return fig


def probe_rtt_figure(rtts: dict[int, tuple[np.ndarray, np.ndarray]], title: str, flow_schemes: dict[int, str],
                     span_s: tuple[float, float] | None = None) -> Figure:
    """Each probe's round-trip time at its send time, one colour per probes flow (`rtts`: flow ->
    (send time s, RTT ms))."""
    fig, ax = plt.subplots(figsize=(10, 3.6))
    for flow, (t_s, rtt_ms) in sorted(rtts.items()):
        ax.plot(t_s, rtt_ms, linestyle="-", marker=".", markersize=3, linewidth=0.6, color=flow_color(flow - 1),
                rasterized=t_s.size > 2000, label=f"{_flow_name(flow, flow_schemes)}: {t_s.size:,} probes answered")
    if span_s:
        ax.set_xlim(*span_s)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("Time (s)")
    ax.set_ylabel("Probe RTT (ms)")
    ax.set_title(title, loc="left")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    return fig


HARM_COLORS = "Reds"
"""The heat map's colours: white for no harm, dark red for all of it."""


def harm_figure(matrix: dict, display) -> Figure:
    """The harm matrix (harm.py) as two heat maps side by side, throughput and delay: row A, the
    scheme doing the harm; column B, the one harmed; each cell its value and 95% interval."""
    doers = list(matrix)
    harmed = list(dict.fromkeys(b for row in matrix.values() for b in row))
    fig, axes = plt.subplots(1, 2, figsize=(max(8.0, 2.2 + 2.4 * len(harmed)), 1.6 + 0.7 * len(doers) + 0.8),
                             layout="constrained")
    for ax, metric, name in ((axes[0], "throughput", "Throughput harm"), (axes[1], "delay", "Delay harm (p95)")):
        grid = np.full((len(doers), len(harmed)), np.nan)
        for i, a in enumerate(doers):
            for j, b in enumerate(harmed):
                if b in matrix[a] and matrix[a][b][metric].value is not None:
                    grid[i, j] = matrix[a][b][metric].value
        image = ax.imshow(grid, cmap=HARM_COLORS, vmin=0, vmax=1, aspect="auto")
        for i, a in enumerate(doers):
            for j, b in enumerate(harmed):
                cell = matrix[a].get(b, {}).get(metric)
                if cell is None or cell.value is None:
                    ax.text(j, i, "–", ha="center", va="center", fontsize=9, color="#888888")
                    continue
                ci = f"\n[{cell.ci[0]:.2f}, {cell.ci[1]:.2f}]" if cell.ci is not None else ""
                ax.text(j, i, f"{cell.value:.2f}{ci}", ha="center", va="center", fontsize=8,
                        color="white" if cell.value > 0.6 else "#111111")
        ax.set_xticks(range(len(harmed)), [display(b) for b in harmed], rotation=30 if len(harmed) > 3 else 0, fontsize=8)
        ax.set_yticks(range(len(doers)), [display(a) for a in doers], fontsize=8)
        ax.set_xlabel("Harmed (B)")
        ax.set_ylabel("Doing harm (A)")
        ax.grid(False)
        ax.set_title(name, loc="left")
        fig.colorbar(image, ax=ax, shrink=0.8)
    return fig
