"""The find page's filters and the API's query parameters (one set of names, the contract's):
q (free text), scheme, preset, kind, node, peer, direction, link, flows, year, month, date_from,
date_to (ISO dates, inclusive) and page; each given filter narrows the results (AND), newest first.
A malformed value is a FilterError (HTTP 400), never a silent "no results": a number outside its
range (WHOLE_NUMBERS; SQLite's integers end at 2**63 - 1 and PostgreSQL's columns at 2**31 - 1, so
a larger one would fail in the database, not here) and a NUL character (PostgreSQL refuses it in
text) included.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import date, datetime, timedelta
from urllib.parse import urlencode

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from pantheon.archive.models import Result, ResultScheme

PER_PAGE = 20
MAX_FREE_TEXT_CHARS = 200
INT32_MAX = 2**31 - 1
"""The largest value of the archive's Integer columns in PostgreSQL (id, flows, year, month)."""
WHOLE_NUMBERS = {"flows": (0, INT32_MAX), "year": (1, 9999), "month": (1, 12), "page": (1, INT32_MAX)}
"""Each numeric filter's range, inclusive: years of Python's dates, pages that keep the SQL offset
((page - 1) * PER_PAGE) within 64 bits."""
DIGITS = re.compile(r"[0-9]{1,12}")
"""ASCII digits only ("²".isdigit() is true, int("²") fails), few enough to check the range after."""


def whole_number(name: str, text: str, low: int, high: int) -> int:
    """`text` as an integer within [low, high]; a FilterError naming the parameter otherwise."""
    if not DIGITS.fullmatch(text) or not low <= int(text) <= high:
        raise FilterError(f"{name}={text[:40]!r} is not a whole number from {low} to {high}")
    return int(text)


def result_id(text: str) -> int | None:
    """A result id from a URL (a path's or /compare's), or None where it cannot be one."""
    return int(text) if DIGITS.fullmatch(text) and 1 <= int(text) <= INT32_MAX else None


class FilterError(Exception):
    """A query parameter that cannot be read; the message names it."""


@dataclass(frozen=True)
class Filters:
    q: str = ""
    scheme: str = ""
    preset: str = ""
    kind: str = ""
    node: str = ""
    peer: str = ""
    direction: str = ""
    link: str = ""
    flows: int | None = None
    year: int | None = None
    month: int | None = None
    date_from: date | None = None
    date_to: date | None = None
    page: int = 1

    @classmethod
    def parse(cls, params: dict[str, str]) -> Filters:
        values: dict = {}
        for f in fields(cls):
            text = (params.get(f.name) or "").strip()
            if not text:
                continue
            if "\x00" in text:
                raise FilterError(f"{f.name} holds a NUL character")
            if f.name in WHOLE_NUMBERS:
                values[f.name] = whole_number(f.name, text, *WHOLE_NUMBERS[f.name])
            elif f.name in ("date_from", "date_to"):
                try:
                    values[f.name] = date.fromisoformat(text)
                except ValueError:
                    raise FilterError(f"{f.name}={text[:40]!r} is not an ISO date (YYYY-MM-DD)") from None
            else:
                values[f.name] = text[:MAX_FREE_TEXT_CHARS]
        return cls(**values)

    def query_string(self, **changes) -> str:
        """These filters (with changes) as a URL query, empty ones left out: pagination links keep the filters."""
        values = {f.name: getattr(self, f.name) for f in fields(self)} | changes
        return urlencode({k: str(v) for k, v in values.items() if v not in (None, "") and not (k == "page" and v == 1)})

    def where(self, query: Select) -> Select:
        for name in ("preset", "kind", "node", "peer", "direction", "link", "flows", "year", "month"):
            if (value := getattr(self, name)) not in (None, ""):
                query = query.where(getattr(Result, name) == value)
        if self.scheme:
            query = query.where(Result.id.in_(select(ResultScheme.result_id).where(ResultScheme.scheme == self.scheme)))
        if self.date_from:
            query = query.where(Result.started_at >= datetime.combine(self.date_from, datetime.min.time()))
        # The calendar's last day has no next one (date.max + 1 day overflows): every time is before its end.
        if self.date_to and self.date_to < date.max:
            query = query.where(Result.started_at < datetime.combine(self.date_to + timedelta(days=1), datetime.min.time()))
        for word in self.q.lower().split():
            escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            query = query.where(Result.search_text.like(f"%{escaped}%", escape="\\"))
        return query


def find(session: Session, filters: Filters, per_page: int = PER_PAGE) -> tuple[list[Result], int]:
    """One page of the results that pass the filters, newest first, and how many pass in all."""
    total = session.scalar(filters.where(select(func.count(Result.id)))) or 0
    page = session.scalars(filters.where(select(Result)).order_by(Result.started_at.desc(), Result.id.desc())
                           .offset((filters.page - 1) * per_page).limit(per_page)).all()
    return list(page), total


def choices(session: Session) -> dict[str, list]:
    """The values each filter can take in this archive, for the find page's selects and /api/filters."""
    def column(attribute) -> list:
        return [v for v in session.scalars(select(attribute).distinct().order_by(attribute)) if v not in (None, "")]
    return {"scheme": column(ResultScheme.scheme), "preset": column(Result.preset), "kind": column(Result.kind),
            "node": column(Result.node), "peer": column(Result.peer), "direction": column(Result.direction),
            "link": column(Result.link), "flows": column(Result.flows), "year": column(Result.year),
            "month": column(Result.month)}
