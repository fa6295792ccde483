"""What the pages and the API show of the archive, as plain dicts (the API returns them as JSON,
the templates render them), so the two never disagree. Per-scheme statistics are over a scheme's
valid runs (the analysis's verdict), of the all-flows metrics of each run.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import quote

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from pantheon.analysis.metrics import power
from pantheon.analysis.ranking import rank_key
from pantheon.archive.models import Flow, Result, ResultScheme, Run
from pantheon.archive.stats import describe
from pantheon.wording import counted

STATISTICS = ("throughput_mbps", "delay_p95_ms", "loss_rate", "ce_rate")
"""The all-flows metrics the result page describes per scheme (mean, sd, 95% CI)."""
PLOT_SUFFIXES = (".png", ".svg")
DOWNLOAD_NAMES = ("report.pdf", "report.html", "perf.json", "perf.csv", "perf.parquet", "metadata.json")
RECORD_NAMES = ("records.parquet", "datalink.log", "acklink.log", "run.json")


def result_url(base: str, result_id: int) -> str:
    return f"{base.rstrip('/')}/results/{result_id}"


def file_url(base: str, result_id: int, path: str) -> str:
    return f"{result_url(base, result_id)}/files/{quote(path)}"


SHORT_OPTIONS_CHARS = 40
"""Emulator options longer than this are cut in a result's name (the page gives them whole)."""
NAMED_SCHEMES = 3
"""Schemes a result's name lists before "+N more"."""


def path_options(options: str) -> str:
    """The emulator options less "--seed N", which says nothing of the path (two results that differ
    only in their seed ran on the same path)."""
    words = options.split()
    if "--seed" in words:
        i = words.index("--seed")
        words = words[:i] + words[i + 2:]
    return " ".join(words)


def path_name(result: Result) -> str:
    """On which path, in a few words: a real path's two ends, an emulator preset, or the emulator's
    options (cut at SHORT_OPTIONS_CHARS)."""
    if result.node or result.peer:
        ends = (result.node, result.peer) if result.direction != "peer-to-node" else (result.peer, result.node)
        return " → ".join(end or "?" for end in ends)
    options = path_options(result.emulator_options)
    if len(options) > SHORT_OPTIONS_CHARS:
        options = options[:SHORT_OPTIONS_CHARS - 1].rstrip() + "…"
    return result.preset or options or "the default path"


def name(result: Result) -> str:
    """A result's short name, for titles and links: what ran, on which path, how many flows
    ("Copa, Cubic on nepal-wifi, 1 flow"); the uploaded title and the full command are on its page."""
    shown = [s.display or s.scheme for s in result.schemes]
    schemes = ", ".join(shown[:NAMED_SCHEMES]) + (f" +{len(shown) - NAMED_SCHEMES} more" if len(shown) > NAMED_SCHEMES else "")
    return f"{schemes or 'No scheme'} on {path_name(result)}, {counted(result.flows, 'flow')}"


def listing(result: Result, base: str) -> dict:
    """A result as /api/results lists it."""
    return {"id": result.id, "url": result_url(base, result.id), "name": name(result), "title": result.title,
            "date": result.started_at.isoformat(timespec="seconds") + "Z", "schemes": [s.scheme for s in result.schemes],
            "flows": result.flows, "preset": result.preset, "kind": result.kind, "node": result.node,
            "peer": result.peer, "direction": result.direction, "link": result.link}


def _valid_all(runs: Iterable[Run]) -> list[Flow]:
    return [run.flows[0] for run in runs if run.valid and run.flows]


def scheme_stats(result: Result) -> list[dict]:
    """Per scheme of a result: runs, valid runs, mean/sd/95% CI of each STATISTICS metric, the score."""
    rows = []
    for s in result.schemes:
        runs = [r for r in result.runs if r.scheme == s.scheme]
        flows = _valid_all(runs)
        row: dict = {"scheme": s.scheme, "display": s.display, "version": s.version, "runs": len(runs), "valid_runs": len(flows)}
        for name in STATISTICS:
            row[name] = describe([getattr(f, name) for f in flows])
        row["score"] = power(row["throughput_mbps"]["mean"], row["delay_p95_ms"]["mean"])
        rows.append(row)
    return rows


