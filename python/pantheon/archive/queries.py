"""The find page's filters and the API's query parameters (one set of names, the contract's):
q (free text), scheme, preset, kind, node, peer, direction, link, flows, year, month, date_from,
date_to (ISO dates, inclusive) and page; each given filter narrows the results (AND), newest first.
A malformed value is a FilterError (HTTP 400), never a silent "no results".
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import date, datetime, timedelta
from urllib.parse import urlencode

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from pantheon.archive.models import Result, ResultScheme

PER_PAGE = 20
MAX_FREE_TEXT_CHARS = 200


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
            if f.name in ("flows", "year", "month", "page"):
                if not text.isdigit():
                    raise FilterError(f"{f.name}={text[:40]!r} is not a whole number")
                values[f.name] = int(text)
            elif f.name in ("date_from", "date_to"):
                try:
                    values[f.name] = date.fromisoformat(text)
                except ValueError:
                    raise FilterError(f"{f.name}={text[:40]!r} is not an ISO date (YYYY-MM-DD)") from None
            else:
                values[f.name] = text[:MAX_FREE_TEXT_CHARS]
        if values.get("page") == 0:
            raise FilterError("page counts from 1")
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
        if self.date_to:
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
