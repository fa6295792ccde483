"""The calibration's pictures, beside its preset:

    NAME.png               the paper's Fig. 3 (Yan et al., ATC 2018, §5): per scheme (and flow),
                           the real mean throughput against the mean p95 one-way delay as a filled
                           dot, the calibrated path's simulated one as an open dot of the same
                           colour, the two joined; the delay axis inverted as in the analysis's
                           summary plots, so better is up and to the right
    NAME.convergence.png   the best replication error so far against the trials finished, per
                           phase (TPE exploring, CMA-ES refining), with the noise floor

The look (style, colours, saving) is the analysis's (analysis/plots.py).
"""
from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import FuncFormatter

from pantheon.analysis import plots
from pantheon.calibrate import replication
from pantheon.calibrate.targets import Target


def _name(target: Target, flow: str) -> str:
    if len(target.setting.flows) == 1:
        return target.setting.label
    return f"{target.setting.label} flow {flow}"


def replication_figure(targets: list[Target], real: list[replication.Figures], simulated: list[replication.Figures],
                       errors: replication.Errors, path: Path) -> Path:
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
    ax.set_title(f"Real (filled) and calibrated (open): replication error {errors.overall_pct:.2f}%", loc="left")
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
        ax.step(xs, ys, where="post", color=plots.flow_color(i), label=type(phase).__name__.lower())
        offset += len(done)
    if floor_pct is not None:
        ax.axhline(floor_pct, color="#7f7f7f", linestyle="--", linewidth=1, label="noise floor")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_xlabel("trials finished")
    ax.set_ylabel("best replication error (%)")
    ax.legend(loc="best")
    return plots.save(fig, path)