def ranked(stats: list[dict]) -> list[dict]:
    """scheme_stats' rows best first, in the order of the report's ranking (analysis/ranking.py's
    rank): best score first, then the schemes with valid runs but no score, then those without a
    valid run, each group in upload order."""
    return sorted(stats, key=lambda row: rank_key(row["valid_runs"], row["score"]))


def files(result: Result, base: str) -> list[dict]:
    def role(path: str) -> str:
        name = path.rsplit("/", 1)[-1]
        if name.endswith(PLOT_SUFFIXES):
            return "plot"
        if path in DOWNLOAD_NAMES:
            return "download"
        return "record" if name in RECORD_NAMES else "other"
    return [{"path": f.path, "sha256": f.sha256, "size_bytes": f.size_bytes, "role": role(f.path),
             "url": file_url(base, result.id, f.path)} for f in result.files]


def run_dirs(listed: list[dict]) -> list[dict]:
    """The files below the top level, grouped by run (LABEL/runK, the first two components; the
    original layout has none), for the result page's runs table."""
    groups: dict[str, list[dict]] = {}
    for f in listed:
        parts = f["path"].split("/")
        if len(parts) > 1:
            run = "/".join(parts[:2]) if len(parts) > 2 else parts[0]
            groups.setdefault(run, []).append({**f, "name": f["path"][len(run) + 1:]})
    return [{"dir": d, **{role: [f for f in fs if f["role"] == role.removesuffix("s")] for role in ("records", "plots", "others")}}
            for d, fs in sorted(groups.items())]


def detail(result: Result, base: str) -> dict:
    """A result as /api/results/{id} and its page show it."""
    metadata = json.loads(result.metadata_json)
    remote = metadata.get("remote") if isinstance(metadata.get("remote"), dict) else None
    hosts = {"local": metadata.get("machine"), "remote": (remote or {}).get("remote_machine")}
    listed = files(result, base)
    if remote:
        hosts |= {"local_description": remote.get("local_desc", ""), "remote_description": remote.get("remote_desc", ""),
                  "remote_host": remote.get("host", ""), "sender": remote.get("sender", ""),
                  "tunnel_server": remote.get("tunnel_server", "")}
    return {
        **listing(result, base), "description": result.description, "uploaded": result.uploaded_at.isoformat(timespec="seconds") + "Z",
        "layout": result.layout, "emulator_options": result.emulator_options,
        "setup": [{"what": what, "value": value} for what, value in json.loads(result.setup_json)],
        "hosts": hosts,
        "versions": {"pantheon": result.pantheon_version, "git_commit": result.git_commit,
                     "remote_pantheon": result.remote_pantheon_version, "remote_git_commit": result.remote_git_commit,
                     "schemes": {s.scheme: s.version for s in result.schemes}},
        "clock_bounds_ms": ({"min": result.delay_bound_min_ms, "max": result.delay_bound_max_ms}
                            if result.delay_bound_max_ms is not None else None),
        "stats": scheme_stats(result),
        "files": listed,
        "run_dirs": run_dirs(listed),
        "archive_url": f"{result_url(base, result.id)}/archive.tar.gz",
        "runs_url": f"{base.rstrip('/')}/api/results/{result.id}/runs",
        "metadata": metadata,
    }


FLOW_COLUMNS = ("flow", "scheme", "sent_packets", "sent_bytes", "delivered_packets", "delivered_bytes", "first_send_s",
                "last_send_s", "first_delivery_s", "last_delivery_s", "duration_s", "throughput_mbps", "ingress_mbps",
                "delay_p95_ms", "delay_mean_ms", "delay_median_ms", "loss_rate", "ce_rate", "fct_ms", "slowdown")
RUN_COLUMNS = ("scheme", "number", "valid", "capacity_mbps", "utilization", "jain_index", "power", "delay_bound_ms",
               "rtt_fairness")


