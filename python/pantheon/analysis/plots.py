"""The pictures: per run, throughput and per-packet one-way delay over time; per data dir, every
run's throughput against its 95th-percentile delay, and each scheme's mean with the 1-σ ellipse of
its runs (the style of Figure 2 in Yan et al., ATC 2018).

The delay axis of the summary plots is inverted, so that better (more throughput, less delay) is
up and to the right, and logarithmic when the delays span a wide range. A scheme's ellipse is the
1-σ contour of the bivariate normal fitted to its runs (mean and sample covariance), computed in
the coordinates of the plot (log10 of the delay on a log axis), so it looks like what it means.

Dense scatters (a 30 s run at 100 Mbit/s delivers ~250 000 packets) are rasterized, so a PNG or a
PDF page stays small and quick to draw. Everything uses matplotlib's Agg backend (no display).
"""
from __future__ import annotations

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

from pantheon.analysis.events import LinkEvents  # noqa: E402
from pantheon.analysis.metrics import RunMetrics  # noqa: E402
from pantheon.analysis.series import Series  # noqa: E402

FLOW_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")
CAPACITY_COLOR = "#f2e6d0"
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


def _delay_axis(ax, delays_ms: list[float]) -> bool:
    """Inverted delay axis, logarithmic when the range is wide; True when logarithmic."""
    low, high = min(delays_ms), max(delays_ms)
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


def _place_labels(fig: Figure, ax, labels: list) -> None:
    """Scheme labels right of their point, or left where they would leave the axes; then moved
    down, a line at a time, until none overlaps another."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # the Agg canvas's, which this module selects
    frame = ax.get_window_extent(renderer)
    placed: list[Bbox] = []
    for label in sorted(labels, key=lambda a: -a.get_window_extent(renderer).y0):
        if label.get_window_extent(renderer).x1 > frame.x1:
            label.set_horizontalalignment("right")
            label.xyann = (-label.xyann[0], label.xyann[1])
        for _ in range(20):
            box = label.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed):
                break
            x, y = label.xyann
            label.xyann = (x, y - box.height * 72 / fig.dpi - 2)
        placed.append(label.get_window_extent(renderer))


def runs_figure(points: list[RunPoint], looks: dict) -> Figure:
    """One marker per valid run, coloured by scheme."""
    fig, ax = plt.subplots(figsize=(5.6, 4.2))
    _delay_axis(ax, [p.delay_p95_ms for p in points])
    for label in dict.fromkeys(p.label for p in points):
        mine = [p for p in points if p.label == label]
        ax.scatter([p.delay_p95_ms for p in mine], [p.throughput_mbps for p in mine], s=36, color=looks[label].color,
                   edgecolor="white", linewidth=0.6, zorder=3, label=looks[label].display)
    ax.margins(x=0.12, y=0.2)
    ax.set_title(f"Each run ({len(points)} valid)", loc="left")
    ax.legend(loc="lower left", scatterpoints=1)
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


def means_figure(points: list[RunPoint], looks: dict) -> Figure:
    """Per scheme: the mean of its runs and their 1-σ ellipse, labelled with its name."""
    fig, ax = plt.subplots(figsize=(5.6, 4.2))
    log = _delay_axis(ax, [p.delay_p95_ms for p in points])
    names = []
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
        ax.scatter([mean_x], [ys.mean()], s=48, color=color, edgecolor="white", linewidth=0.8, zorder=3)
        names.append(ax.annotate(looks[label].display, (mean_x, ys.mean()), xytext=(7, 5), textcoords="offset points",
                                 fontsize=10, color=color, fontweight="bold"))
    ax.margins(x=0.12, y=0.2)
    _place_labels(fig, ax, names)
    ax.set_title("Mean of the runs and 1-σ ellipse, per scheme", loc="left")
    return fig


def save(fig: Figure, path: Path) -> Path:
    fig.savefig(path)
    plt.close(fig)
    return path
