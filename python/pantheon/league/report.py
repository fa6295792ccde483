"""The league's report (report.md, text a researcher reads at a glance) and its summary for programs
and the archive (league.json; docs/league.md gives its fields).

report.md: what was run (matrix, environments, seeds, schemes, which play through stand-ins), the
ranking with each scheme's medians, the per-dimension win shares, competing flows (Jain, harm),
the spread over seeds, and the cells that failed.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from pantheon import files
from pantheon.league import ranking
from pantheon.league.entrants import Entrant
from pantheon.league.matrix import Matrix
from pantheon.league.table import TABLE_FILE
from pantheon.wording import counted

SUMMARY_FILE = "league.json"
REPORT_FILE = "report.md"
FORMAT = "pantheon-league/1"
SCORE = ("the scheme's throughput over the link's mean rate, times the path's one-way propagation delay over the "
         "scheme's 95th-percentile one-way delay (1: the whole link with no queue); in a topology, the mean over the "
         "scheme's flows of the same against each flow's max-min fair share (capped at 1) and its route's delay; in a "
         "workload, the mean over its transfers of ideal / actual completion time (0: not completed)")
DIMENSION_NAMES = {"rate_mbps": "rate (Mbit/s)", "rtt_ms": "base RTT (ms)", "buffer_bdp": "buffer (BDP)",
                   "buffer_bytes": "buffer (bytes)", "queue": "queue", "loss": "random loss",
                   "step_factor": "rate step (×)", "flows": "flows", "preset": "preset",
                   "topology": "topology"}
SPREAD_SHOWN = 5


def summary(matrix: Matrix, entrants: Sequence[Entrant], rows: Sequence[dict], commit: str | None,
            wall_s: float) -> dict:
    names = [e.name for e in entrants]
    standings = ranking.standings(rows, names)
    return {
        "format": FORMAT, "matrix": matrix.name, "description": matrix.description, "commit": commit,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "duration_s": matrix.duration_s,
        "window_s": matrix.window_s, "environments": len(matrix.environments), "seeds": list(matrix.seeds),
        "rows": len(rows), "failed_rows": sum(not r["ok"] for r in rows), "wall_s": round(wall_s, 1),
        "score": SCORE, "win_margin": ranking.WIN_MARGIN,
        "schemes": [{"name": e.name, "simulated_as": e.spec, "stand_in": e.stand_in} for e in entrants],
        "ranking": [{"rank": i, "scheme": s.scheme, "wins": s.wins, "contests": s.contests,
                     "win_share": round(s.win_share, 4), "mean_relative_score": round(s.mean_relative_score, 4),
                     **{f"{k}_median": None if v is None else round(v, 4) for k, v in s.medians.items()},
                     **{f"harm_{k}": None if v is None else round(v, 4) for k, v in s.harm.items()},
                     "stand_in": s.stand_in}
                    for i, s in enumerate(standings, 1)],
        "breakdown": {dim: {value: {s: round(share, 4) for s, share in by.items()} for value, by in values.items()}
                      for dim, values in ranking.breakdown(rows, names).items()},
    }


def _cell(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _table(header: Sequence[str], lines: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(line) + " |" for line in lines)]


def markdown(data: dict, rows: Sequence[dict]) -> str:
    stand_ins = [s for s in data["schemes"] if s["stand_in"]]
    windows = f", {data['window_s']:g} s windows" if data.get("window_s") else ""
    out = [
        f"# League: {data['matrix']}", "",
        *([data["description"], ""] if data["description"] else []),
        f"{data['environments']} environments × {len(data['schemes'])} schemes × {len(data['seeds'])} seed(s), "
        f"{data['duration_s']:g} s runs{windows}, simulated (pantheon-sim) in {data['wall_s']:g} s; commit "
        f"{data['commit'] or 'unknown'}. {data['rows']} runs, {data['failed_rows']} failed. Table: {TABLE_FILE}.", "",
        f"**Score** of a run: {data['score']}. In each contest (an environment{', or a window of one' if windows else ''})"
        f" the schemes within {data['win_margin']:.0%} of the best mean score over seeds win it (ccBench's leagues).",
    ]
    if stand_ins:
        out += ["", "Stand-ins (the simulator runs the crates/cc scheme in their place): "
                + ", ".join(f"{s['name']} as {s['stand_in']}" for s in stand_ins) + "."]
    out += ["", "## Ranking", ""]
    slowdowns = any(r.get("slowdown_p99_median") is not None for r in data["ranking"])
    out += _table(
        ("rank", "scheme", "wins", "win share", "relative score", "throughput (Mbit/s)", "utilization",
         "p95 delay (ms)", "loss", "Jain", "harm mean", "harm p90", *(["FCT slowdown p99"] if slowdowns else [])),
        [(str(r["rank"]), r["scheme"] + (f" (as {r['stand_in']})" if r["stand_in"] else ""),
          f"{r['wins']}/{r['contests']}", f"{r['win_share']:.0%}", _cell(r["mean_relative_score"]),
          _cell(r["throughput_mbps_median"]), _cell(r["utilization_median"]), _cell(r["delay_p95_ms_median"], 1),
          _cell(r["loss_rate_median"], 4), _cell(r["jain_median"]), _cell(r["harm_throughput_mean"]),
          _cell(r["harm_throughput_p90"]), *([_cell(r.get("slowdown_p99_median"), 1)] if slowdowns else []))
         for r in data["ranking"]])
    out += ["", "Medians over the scheme's runs; Jain's index where flows share the path; the harm the scheme does to "
            "its competitor's throughput (Ware et al., HotNets 2019) where it competes with another scheme, its mean "
            "and 90th percentile over those cells" + ("; the 99th percentile of its transfers' slowdown (completion "
                                                      "time over the empty path's) in workload cells" if slowdowns
                                                      else "") + "."]
    order = [r["scheme"] for r in data["ranking"]]
    for dim, values in data["breakdown"].items():
        out += ["", f"## Win share by {DIMENSION_NAMES.get(dim, dim)}", ""]
        out += _table(("scheme", *values),
                      [(s, *(f"{by[s]:.0%}" if s in by else "–" for by in values.values())) for s in order])
    spread = ranking.spread(rows)
    if spread:
        cvs = [cv for _, _, cv in spread]
        out += ["", "## Spread over seeds", "",
                f"Coefficient of variation of the score over seeds, per environment and scheme: median "
                f"{statistics.median(cvs):.1%}, largest:", ""]
        out += _table(("environment", "scheme", "CV"), [(e, s, f"{cv:.0%}") for e, s, cv in spread[:SPREAD_SHOWN]])
    if "confirm" in data:
        out += ["", *_trust(data["confirm"])]
    failed = [r for r in rows if not r["ok"]]
    if failed:
        out += ["", "## Failed runs", ""]
        out += [f"- {r['environment']} {r['scheme']} seed {r['seed']}: {r['error']}" for r in failed[:20]]
        if len(failed) > 20:
            out.append(f"- and {len(failed) - 20} more (the table's `error` column)")
    return "\n".join(out) + "\n"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1%}"


def _trust(confirmed: dict) -> list[str]:
    """The emulator's spot checks: each cell's numbers both ways, and the median differences."""
    medians = confirmed["median_abs_difference"]
    seeds = max((len(c.get("seeds") or [c["seed"]]) for c in confirmed["cells"]), default=1)
    out = ["## How far to trust it: the emulator's spot checks", "",
           f"{counted(len(confirmed['cells']), 'cell')} chosen to cover the matrix, run again over the emulator in real time "
           "(the same controller, path, flows, length and seed"
           + (f"; each on {seeds} seeds, the means compared" if seeds > 1 else "")
           + "). Median |emulated − simulated| / simulated: "
           + ", ".join(f"{name} {'–' if medians[key] is None else f'{medians[key]:.1%}'}"
                       for key, name in (("throughput_mbps", "throughput"), ("delay_p95_ms", "p95 delay"),
                                         ("score", "score"))) + ".", ""]
    out += _table(("environment", "scheme", "throughput sim → emu (Mbit/s)", "Δ", "p95 sim → emu (ms)", "Δ", "score Δ"),
                  [(c["environment"], c["scheme"] + (f" (as {c['emulated_as']})" if c["emulated_as"] != c["scheme"] else ""),
                    *((f"{_cell(c['simulated']['throughput_mbps'])} → {_cell(c['emulated']['throughput_mbps'])}",
                       _percent(c["difference"]["throughput_mbps"]),
                       f"{_cell(c['simulated']['delay_p95_ms'], 1)} → {_cell(c['emulated']['delay_p95_ms'], 1)}",
                       _percent(c["difference"]["delay_p95_ms"]), _percent(c["difference"]["score"]))
                      if c["emulated"] else (f"failed: {c['error']}", "", "", "", "")))
                   for c in confirmed["cells"]])
    return out


def write(data_dir: Path, data: dict, rows: Sequence[dict]) -> Path:
    files.write_atomic(data_dir / SUMMARY_FILE, files.json_text(data))
    path = data_dir / REPORT_FILE
    files.write_atomic(path, markdown(data, rows))
    return path
