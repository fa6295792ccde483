"""The calibration's pictures, beside its preset:

    NAME.png               the paper's Fig. 3 (Yan et al., ATC 2018, §5): per scheme (and flow),
                           the real mean throughput against the mean p95 one-way delay as a filled
                           dot, the calibrated path's simulated one as an open dot of the same
                           colour, the two joined; the delay axis inverted as in the analysis's
                           summary plots, so better is up and to the right
    NAME.emulated.png      with --confirm: the same, the open dots the chosen candidate's runs over
                           the emulator
    NAME.convergence.png   the best replication error so far against the trials finished, per
                           phase (TPE exploring, CMA-ES refining), with the noise floor
    NAME.ablation.png      with --ablation: the paper's Fig. 5, the error as parameters are freed,
                           the trace model's last where it was searched
    NAME.html              the report page: the path, the figures above, the per-scheme tables
                           (simulated and emulated), the models side by side (the five parameters and
                           the inferred trace), the ablation and the held-out prediction, as one
                           self-contained page (figures embedded, nothing fetched)

The look (style, colours, saving; the page's styles, tables and embedded images) is the analysis's
(analysis/plots.py, analysis/report.py).
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.ticker import FuncFormatter

from pantheon import files
from pantheon.analysis import plots
from pantheon.analysis.report import CSS, image_html, table_html
from pantheon.calibrate import replication
from pantheon.calibrate.targets import Target


def _name(target: Target, flow: str) -> str:
    if len(target.setting.flows) == 1:
        return target.setting.label
    return f"{target.setting.label} flow {flow}"


def replication_figure(targets: list[Target], real: list[replication.Figures], simulated: list[replication.Figures],
                       errors: replication.Errors, path: Path, side: str = "calibrated, simulated") -> Path:
    fig, ax = plots.plt.subplots(figsize=(7, 5))
    index = 0
    for target, (real_t, real_d), (sim_t, sim_d) in zip(targets, real, simulated):
        for flow, throughput in real_t.items():
            delay, sim_throughput, sim_delay = real_d.get(flow), sim_t.get(flow), sim_d.get(flow)
            if throughput is None or delay is None:
                continue
            color = plots.flow_color(index)
            index += 1
            error = errors.per_scheme_pct.get(target.setting.label)
            ax.plot([delay], [throughput], "o", color=color, markersize=8,
                    label=f"{_name(target, flow)}" + (f" ({error:.1f}%)" if error is not None else ""))
            if sim_throughput is not None and sim_delay is not None:
                ax.plot([delay, sim_delay], [throughput, sim_throughput], "-", color=color, linewidth=1)
                ax.plot([sim_delay], [sim_throughput], "o", markerfacecolor="white", markeredgecolor=color, markersize=8)
    ax.invert_xaxis()
    ax.set_xlabel("95th-percentile one-way delay (ms)")
    ax.set_ylabel("Average throughput (Mbit/s)")
    ax.set_title(f"Real (filled) and {side} (open): replication error {errors.overall_pct:.2f}%", loc="left")
    ax.legend(loc="best")
    return plots.save(fig, path)


def convergence_figure(phases: list, floor_pct: float | None, path: Path) -> Path:
    """Best error so far per trial, in the order trials finished, each phase after the last."""
    fig, ax = plots.plt.subplots(figsize=(7, 4))
    offset, best = 0, None
    for i, phase in enumerate(phases):
        done = sorted((t for t in phase.study.get_trials(deepcopy=False) if t.value is not None),
                      key=lambda t: t.datetime_complete)
        xs, ys = [], []
        for n, trial in enumerate(done, start=offset + 1):
            best = trial.value if best is None else min(best, trial.value)
            xs.append(n)
            ys.append(best)
        ax.step(xs, ys, where="post", color=plots.flow_color(i), label=phase.label)
        offset += len(done)
    if floor_pct is not None:
        ax.axhline(floor_pct, color="#7f7f7f", linestyle="--", linewidth=1, label="noise floor")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_xlabel("trials finished")
    ax.set_ylabel("best replication error (%)")
    ax.legend(loc="best")
    return plots.save(fig, path)


def ablation_figure(steps: list[tuple[str, float]], floor_pct: float | None, path: Path) -> Path:
    """The paper's Fig. 5: each step's best replication error, parameters freed left to right."""
    fig, ax = plots.plt.subplots(figsize=(7, 4))
    names = [name for name, _ in steps]
    bars = ax.bar(names, [error for _, error in steps], color=plots.flow_color(0))
    ax.bar_label(bars, fmt="%.1f%%")
    if floor_pct is not None:
        ax.axhline(floor_pct, color="#7f7f7f", linestyle="--", linewidth=1, label="noise floor")
        ax.legend(loc="best")
    ax.set_xlabel("parameters free")
    ax.set_ylabel("replication error (%)")
    return plots.save(fig, path)


@dataclass(frozen=True)
class Page:
    """What the report page shows; figures are PNG files, tables a header row then rows."""
    data_dir: Path
    facts: list[tuple[str, str]]
    """The calibration in rows (path, errors, floor, trials, stand-ins, bounds, how to use it)."""
    replication: list[tuple[str, Path]]
    """Fig. 3 per side (simulated; emulated with --confirm): caption, file."""
    tables: list[tuple[str, list[tuple[str, ...]]]]
    convergence: Path
    ablation: tuple[list[tuple[str, ...]], Path] | None
    held_out: str | None
    models: list[tuple[str, ...]] = field(default_factory=list)
    """With both models: each one's best, a header row first (calibration.MODELS)."""


def _figures(figures: list[tuple[str, Path]]) -> str:
    return "<div class=figs>" + "".join(f"<figure>{image_html(f, caption)}<figcaption class=line>{html.escape(caption)}"
                                         "</figcaption></figure>" for caption, f in figures) + "</div>"


def write_page(page: Page, path: Path) -> Path:
    """One self-contained HTML page (analysis/report.py's styles and embedded images)."""
    parts = ["<header><h1>Calibrated emulator</h1>"
             f"<p class=sub>pantheon calibrate {html.escape(str(page.data_dir))}</p></header><table class=setup>"]
    parts += [f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in page.facts]
    parts.append("</table><h2>Real and replicated (the paper's Fig. 3)</h2>")
    parts.append(_figures(page.replication))
    parts.append("<h2>Per scheme</h2>")
    for caption, found in page.tables:
        parts += [f"<p class=line>{html.escape(caption)}</p>", table_html(found[0], [list(r) for r in found[1:]])]
    if page.held_out:
        parts.append(f"<p class=line>{html.escape(page.held_out)}</p>")
    parts += ["<h2>Search</h2>", _figures([("Best replication error so far, per phase, with the noise floor",
                                            page.convergence)])]
    if page.models or page.ablation:
        parts.append("<h2>Models and ablation (the paper's Fig. 5)</h2>")
    if page.models:
        parts += ["<p class=line>Each model's best path: the paper's five parameters, and a delivery trace inferred "
                  "from the data with delay, buffer, loss and a rate scale fitted over it</p>",
                  table_html(page.models[0], [list(r) for r in page.models[1:]])]
    if page.ablation:
        found, figure = page.ablation
        parts += [table_html(found[0], [list(r) for r in found[1:]]),
                  _figures([("Replication error as parameters are freed", figure)])]
    files.write_atomic(path, '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
                             f"<title>Calibration: {html.escape(page.data_dir.name)}</title><style>{CSS}</style></head>"
                             f"<body><main>{''.join(parts)}</main></body></html>\n")
    return path
