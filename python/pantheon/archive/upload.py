"""An unpacked upload (staging.py) made into a result: the data dir read by the project's own
analysis (python/pantheon/analysis: open_data_dir, judge_run), every run's metrics derived again
from its records and checked against the perf.json the uploader's analysis wrote, then the files
moved into the store and the rows committed in one transaction, in that order (store.py says why).

The archive stores the metrics it derived, not the uploaded numbers: the two agree within
PERF_RELATIVE_TOLERANCE or the upload is refused, naming the first metric that differs.

metadata.json is the uploader's word: every value read from it here is checked for its type (a
wrong one is read as absent), text loses its NUL characters (PostgreSQL refuses them) and is cut
to its column's length (PostgreSQL refuses longer; SQLite would keep it), so that no upload can
make a 500 of the insert, and a NaN or Infinity in it is refused (the API's JSON cannot hold it).
"""
from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from pantheon.analysis.analyze import display_name, judge_run
from pantheon.analysis.datadir import DataDir, open_data_dir
from pantheon.analysis.metrics import RUN_METRICS, RunMetrics, scheme_summary
from pantheon.analysis.perf import read_perf_json
from pantheon.archive.models import File, Flow, Result, ResultScheme, Run
from pantheon.archive.staging import Refused, Unpacked
from pantheon.archive.store import Store
from pantheon.archive.tokens import now_utc
from pantheon.archive.views import FLOW_COLUMNS, aggregates, path_options
from pantheon.errors import PantheonError

PERF_RELATIVE_TOLERANCE = 1e-6
"""perf.json is written with every digit of a float (json's repr), so the same analysis of the same
records agrees exactly; the tolerance only forgives a different numpy's last-bit rounding."""
CHECKED_METRICS = ("sent_packets", "delivered_packets", "sent_bytes", "delivered_bytes", "throughput_mbps",
                   "ingress_mbps", "delay_p95_ms", "delay_mean_ms", "delay_median_ms", "loss_rate", "ce_rate", "fct_ms",
                   "slowdown")
LATER_KEYS = ("ce_rate", "fct_ms", "slowdown", "rtt_fairness")
"""perf.json keys an analysis before them did not write (ce_rate: issue 34; a finite flow's fct_ms
and slowdown, a run's rtt_fairness: issue 35). Absent, they agree
with a value of the records that says nothing: null, or a statistic of no values (n 0), as the
records of a run without ECN give; so a data dir analysed before ECN uploads as it did."""
KINDS = ("emulation", "simulation", "node-cloud", "cloud-cloud")
DIRECTIONS = ("node-to-peer", "peer-to-node")
MAX_SCHEME_CHARS = 200
"""The longest scheme label accepted (the schemes', runs' and flows' scheme columns hold this many)."""
RUN_NUMBER = re.compile(r"[1-9][0-9]{0,8}")
"""A run's key in perf.json, as pantheon analyze writes it (str of the run's number)."""
WRITE_LOCK = threading.Lock()
"""One writing transaction at a time in this process: SQLite has one writer anyway, and a
transaction that waits here cannot fail on a lock it would otherwise have to upgrade."""


@dataclass(frozen=True)
class Description:
    """What the uploader said about the experiment that the data dir cannot say (None: derive it)."""
    title: str | None = None
    description: str | None = None
    kind: str | None = None
    node: str | None = None
    peer: str | None = None
    link: str | None = None

    def check(self) -> Description:
        if self.kind is not None and self.kind not in KINDS:
            raise Refused(f"kind {self.kind!r} is not one of {', '.join(KINDS)}")
        for name, value, most in (("title", self.title, 500), ("node", self.node, 200), ("peer", self.peer, 200),
                                  ("link", self.link, 50), ("description", self.description, 20_000)):
            if value is not None and len(value) > most:
                raise Refused(f"the {name} is longer than {most} characters")
            if value is not None and "\x00" in value:
                raise Refused(f"the {name} holds a NUL character")
        return self