def runs(result: Result) -> list[dict]:
    """Every run of a result with its run-wide metrics, flags and every flow's metrics ("all" first)."""
    return [{**{c: getattr(r, c) for c in RUN_COLUMNS}, "flags": r.flags.splitlines() if r.flags else [],
             "flows": [{c: getattr(f, c) for c in FLOW_COLUMNS} for f in r.flows]} for r in result.runs]


def loaded(session: Session, result_id: int) -> Result | None:
    """A result with its schemes, runs, flows and files, in a handful of queries."""
    return session.scalar(select(Result).where(Result.id == result_id).options(
        selectinload(Result.schemes), selectinload(Result.files), selectinload(Result.runs).selectinload(Run.flows)))


def aggregates(result: Result) -> None:
    """Fills each ResultScheme's stored means and score from the result's runs (at upload)."""
    for scheme, row in zip(result.schemes, scheme_stats(result)):
        scheme.runs, scheme.valid_runs, scheme.score = row["runs"], row["valid_runs"], row["score"]
        scheme.throughput_mbps_mean = row["throughput_mbps"]["mean"]
        scheme.delay_p95_ms_mean = row["delay_p95_ms"]["mean"]
        scheme.loss_rate_mean = row["loss_rate"]["mean"]


def cell(s: ResultScheme) -> dict:
    """A scheme's stored numbers in one result: the summary's cell, a point of the scheme page."""
    return {"scheme": s.scheme, "display": s.display, "runs": s.runs, "valid_runs": s.valid_runs, "score": s.score,
            "throughput_mbps": s.throughput_mbps_mean, "delay_p95_ms": s.delay_p95_ms_mean, "loss_rate": s.loss_rate_mean}


def path_key(result: Result) -> tuple:
    """What makes two results' paths the same for the summary: the kind, the preset or the emulator's
    options (less the seed), a real path's ends, direction and link, and the flows per run."""
    return (result.kind, result.preset, path_options(result.emulator_options), result.node, result.peer,
            result.direction, result.link, result.flows)


def summary(session: Session, base: str) -> dict:
    """Experiments × schemes, each cell the score ln(mean throughput / mean p95 delay) over the
    scheme's valid runs in that experiment, with the two means; newest experiment first.

    `paths` is the same grouped by path (path_key): one row per path and number of flows, each
    scheme's cell from the newest result that ran it there, so that schemes uploaded one result
    each (as the observatory does) compare in one row; newest path first."""
    query = select(Result).options(selectinload(Result.schemes)).order_by(Result.started_at.desc(), Result.id.desc())
    experiments = []
    schemes: dict[str, str] = {}
    paths: dict[tuple, dict] = {}
    for result in session.scalars(query):
        for s in result.schemes:
            schemes.setdefault(s.scheme, s.display)
        cells = {s.scheme: {**cell(s), "result_id": result.id} for s in result.schemes}
        experiments.append({"id": result.id, "url": result_url(base, result.id), "name": name(result), "title": result.title,
                            "date": result.started_at.isoformat(timespec="seconds") + "Z", "kind": result.kind,
                            "cells": cells})
        row = paths.setdefault(path_key(result), {
            "path": path_name(result), "kind": result.kind, "flows": result.flows, "results": [], "cells": {}})
        row["results"].append({"id": result.id, "url": result_url(base, result.id),
                               "date": result.started_at.isoformat(timespec="seconds") + "Z"})
        for scheme, c in cells.items():
            row["cells"].setdefault(scheme, c)
    return {"schemes": [{"scheme": k, "display": v} for k, v in sorted(schemes.items())], "experiments": experiments,
            "paths": list(paths.values())}


def scheme_history(session: Session, base: str, scheme: str) -> dict:
    """One scheme in every experiment that ran it, oldest first: its means and score there."""
    query = (select(Result, ResultScheme).join(ResultScheme, ResultScheme.result_id == Result.id)
             .where(ResultScheme.scheme == scheme).options(selectinload(Result.schemes))
             .order_by(Result.started_at, Result.id))
    points = [{**listing(result, base), "stats": cell(s)} for result, s in session.execute(query)]
    return {"scheme": scheme, "display": points[-1]["stats"]["display"] if points else scheme, "experiments": points}
