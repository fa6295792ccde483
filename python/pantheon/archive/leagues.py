"""Leagues (issue 36 §5): the league dir of `pantheon league MATRIX.toml --data-dir DIR`, every
scheme of a matrix against the others over its environments, as one upload. The dir is recognised
by its league.json, checked here against the contract (LEAGUE_FORMAT, below and docs/archive.md)
field by field: an upload whose league.json breaks it is refused with one line naming the field,
and nothing of it is kept. league.parquet (one row per environment × scheme × seed) is checked only
for being a Parquet file: the archive stores it and offers it for download, as it does matrix.toml,
report.md and any other file of the dir.

What a league's pages and its API show are the dicts of this module (listing, detail, compared),
so that the two never disagree, as views.py does for results. Two leagues compare scheme by scheme:
each one's rank and win share in both, and how far it moved (did a change of the code move a
scheme?); a scheme in one league only is marked so.
"""
from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from urllib.parse import quote

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload, sessionmaker

from pantheon.archive.models import League, LeagueFile, LeagueScheme
from pantheon.archive.staging import Refused, Unpacked
from pantheon.archive.store import Store
from pantheon.archive.tokens import now_utc
from pantheon.archive.upload import Description, keep

LEAGUE_JSON = "league.json"
"""The file that makes a dir a league dir (and not an experiment's data dir)."""
LEAGUE_PARQUET = "league.parquet"
LEAGUE_FORMAT = "pantheon-league/1"
"""league.json's "format": the version of the contract this archive reads."""
MAX_LEAGUE_JSON_BYTES = 16 << 20
"""league.json is read into memory whole; a matrix of thousands of environments is far below this."""
PARQUET_MAGIC = b"PAR1"
"""A Parquet file begins and ends with these four bytes (the format's specification)."""
COMMIT = re.compile(r"[0-9a-fA-F]{40}(-dirty)?")
"""A git commit, and "-dirty" after it where the tree had uncommitted changes (`git describe --always
--dirty --abbrev=40`, what pantheon league writes): a league run before a commit is worth comparing too."""
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
RANKING_METRICS = ("mean_relative_score", "throughput_mbps_median", "utilization_median", "delay_p95_ms_median",
                   "loss_rate_median", "jain_median", "harm_throughput_median")
"""A ranking row's numbers that may be null (a scheme whose every contest failed has no median)."""
TEXT_FILES = (".md", ".toml", ".json", ".txt", ".csv")
"""A league dir's files served as plain text, so that a browser shows them instead of saving them."""
MAX_REPORT_CHARS = 200_000
"""The most of report.md the league page shows inline (the whole file is a download)."""