def _text(value: object, most: int) -> str:
    """A string from metadata.json as a column takes it: "" for another type, NULs dropped, cut to `most`."""
    return value.replace("\x00", "")[:most] if isinstance(value, str) else ""


def _object(value: object) -> dict:
    """A JSON object from metadata.json, or {} where it holds another type."""
    return value if isinstance(value, dict) else {}


def _same(a: object, b: object) -> bool:
    if a is None or (isinstance(a, float) and not math.isfinite(a)):
        return b is None
    if isinstance(a, bool) or not isinstance(a, (int, float)):
        return a == b
    return isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=PERF_RELATIVE_TOLERANCE, abs_tol=1e-12)


def _says_nothing(value: object) -> bool:
    return value is None or (isinstance(value, dict) and value.get("n") == 0)


def _first_difference(mine: object, theirs: object, where: str) -> str | None:
    """Where two JSON-like values first differ (numbers within the tolerance agree), or None."""
    if isinstance(mine, dict):
        if not isinstance(theirs, dict):
            return f"{where} is missing"
        for key, value in mine.items():
            if key in LATER_KEYS and key not in theirs and _says_nothing(value):
                continue
            if (found := _first_difference(value, theirs.get(key), f"{where} {key}")) is not None:
                return found
        return None
    if not _same(mine, theirs):
        return f"{where} is {theirs!r} there, {mine!r} from the records"
    return None


def _check_perf(perf: dict, derived: dict[tuple[str, int], RunMetrics]) -> None:
    """Refused unless perf.json has exactly the runs of the records, each run's and each flow's
    numbers as derived here, and each scheme's summary (metrics.scheme_summary) of those runs."""
    claimed = perf.get("schemes")
    if not isinstance(claimed, dict):
        raise Refused('perf.json has no "schemes": it is not what pantheon analyze writes')
    # A scheme whose "runs" is not an object, or a key that is no run number, lists no run: the
    # sets then differ and the refusal names the run.
    claimed_runs = {(label, int(n)): run for label, s in claimed.items()
                    for n, run in _object(_object(s).get("runs")).items() if RUN_NUMBER.fullmatch(n)}
    listed = set(claimed_runs)
    if listed != set(derived):
        differ = sorted(listed ^ set(derived))[:3]
        raise Refused(f"perf.json and the records disagree on which runs exist ({', '.join(f'{a} run {b}' for a, b in differ)}); "
                      "run pantheon analyze DATA_DIR again before uploading")
    by_label: dict[str, list[RunMetrics]] = {}
    for (label, number), metrics in derived.items():
        by_label.setdefault(label, []).append(metrics)
        mine = {name: getattr(metrics, name) for name in (*RUN_METRICS, "valid")}
        mine["flows"] = {m.flow: {name: getattr(m, name) for name in CHECKED_METRICS} for m in [metrics.all, *metrics.flows]}
        found = _first_difference(mine, claimed_runs[(label, number)], f"{label} run {number}")
        if found is not None:
            raise Refused(f"perf.json does not match the records: {found}")
    for label, runs in by_label.items():
        found = _first_difference(scheme_summary(runs), claimed[label].get("summary"), f"{label} summary")
        if found is not None:
            raise Refused(f"perf.json does not match the records: {found}")


def _started(metadata: dict) -> datetime:
    text = metadata.get("start_time")
    try:
        moment = datetime.fromisoformat(text) if isinstance(text, str) else None
        # A zone's offset can carry a time of year 1 or 9999 past the range of datetime (OverflowError).
        moment = moment.astimezone(UTC).replace(tzinfo=None) if moment and moment.tzinfo else moment
    except (ValueError, OverflowError):
        moment = None
    return now_utc() if moment is None else moment


