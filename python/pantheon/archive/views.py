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
from pantheon.archive.models import Flow, Result, Run
from pantheon.archive.stats import describe

STATISTICS = ("throughput_mbps", "delay_p95_ms", "loss_rate")
"""The all-flows metrics the result page describes per scheme (mean, sd, 95% CI)."""
PLOT_SUFFIXES = (".png", ".svg")
DOWNLOAD_NAMES = ("report.pdf", "report.html", "perf.json", "perf.csv", "perf.parquet", "metadata.json")
RECORD_NAMES = ("records.parquet", "datalink.log", "acklink.log", "run.json")


def result_url(base: str, result_id: int) -> str:
    return f"{base.rstrip('/')}/results/{result_id}"


def file_url(base: str, result_id: int, path: str) -> str:
    return f"{result_url(base, result_id)}/files/{quote(path)}"


def listing(result: Result, base: str) -> dict:
    """A result as /api/results lists it."""
    return {"id": result.id, "url": result_url(base, result.id), "title": result.title,
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
    """The files in subdirectories (each run's), grouped by directory, for the result page's runs table."""
    groups: dict[str, list[dict]] = {}
    for f in listed:
        if "/" in f["path"]:
            groups.setdefault(f["path"].rsplit("/", 1)[0], []).append({**f, "name": f["path"].rsplit("/", 1)[1]})
    return [{"dir": d, "records": [f for f in fs if f["role"] == "record"], "plots": [f for f in fs if f["role"] == "plot"]}
            for d, fs in sorted(groups.items())]


def detail(result: Result, base: str) -> dict:
    """A result as /api/results/{id} and its page show it."""
    metadata = json.loads(result.metadata_json)
    remote = metadata.get("remote") if isinstance(metadata.get("remote"), dict) else None
    hosts = {"local": metadata.get("machine"), "remote": (remote or {}).get("remote_machine")}
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
        "files": files(result, base),
        "run_dirs": run_dirs(files(result, base)),
        "archive_url": f"{result_url(base, result.id)}/archive.tar.gz",
        "runs_url": f"{base.rstrip('/')}/api/results/{result.id}/runs",
        "metadata": metadata,
    }


FLOW_COLUMNS = ("flow", "scheme", "sent_packets", "sent_bytes", "delivered_packets", "delivered_bytes", "first_send_s",
                "last_send_s", "first_delivery_s", "last_delivery_s", "duration_s", "throughput_mbps", "ingress_mbps",
                "delay_p95_ms", "delay_mean_ms", "delay_median_ms", "loss_rate")
RUN_COLUMNS = ("scheme", "number", "valid", "capacity_mbps", "utilization", "jain_index", "power", "delay_bound_ms")


def runs(result: Result) -> list[dict]:
    """Every run of a result with its run-wide metrics, flags and every flow's metrics ("all" first)."""
    return [{**{c: getattr(r, c) for c in RUN_COLUMNS}, "flags": r.flags.splitlines() if r.flags else [],
             "flows": [{c: getattr(f, c) for c in FLOW_COLUMNS} for f in r.flows]} for r in result.runs]


def loaded(session: Session, result_id: int) -> Result | None:
    """A result with its schemes, runs, flows and files, in a handful of queries."""
    return session.scalar(select(Result).where(Result.id == result_id).options(
        selectinload(Result.schemes), selectinload(Result.files), selectinload(Result.runs).selectinload(Run.flows)))


def summary(session: Session, base: str, ids: list[int] | None = None) -> dict:
    """Experiments × schemes, each cell the score ln(mean throughput / mean p95 delay) over the
    scheme's valid runs in that experiment, with the two means; newest experiment first."""
    query = select(Result).options(selectinload(Result.schemes), selectinload(Result.runs).selectinload(Run.flows))
    if ids is not None:
        query = query.where(Result.id.in_(ids))
    experiments = []
    schemes: dict[str, str] = {}
    for result in session.scalars(query.order_by(Result.started_at.desc(), Result.id.desc())):
        cells = {}
        for row in scheme_stats(result):
            schemes.setdefault(row["scheme"], row["display"])
            cells[row["scheme"]] = {"score": row["score"], "throughput_mbps": row["throughput_mbps"]["mean"],
                                    "delay_p95_ms": row["delay_p95_ms"]["mean"], "valid_runs": row["valid_runs"]}
        experiments.append({"id": result.id, "url": result_url(base, result.id), "title": result.title,
                            "date": result.started_at.isoformat(timespec="seconds") + "Z", "kind": result.kind,
                            "cells": cells})
    return {"schemes": [{"scheme": k, "display": v} for k, v in sorted(schemes.items())], "experiments": experiments}


def scheme_history(session: Session, base: str, scheme: str) -> dict:
    """One scheme in every experiment that ran it, oldest first: its statistics there and the score."""
    query = (select(Result).where(Result.schemes.any(scheme=scheme))
             .options(selectinload(Result.schemes), selectinload(Result.runs).selectinload(Run.flows))
             .order_by(Result.started_at, Result.id))
    points = []
    display = scheme
    for result in session.scalars(query):
        row = next(r for r in scheme_stats(result) if r["scheme"] == scheme)
        display = row["display"]
        points.append({**listing(result, base), "stats": row})
    return {"scheme": scheme, "display": display, "experiments": points}