class _Contract:
    """Checks of league.json's values, each a Refused in one line naming the field."""

    @staticmethod
    def refused(where: str, what: str) -> Refused:
        """One line, whatever the uploader's keys hold (a dimension's name is shown as given)."""
        where = CONTROL.sub("?", where[:120])
        return Refused(f"league.json: {where} {what} (the format is {LEAGUE_FORMAT}, docs/archive.md)")

    @classmethod
    def text(cls, value: object, where: str, most: int, empty: bool = False) -> str:
        if not isinstance(value, str) or (not empty and not value.strip()):
            raise cls.refused(where, "is not a non-empty string" if not empty else "is not a string")
        if len(value) > most or "\x00" in value:
            raise cls.refused(where, f"is longer than {most} characters or holds a NUL character")
        return value

    @classmethod
    def optional_text(cls, value: object, where: str, most: int) -> str | None:
        return None if value is None else cls.text(value, where, most)

    @classmethod
    def number(cls, value: object, where: str, low: float | None = None, high: float | None = None,
               nullable: bool = False) -> float | None:
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise cls.refused(where, "is not a finite number" + (" or null" if nullable else ""))
        if (low is not None and value < low) or (high is not None and value > high):
            shown = f"from {low:g}" if high is None else f"from {low:g} to {high:g}"
            raise cls.refused(where, f"is {value!r}, not {shown}")
        return float(value)

    @classmethod
    def whole(cls, value: object, where: str, low: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 2**31 - 1:
            raise cls.refused(where, f"is not a whole number from {low}")
        return value

    @classmethod
    def mapping(cls, value: object, where: str) -> dict:
        if not isinstance(value, dict):
            raise cls.refused(where, "is not an object")
        return value


def _created(value: object) -> datetime:
    text = _Contract.text(value, "created_utc", 40)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise _Contract.refused("created_utc", f"{text!r} is not an ISO 8601 time (2026-11-29T21:40:00Z)") from None
    try:
        return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment
    except OverflowError:
        raise _Contract.refused("created_utc", f"{text!r} is out of range") from None


def check(document: object) -> dict:
    """league.json's document if it keeps the contract (its values of the right types and ranges, every
    scheme of the ranking and the breakdown one of "schemes"); a Refused naming the first field that
    does not. Keys the contract does not name are kept, unread (a later format's additions)."""
    c = _Contract
    doc = c.mapping(document, "the document")
    if doc.get("format") != LEAGUE_FORMAT:
        raise c.refused('"format"', f"is {str(doc.get('format'))[:40]!r}, not {LEAGUE_FORMAT!r}")
    c.text(doc.get("matrix"), "matrix", 200)
    c.text(doc.get("description", ""), "description", 20_000, empty=True)
    commit = doc.get("commit")
    if commit is not None and not (isinstance(commit, str) and COMMIT.fullmatch(commit)):
        raise c.refused("commit", f"is {str(commit)[:60]!r}, not a git commit (40 hex digits, -dirty after them "
                        "for a tree with uncommitted changes) or null")
    _created(doc.get("created_utc"))
    c.number(doc.get("duration_s"), "duration_s", low=0)
    c.whole(doc.get("environments"), "environments", low=1)
    seeds = doc.get("seeds")
    if not isinstance(seeds, list) or not seeds:
        raise c.refused("seeds", "is not a non-empty list of whole numbers")
    for i, seed in enumerate(seeds):
        c.whole(seed, f"seeds[{i}]")
    rows = c.whole(doc.get("rows"), "rows")
    if c.whole(doc.get("failed_rows"), "failed_rows") > rows:
        raise c.refused("failed_rows", f"is more than rows ({rows})")
    c.text(doc.get("score"), "score", 20_000)
    c.number(doc.get("win_margin"), "win_margin", low=0)
    schemes = doc.get("schemes")
    if not isinstance(schemes, list) or not schemes:
        raise c.refused("schemes", "is not a non-empty list")
    names: set[str] = set()
    for i, s in enumerate(schemes):
        s = c.mapping(s, f"schemes[{i}]")
        name = c.text(s.get("name"), f"schemes[{i}].name", 200)
        if name in names:
            raise c.refused(f"schemes[{i}].name", f"{name!r} is listed twice")
        names.add(name)
        c.text(s.get("simulated_as", ""), f"schemes[{i}].simulated_as", 500, empty=True)
        c.optional_text(s.get("stand_in"), f"schemes[{i}].stand_in", 200)
    ranking = doc.get("ranking")
    if not isinstance(ranking, list):
        raise c.refused("ranking", "is not a list")
    ranked: set[str] = set()
    last_rank = 1
    for i, row in enumerate(ranking):
        where = f"ranking[{i}]"
        row = c.mapping(row, where)
        scheme = c.text(row.get("scheme"), f"{where}.scheme", 200)
        if scheme not in names:
            raise c.refused(f"{where}.scheme", f"{scheme[:80]!r} is not one of schemes")
        if scheme in ranked:
            raise c.refused(f"{where}.scheme", f"{scheme[:80]!r} is ranked twice")
        ranked.add(scheme)
        rank = c.whole(row.get("rank"), f"{where}.rank", low=1)
        if rank < last_rank:
            raise c.refused(f"{where}.rank", f"is {rank}, after rank {last_rank}: the ranking is best first")
        last_rank = rank
        contests = c.whole(row.get("contests"), f"{where}.contests")
        if c.whole(row.get("wins"), f"{where}.wins") > contests:
            raise c.refused(f"{where}.wins", f"is more than its contests ({contests})")
        c.number(row.get("win_share"), f"{where}.win_share", low=0, high=1)
        for metric in RANKING_METRICS:
            c.number(row.get(metric), f"{where}.{metric}", nullable=True)
        c.optional_text(row.get("stand_in"), f"{where}.stand_in", 200)
    for dimension, values in c.mapping(doc.get("breakdown"), "breakdown").items():
        c.text(dimension, "breakdown's dimension", 200)
        for value, shares in c.mapping(values, f"breakdown.{dimension}").items():
            c.text(value, f"breakdown.{dimension}'s value", 200)
            for scheme, share in c.mapping(shares, f"breakdown.{dimension}.{value}").items():
                if scheme not in names:
                    raise c.refused(f"breakdown.{dimension}.{value}", f"names {scheme[:80]!r}, not one of schemes")
                c.number(share, f"breakdown.{dimension}.{value}.{scheme}", low=0, high=1, nullable=True)
    return doc


def _read(unpacked: Unpacked) -> dict:
    """league.json of an unpacked upload, parsed and checked, and league.parquet checked for a Parquet file."""
    size = unpacked.files[LEAGUE_JSON][1]
    if size > MAX_LEAGUE_JSON_BYTES:
        raise Refused(f"league.json is larger than {MAX_LEAGUE_JSON_BYTES:,} bytes")

    def no_constants(name: str) -> None:
        raise ValueError(f"{name} is not a JSON number")
    try:
        document = json.loads((unpacked.root / LEAGUE_JSON).read_bytes().decode("utf-8"), parse_constant=no_constants)
    except (UnicodeDecodeError, ValueError) as e:
        raise Refused(f"league.json is not JSON ({str(e).splitlines()[0]})") from None
    checked = check(document)
    if LEAGUE_PARQUET not in unpacked.files:
        raise Refused("the league dir has no league.parquet (pantheon league writes it beside league.json)")
    with (unpacked.root / LEAGUE_PARQUET).open("rb") as parquet:
        head = parquet.read(4)
        parquet.seek(max(0, unpacked.files[LEAGUE_PARQUET][1] - 4))
        tail = parquet.read(4)
    if unpacked.files[LEAGUE_PARQUET][1] < 8 or head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
        raise Refused("league.parquet is not a Parquet file (it neither begins nor ends with PAR1)")
    return checked


def build(document: dict, unpacked: Unpacked, told: Description) -> League:
    """The league's rows from its checked league.json: the ranking's schemes first, best first, then
    the schemes the ranking leaves out."""
    if any(getattr(told, name) is not None for name in ("kind", "node", "peer", "link")):
        raise Refused("--kind, --node, --peer and --link describe an experiment's path; a league has none")
    ranking = {row["scheme"]: row for row in document["ranking"]}
    order = [row["scheme"] for row in document["ranking"]] + [s["name"] for s in document["schemes"] if s["name"] not in ranking]
    described = {s["name"]: s for s in document["schemes"]}
    schemes = []
    for position, name in enumerate(order):
        row = ranking.get(name, {})
        schemes.append(LeagueScheme(
            scheme=name, position=position, simulated_as=described[name].get("simulated_as", ""),
            stand_in=described[name].get("stand_in") or row.get("stand_in"), rank=row.get("rank"), wins=row.get("wins"),
            contests=row.get("contests"), win_share=row.get("win_share"), **{m: row.get(m) for m in RANKING_METRICS}))
    commit = document["commit"].lower() if document["commit"] else None
    title = told.title.strip() if told.title and told.title.strip() else \
        f"{document['matrix']} at {short_commit(commit) if commit else 'no commit'}"
    description = (told.description or "").strip() or document.get("description", "")
    return League(
        manifest_sha256=unpacked.manifest_sha256, title=title[:500], matrix=document["matrix"],
        description=description, git_commit=commit, created_at=_created(document["created_utc"]), uploaded_at=now_utc(),
        duration_s=float(document["duration_s"]), environments=document["environments"], rows=document["rows"],
        failed_rows=document["failed_rows"], top_scheme=document["ranking"][0]["scheme"] if document["ranking"] else "",
        league_json=json.dumps(document), schemes=schemes,
        files=[LeagueFile(path=name, sha256=digest, size_bytes=size) for name, (digest, size) in sorted(unpacked.files.items())])


def short_commit(commit: str) -> str:
    """A commit's first ten digits, and -dirty where the tree was."""
    return commit[:10] + ("-dirty" if commit.endswith("-dirty") else "")


def existing(session: Session, manifest_sha256: str) -> int | None:
    return session.scalar(select(League.id).where(League.manifest_sha256 == manifest_sha256))


def ingest(sessions: sessionmaker[Session], store: Store, unpacked: Unpacked, body_path, body_sha256: str, token_id: int,
           told: Description) -> tuple[int, bool]:
    """(league id, whether it is new), as upload.ingest for a result: files into the store, then the rows
    in one transaction; the same league dir uploaded again is the league already there."""
    with sessions() as session:
        if (found := existing(session, unpacked.manifest_sha256)) is not None:
            return found, False
    league = build(_read(unpacked), unpacked, told.check())
    return keep(sessions, store, unpacked, body_path, body_sha256, token_id, league, existing)


# --- what the pages and the API show -------------------------------------------------------------


def league_url(base: str, league_id: int) -> str:
    return f"{base.rstrip('/')}/leagues/{league_id}"


def _date(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds") + "Z"


def listing(league: League, base: str) -> dict:
    """A league as /api/leagues lists it."""
    return {"id": league.id, "url": league_url(base, league.id), "title": league.title, "matrix": league.matrix,
            "commit": league.git_commit, "date": _date(league.created_at), "environments": league.environments,
            "schemes": len(league.schemes), "top_scheme": league.top_scheme or None}


def _scheme_row(s: LeagueScheme) -> dict:
    return {"scheme": s.scheme, "rank": s.rank, "simulated_as": s.simulated_as, "stand_in": s.stand_in, "wins": s.wins,
            "contests": s.contests, "win_share": s.win_share, **{m: getattr(s, m) for m in RANKING_METRICS}}


def _value_key(value: str) -> tuple[int, float]:
    """Numbers in numeric order (12 before 48 before 120), then words in the order league.json gives
    them (the matrix's: fifo before codel is its author's choice; sorted() keeps it)."""
    try:
        return (0, float(value))
    except ValueError:
        return (1, 0.0)


def _breakdown(document: dict) -> dict[str, dict[str, dict[str, float | None]]]:
    """league.json's breakdown with each dimension's values in order (numbers by value)."""
    return {dimension: dict(sorted(values.items(), key=lambda item: _value_key(item[0])))
            for dimension, values in document.get("breakdown", {}).items()}


def detail(league: League, base: str) -> dict:
    """A league as /api/leagues/{id} and its page show it."""
    document = json.loads(league.league_json)
    url = league_url(base, league.id)
    return {
        **listing(league, base), "description": league.description, "uploaded": _date(league.uploaded_at),
        "duration_s": league.duration_s, "seeds": document["seeds"], "rows": league.rows, "failed_rows": league.failed_rows,
        "score": document["score"], "win_margin": document["win_margin"],
        "ranking": [_scheme_row(s) for s in league.schemes], "breakdown": _breakdown(document),
        "files": [{"path": f.path, "sha256": f.sha256, "size_bytes": f.size_bytes, "url": f"{url}/files/{quote(f.path)}"}
                  for f in league.files],
        "archive_url": f"{url}/archive.tar.gz",
    }


def loaded(session: Session, league_id: int) -> League | None:
    return session.scalar(select(League).where(League.id == league_id).options(
        selectinload(League.schemes), selectinload(League.files)))


def every(session: Session, matrix: str | None = None) -> list[League]:
    """Every league (of one matrix, if given), newest first."""
    query = select(League).options(selectinload(League.schemes)).order_by(League.created_at.desc(), League.id.desc())
    return list(session.scalars(query.where(League.matrix == matrix) if matrix is not None else query))


def _moved(before: int | None, after: int | None) -> int | None:
    """Places a scheme moved up from one ranking to the next (negative: down); None where either lacks it."""
    return None if before is None or after is None else before - after


def compared(a: dict, b: dict) -> dict:
    """Two leagues' details side by side, a before b: per scheme its rank and win share in each and
    the change (rank_moved: places up; win_share_change: b − a), the schemes of b's ranking first,
    then a's own; `only_in` is "a" or "b" for a scheme of one league only. The breakdown's cells
    likewise, per dimension and value present in either."""
    in_a = {row["scheme"]: row for row in a["ranking"]}
    in_b = {row["scheme"]: row for row in b["ranking"]}
    order = list(in_b) + [scheme for scheme in in_a if scheme not in in_b]
    schemes = []
    for scheme in order:
        ra, rb = in_a.get(scheme), in_b.get(scheme)
        share_a, share_b = (ra or {}).get("win_share"), (rb or {}).get("win_share")
        schemes.append({
            "scheme": scheme, "a": ra, "b": rb, "only_in": None if ra and rb else ("a" if ra else "b"),
            "stand_in": (rb or ra or {}).get("stand_in"),
            "rank_moved": _moved((ra or {}).get("rank"), (rb or {}).get("rank")),
            "win_share_change": None if share_a is None or share_b is None else share_b - share_a})
    breakdown: dict[str, dict[str, dict[str, dict]]] = {}
    for dimension in list(b["breakdown"]) + [d for d in a["breakdown"] if d not in b["breakdown"]]:
        values_a, values_b = a["breakdown"].get(dimension, {}), b["breakdown"].get(dimension, {})
        values = sorted([*values_b, *(v for v in values_a if v not in values_b)], key=_value_key)
        breakdown[dimension] = {}
        for value in values:
            cells = {}
            for scheme in order:
                sa, sb = values_a.get(value, {}).get(scheme), values_b.get(value, {}).get(scheme)
                cells[scheme] = {"a": sa, "b": sb, "change": None if sa is None or sb is None else sb - sa}
            breakdown[dimension][value] = cells
    return {"a": {k: a[k] for k in ("id", "url", "title", "matrix", "commit", "date", "environments")},
            "b": {k: b[k] for k in ("id", "url", "title", "matrix", "commit", "date", "environments")},
            "same_matrix": a["matrix"] == b["matrix"], "schemes": schemes, "breakdown": breakdown}