def _where(data: DataDir, told: Description) -> dict[str, str]:
    """kind, node, peer, direction, link and preset: from the metadata, the uploader's word first."""
    metadata = data.metadata
    remote = metadata.get("remote")
    preset = _text(_object(metadata.get("arguments")).get("emulator"), 1000)
    preset = (Path(preset).stem if preset.endswith(".toml") else preset)[:200]
    if isinstance(remote, dict):
        machine = _text(_object(metadata.get("machine")).get("hostname"), 200)
        where = {"kind": "node-cloud", "node": _text(remote.get("local_desc"), 200) or machine,
                 "peer": _text(remote.get("remote_desc"), 200) or _text(remote.get("host"), 200),
                 "direction": "node-to-peer" if remote.get("sender") == "local" else "peer-to-node", "link": "", "preset": ""}
    else:
        simulated = bool(metadata.get("simulated"))
        where = {"kind": "simulation" if simulated else "emulation", "node": "", "peer": "", "direction": "",
                 "link": "simulated" if simulated else "emulated", "preset": preset}
    for name in ("kind", "node", "peer", "link"):
        if (value := getattr(told, name)) is not None:
            where[name] = value.strip()
    return where


def _emulator_options(metadata: dict) -> list[str]:
    """The emulator's options (a list of strings in metadata.json; what is not a string is left out)."""
    given = metadata.get("emulator_options")
    return [_text(o, 10_000) for o in given if isinstance(o, str)] if isinstance(given, list) else []


def _title(data: DataDir, where: dict[str, str], flows: int) -> str:
    schemes = ", ".join(display_name(data, label) for label in data.looks)
    per_run = f"{flows} flow{'s' if flows != 1 else ''}"
    if where["kind"] in ("node-cloud", "cloud-cloud"):
        ends = (where["node"], where["peer"]) if where["direction"] == "node-to-peer" else (where["peer"], where["node"])
        return f"{ends[0]} → {ends[1]}: {schemes} ({per_run})"
    options = path_options(" ".join(_emulator_options(data.metadata)))
    default = "12 Mbit/s each way, no delay" if data.layout == "harness" else "the original Pantheon's layout"
    path = where["preset"] or options or default
    return f"{where['kind'].capitalize()}, {path}: {schemes} ({per_run})"


def build_result(data: DataDir, derived: dict[tuple[str, int], RunMetrics], unpacked: Unpacked, told: Description) -> Result:
    metadata = data.metadata
    try:
        metadata_json = json.dumps(metadata, allow_nan=False)
    except ValueError:
        raise Refused("metadata.json holds NaN or Infinity, which JSON has no numbers for") from None
    if long := next((label for label in data.looks if len(label) > MAX_SCHEME_CHARS), None):
        raise Refused(f"the scheme {long[:80]!r}... has a name longer than {MAX_SCHEME_CHARS} characters")
    where = _where(data, told)
    flows = max([len(s.flows) for s in data.runs] + [len(m.flows) for m in derived.values()] + [1])
    started = _started(metadata)
    remote = _object(metadata.get("remote"))
    bounds = [m.delay_bound_ms for m in derived.values() if m.delay_bound_ms is not None]
    title = told.title.strip() if told.title and told.title.strip() else _title(data, where, flows)
    known = _object(metadata.get("schemes"))
    schemes = [ResultScheme(scheme=label, position=i, display=_text(display_name(data, label), 200) or label,
                            version=_text(str(_object(known.get(label)).get("versions")
                                              or _object(known.get(label)).get("version") or ""), 500))
               for i, label in enumerate(data.looks)]
    runs = []
    for i, source in enumerate(data.runs):
        m = derived[(source.label, source.number)]
        runs.append(Run(position=i, scheme=source.label, number=source.number, valid=m.valid,
                        flags="\n".join(m.flags).replace("\x00", ""),
                        capacity_mbps=m.capacity_mbps, utilization=m.utilization, jain_index=m.jain_index, power=m.power,
                        delay_bound_ms=m.delay_bound_ms, rtt_fairness=m.rtt_fairness,
                        flows=[Flow(position=j, **{k: v for k, v in asdict(f).items() if k in FLOW_COLUMNS})
                               for j, f in enumerate([m.all, *m.flows])]))
    setup = [(what, value) for what, value in data.setup if what != "Data"]
    description = (told.description or "").strip()
    search = " ".join([title, description, *where.values(), *(f"{s.scheme} {s.display}" for s in schemes),
                       *(str(value) for _, value in setup)]).lower().replace("\x00", "")
    result = Result(
        manifest_sha256=unpacked.manifest_sha256, title=_text(title, 500), description=description, kind=where["kind"],
        preset=where["preset"], emulator_options=" ".join(_emulator_options(metadata)),
        node=where["node"][:200], peer=where["peer"][:200], direction=where["direction"], link=where["link"][:50],
        flows=flows, started_at=started, year=started.year, month=started.month, uploaded_at=now_utc(),
        layout=data.layout, pantheon_version=_text(metadata.get("pantheon_version"), 50),
        git_commit=_text(metadata.get("git_commit"), 64), remote_pantheon_version=_text(remote.get("remote_pantheon_version"), 50),
        remote_git_commit=_text(remote.get("remote_git_commit"), 64),
        delay_bound_min_ms=min(bounds) if bounds else None, delay_bound_max_ms=max(bounds) if bounds else None,
        setup_json=json.dumps(setup), metadata_json=metadata_json, search_text=search,
        schemes=schemes, runs=runs,
        files=[File(path=name, sha256=digest, size_bytes=size) for name, (digest, size) in sorted(unpacked.files.items())],
    )
    aggregates(result)
    return result


