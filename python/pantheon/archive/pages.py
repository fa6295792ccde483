"""The server-rendered pages (Jinja2, templates/; no JavaScript build, no script at all): find
results, a result, the summary of results, a scheme over time, compare, FAQ. Each page reads what
the API returns (views.py), so a page shows nothing the API cannot give a program.

The summary table colours each experiment's row from best score (green) to worst (red) by rank
within the row, as the original archive did; the score's numbers are in each cell's title (hover).
"""
from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from pantheon.archive import views
from pantheon.archive.api import base_url
from pantheon.archive.queries import PER_PAGE, FilterError, Filters, choices, find, result_id
from pantheon.wording import counted

templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
MAX_COMPARED = 8
"""Results side by side on the compare page (wider is unreadable)."""


def _number(value: float | None, digits: int = 2) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


templates.env.filters["num"] = _number
templates.env.filters["counted"] = counted


def rank_colour(rank: int, count: int) -> str:
    """Best (rank 0) green through yellow to worst red: hue 120° → 0° in HSL."""
    hue = 120 if count < 2 else round(120 * (1 - rank / (count - 1)))
    return f"hsl({hue}, 70%, 80%)"


def colour_rows(summary: dict) -> None:
    """Adds a colour to every scored cell, by the cell's rank within its experiment."""
    for experiment in summary["experiments"]:
        scored = sorted((c for c in experiment["cells"].values() if c["score"] is not None), key=lambda c: -c["score"])
        for rank, cell in enumerate(scored):
            cell["colour"] = rank_colour(rank, len(scored))


def _page(request: Request, name: str, context: dict, status: int = 200) -> Response:
    return templates.TemplateResponse(request, name, context, status_code=status)


def _not_found(request: Request, what: str) -> Response:
    return _page(request, "error.html", {"title": "Not found", "message": what}, 404)


async def find_page(request: Request) -> Response:
    try:
        filters = Filters.parse(dict(request.query_params))
    except FilterError as e:
        return _page(request, "error.html", {"title": "Bad filter", "message": str(e)}, 400)

    def load() -> dict:
        with request.app.state.sessions() as session:
            found, total = find(session, filters)
            return {"results": [views.listing(r, base_url(request)) for r in found], "total": total,
                    "choices": choices(session)}
    context = await run_in_threadpool(load)
    pages = max(1, math.ceil(context["total"] / PER_PAGE))
    links = [(n, filters.query_string(page=n)) for n in range(1, pages + 1)]
    return _page(request, "find.html", {**context, "title": "Find results", "filters": filters, "pages": links})


async def result_page(request: Request) -> Response:
    text = request.path_params["id"]

    def load() -> dict | None:
        with request.app.state.sessions() as session:
            found = views.loaded(session, number) if (number := result_id(text)) else None
            return views.detail(found, "") if found else None
    result = await run_in_threadpool(load)
    if result is None:
        return _not_found(request, f"There is no result {text[:20]} in this archive.")
    return _page(request, "result.html", {"title": result["title"], "r": result})


async def summary_page(request: Request) -> Response:
    def load() -> dict:
        with request.app.state.sessions() as session:
            return views.summary(session, "")
    summary = await run_in_threadpool(load)
    colour_rows(summary)
    return _page(request, "summary.html", {"title": "Summary of results", "s": summary})


def _score_svg(points: list[dict]) -> dict | None:
    """The scheme's score per experiment over time, as coordinates for an inline SVG (600×200)."""
    dated = [(datetime.fromisoformat(p["date"].removesuffix("Z")), p["stats"]["score"], p) for p in points
             if p["stats"]["score"] is not None]
    if not dated:
        return None
    t0, t1 = dated[0][0], dated[-1][0]
    low, high = min(s for _, s, _ in dated), max(s for _, s, _ in dated)
    span_s, span = (t1 - t0).total_seconds() or 1.0, (high - low) or 1.0
    return {"low": low, "high": high, "first": t0.date().isoformat(), "last": t1.date().isoformat(),
            "dots": [{"x": 40 + 540 * (t - t0).total_seconds() / span_s, "y": 180 - 160 * (s - low) / span, "score": s,
                      "id": p["id"], "title": p["title"]} for t, s, p in dated]}


async def scheme_page(request: Request) -> Response:
    name = request.path_params["name"]
    if "\x00" in name:
        return _not_found(request, "No scheme's name holds a NUL character.")

    def load() -> dict:
        with request.app.state.sessions() as session:
            return views.scheme_history(session, "", name)
    history = await run_in_threadpool(load)
    if not history["experiments"]:
        return _not_found(request, f"No experiment in this archive ran {name[:80]!r}.")
    return _page(request, "scheme.html", {"title": history["display"], "h": history, "chart": _score_svg(history["experiments"])})


async def compare_page(request: Request) -> Response:
    given = [request.query_params.get("ids", ""), *request.query_params.getlist("id")]
    words = [w for w in ",".join(given).replace(" ", "").split(",") if w]
    if wrong := next((w for w in words if result_id(w) is None), None):
        shown = wrong[:20].encode("unicode_escape").decode("ascii")
        return _page(request, "error.html", {"title": "Compare", "message": f"{shown!r} is not a result id: /compare?ids=1,2"}, 400)
    ids = [number for w in words if (number := result_id(w))][:MAX_COMPARED]
    if len(ids) < 1:
        return _page(request, "error.html", {"title": "Compare", "message": "Give the results to compare: /compare?ids=1,2"}, 400)

    def load() -> list[dict]:
        with request.app.state.sessions() as session:
            return [views.detail(found, "") for i in ids if (found := views.loaded(session, i))]
    results = await run_in_threadpool(load)
    schemes = list(dict.fromkeys(s["scheme"] for r in results for s in r["stats"]))
    table = {scheme: [next((s for s in r["stats"] if s["scheme"] == scheme), None) for r in results] for scheme in schemes}
    return _page(request, "compare.html", {"title": "Compare results", "results": results, "table": table})


async def faq_page(request: Request) -> Response:
    return _page(request, "faq.html", {"title": "FAQ"})