def derive(unpacked: Unpacked) -> tuple[DataDir, dict[tuple[str, int], RunMetrics]]:
    """The data dir read and every run judged by the analysis, checked against perf.json."""
    try:
        data = open_data_dir(unpacked.root)
    except PantheonError as e:
        raise Refused(f"not a data dir: {str(e).replace(str(unpacked.root), 'DATA_DIR')}") from None
    if "perf.json" not in unpacked.files:
        raise Refused("the data dir has no perf.json: run pantheon analyze DATA_DIR before uploading")
    try:
        perf = read_perf_json(unpacked.root / "perf.json")
    except PantheonError as e:
        raise Refused(f"perf.json cannot be read: {str(e).replace(str(unpacked.root), 'DATA_DIR')}") from None
    derived = {(source.label, source.number): judge_run(data, source)[1] for source in data.runs}
    _check_perf(perf, derived)
    return data, derived


def existing(session: Session, manifest_sha256: str) -> int | None:
    return session.scalar(select(Result.id).where(Result.manifest_sha256 == manifest_sha256))


def ingest(sessions: sessionmaker[Session], store: Store, unpacked: Unpacked, body: Path, body_sha256: str,
           token_id: int, told: Description) -> tuple[int, bool]:
    """(result id, whether it is new): the same data dir uploaded again is the result already there."""
    with sessions() as session:
        if (found := existing(session, unpacked.manifest_sha256)) is not None:
            return found, False
    data, derived = derive(unpacked)
    result = build_result(data, derived, unpacked, told.check())
    return keep(sessions, store, unpacked, body, body_sha256, token_id, result, existing)


def keep(sessions: sessionmaker[Session], store: Store, unpacked: Unpacked, body: Path, body_sha256: str,
         token_id: int, row, existing: Callable[[Session, str], int | None]) -> tuple[int, bool]:
    """(the row's id, whether it is new): an upload's files into the store, then its row (a result,
    a league) in one transaction; where a concurrent upload of the same dir committed first, its row
    (`existing` finds it by the manifest's digest)."""
    row.archive_sha256, row.archive_bytes, row.token_id = body_sha256, body.stat().st_size, token_id
    for name, (digest, _) in unpacked.files.items():
        store.put(unpacked.root / name, digest)
    store.put(body, body_sha256)
    with WRITE_LOCK, sessions() as session:
        session.add(row)
        try:
            session.commit()
        except IntegrityError:
            session.rollback()
            found = existing(session, unpacked.manifest_sha256)
            if found is None:
                raise
            return found, False
        return row.id, True
