"""The server-rendered pages (Jinja2, templates/; no JavaScript build, no script at all): find
results, a result, the summary of results, a scheme over time, compare, FAQ; the leagues, a
league, and two leagues compared. Each page reads what the API returns (views.py, leagues.py), so a
page shows nothing the API cannot give a program.

The summary table has one row per path (and flows per run), so that schemes run on the same path
compare in one row even when each was uploaded as a result of its own; it colours each row from
best score (green) to worst (red) by rank within the row, as the original archive did, and each cell
shows the score with the two means it comes from. The compare and result pages draw throughput
against p95 delay, one colour per scheme, as an inline SVG made here (throughput_delay_chart).
The stylesheet, static/archive.css, is inlined into every page (no build step, no second request).
"""
from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from pantheon.archive import leagues, views
from pantheon.archive.api import base_url, compared_leagues, league_id
from pantheon.archive.queries import PER_PAGE, FilterError, Filters, choices, find, result_id
from pantheon.wording import counted

templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
MAX_COMPARED = 8
"""Results side by side on the compare page (wider is unreadable)."""


def _number(value: float | None, digits: int = 2) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _percent(fraction: float | None, digits: int = 2) -> str:
    """A fraction (the analysis's loss_rate) as a percentage, "0.48 %"."""
    return "–" if fraction is None or not math.isfinite(fraction) else f"{100 * fraction:.{digits}f} %"


templates.env.filters["num"] = _number
templates.env.filters["percent"] = _percent
templates.env.filters["counted"] = counted
templates.env.globals["stylesheet"] = (Path(__file__).parent / "static" / "archive.css").read_text()

SCHEME_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
                  "#7f7f7f", "#bcbd22")
"""One colour per scheme on a page, in the order the schemes first appear (matplotlib's tab10);
past ten they repeat."""
MARKERS = ("circle", "square", "triangle", "diamond", "down", "plus", "cross", "star")
"""One marker per compared result (MAX_COMPARED of them)."""
CHART = {"width": 520, "height": 330, "left": 20, "right": 64, "top": 15, "bottom": 50}
"""The throughput–delay chart's size and margins in SVG units (it scales to the page's width)."""


def rank_colour(rank: int, count: int) -> str:
    """Best (rank 0) green through yellow to worst red: hue 120° → 0° in HSL."""
    hue = 120 if count < 2 else round(120 * (1 - rank / (count - 1)))
    return f"hsl({hue}, 70%, 80%)"


def colour_rows(summary: dict) -> None:
    """Adds a colour to every scored cell, by the cell's rank within its row (a path of the summary)."""
    for experiment in summary["paths"]:
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
    ranking = views.ranked(result["stats"])
    colours = scheme_colours([result])
    return _page(request, "result.html", {"title": result["name"], "r": result, "ranking": ranking, "colours": colours,
                                          "chart": throughput_delay_chart([result], colours)})


async def summary_page(request: Request) -> Response:
    def load() -> dict:
        with request.app.state.sessions() as session:
            return views.summary(session, "")
    summary = await run_in_threadpool(load)
    colour_rows(summary)
    return _page(request, "summary.html", {"title": "Summary of results", "s": summary})


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least `high` (steps of 1, 2 or 5 × 10^k), about `count` of them."""
    if not math.isfinite(high) or high <= 0:
        return [0.0, 1.0]
    raw = high / count
    power_of_ten = 10 ** math.floor(math.log10(raw))
    step = next(m * power_of_ten for m in (1, 2, 5, 10) if m * power_of_ten >= raw)
    return [i * step for i in range(math.ceil(high / step - 1e-9) + 1)]


def _tick_label(value: float) -> str:
    return f"{value:g}"


def scheme_colours(results: list[dict]) -> dict[str, dict]:
    """Each scheme of the results, in the order they first appear: its display name and colour."""
    shown: dict[str, dict] = {}
    for r in results:
        for s in r["stats"]:
            if s["scheme"] not in shown:
                shown[s["scheme"]] = {"display": s["display"], "colour": SCHEME_COLOURS[len(shown) % len(SCHEME_COLOURS)]}
    return shown


def _marker(shape: str, x: float, y: float) -> str:
    """An SVG path of a marker about 10 units across centred on (x, y)."""
    r = 5.0
    shapes = {
        "square": [(-r, -r), (r, -r), (r, r), (-r, r)],
        "triangle": [(0, -r * 1.2), (r * 1.1, r * .9), (-r * 1.1, r * .9)],
        "diamond": [(0, -r * 1.3), (r * 1.1, 0), (0, r * 1.3), (-r * 1.1, 0)],
        "down": [(0, r * 1.2), (r * 1.1, -r * .9), (-r * 1.1, -r * .9)],
        "plus": [(-r, -2), (-2, -2), (-2, -r), (2, -r), (2, -2), (r, -2), (r, 2), (2, 2), (2, r), (-2, r), (-2, 2), (-r, 2)],
        "cross": [(-r, -r + 2), (-r + 2, -r), (0, -2), (r - 2, -r), (r, -r + 2), (2, 0), (r, r - 2), (r - 2, r), (0, 2),
                  (-r + 2, r), (-r, r - 2), (-2, 0)],
        "star": [(r * math.sin(a * math.pi / 5) * (1 if a % 2 == 0 else .45),
                  -r * 1.2 * math.cos(a * math.pi / 5) * (1 if a % 2 == 0 else .45)) for a in range(10)],
    }
    if shape not in shapes:
        return f"M{x - r:.1f},{y:.1f}a{r},{r} 0 1,0 {2 * r},0a{r},{r} 0 1,0 {-2 * r},0Z"
    return "M" + "L".join(f"{x + dx:.1f},{y + dy:.1f}" for dx, dy in shapes[shape]) + "Z"


def throughput_delay_chart(results: list[dict], colours: dict[str, dict]) -> dict | None:
    """Every scheme of every result at its mean p95 delay (x, ms) and mean throughput (y, Mbit/s) on
    shared axes from 0: the scheme's colour, the result's marker. The delay axis runs right to left,
    as in Pantheon's own plots (summary_means.png), so that better is up and to the right. As
    coordinates for the template's inline SVG; None when no scheme has both means."""
    points = [(i, s) for i, r in enumerate(results) for s in r["stats"]
              if s["throughput_mbps"]["mean"] is not None and s["delay_p95_ms"]["mean"] is not None]
    if not points:
        return None
    x_ticks = nice_ticks(max(s["delay_p95_ms"]["mean"] for _, s in points))
    y_ticks = nice_ticks(max(s["throughput_mbps"]["mean"] for _, s in points))
    c = CHART
    plot_w, plot_h = c["width"] - c["left"] - c["right"], c["height"] - c["top"] - c["bottom"]

    def x(ms: float) -> float:
        return c["left"] + plot_w * (1 - ms / x_ticks[-1])

    def y(mbps: float) -> float:
        return c["top"] + plot_h * (1 - mbps / y_ticks[-1])
    return {
        **c, "x0": c["left"], "x1": c["left"] + plot_w, "y0": c["top"] + plot_h, "y1": c["top"],
        "x_ticks": [{"at": x(t), "label": _tick_label(t)} for t in x_ticks],
        "y_ticks": [{"at": y(t), "label": _tick_label(t)} for t in y_ticks],
        "points": [{"path": _marker(MARKERS[i % len(MARKERS)], x(s["delay_p95_ms"]["mean"]), y(s["throughput_mbps"]["mean"])),
                    "colour": colours[s["scheme"]]["colour"], "scheme": s["scheme"],
                    "title": f"{s['display']} in {results[i]['name']}: {s['throughput_mbps']['mean']:.2f} Mbit/s, "
                             f"{s['delay_p95_ms']['mean']:.2f} ms p95"} for i, s in points],
        "markers": [{"path": _marker(MARKERS[i % len(MARKERS)], 8, 8), "name": r["name"], "id": r["id"]}
                    for i, r in enumerate(results)],
    }


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
                      "id": p["id"], "name": p["name"]} for t, s, p in dated]}


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
    colours = scheme_colours(results)
    table = {scheme: [next((s for s in r["stats"] if s["scheme"] == scheme), None) for r in results] for scheme in colours}
    return _page(request, "compare.html", {"title": "Compare results", "results": results, "table": table,
                                           "colours": colours, "chart": throughput_delay_chart(results, colours)})


async def faq_page(request: Request) -> Response:
    return _page(request, "faq.html", {"title": "FAQ"})


DIMENSIONS = {"rate_mbps": "Rate (Mbit/s)", "rtt_ms": "Base RTT (ms)", "buffer_bdp": "Buffer (× BDP)",
              "buffer_bytes": "Buffer (bytes)", "queue": "Queue", "loss": "Random loss", "step_factor": "Rate step (×)",
              "flows": "Flows", "preset": "Preset"}
"""How the league pages head the breakdown's dimensions of the contract; another is shown by its name."""
templates.env.globals["dimensions"] = DIMENSIONS


def _share_bar(share: float | None) -> str:
    """A table cell's background drawn as a bar as long as the win share (0 to 1) of the cell's width."""
    if share is None or not math.isfinite(share):
        return ""
    at = f"{100 * min(1.0, max(0.0, share)):.1f}%"
    return f"background: linear-gradient(to right, #bcd4f0 {at}, transparent {at})"


def _change_colour(change: float | None) -> str:
    """A breakdown cell's background on the compare page: green where b's win share rose, red where it
    fell, paler the smaller the change (full at 25 points)."""
    if change is None or not math.isfinite(change) or abs(change) < 0.005:
        return ""
    strength = min(1.0, abs(change) / 0.25)
    hue = 120 if change > 0 else 0
    return f"background-color: hsl({hue}, 60%, {95 - 17 * strength:.0f}%)"


templates.env.filters["share_bar"] = _share_bar
templates.env.filters["short_commit"] = leagues.short_commit
templates.env.filters["change_colour"] = _change_colour


async def leagues_page(request: Request) -> Response:
    matrix = request.query_params.get("matrix") or None
    if matrix is not None and "\x00" in matrix:
        return _page(request, "error.html", {"title": "Leagues", "message": "A matrix's name holds no NUL character."}, 400)

    def load() -> list[dict]:
        with request.app.state.sessions() as session:
            return [leagues.listing(league, "") for league in leagues.every(session, matrix)]
    listed = await run_in_threadpool(load)
    return _page(request, "leagues.html", {"title": "Leagues", "leagues": listed, "matrix": matrix})


def _report_text(request: Request, sha256: str) -> str:
    """A league's report.md as text for its page, cut at MAX_REPORT_CHARS (the file is a download)."""
    with request.app.state.store.path(sha256).open("rb") as report:
        return report.read(4 * leagues.MAX_REPORT_CHARS).decode("utf-8", "replace")[:leagues.MAX_REPORT_CHARS]


async def league_page(request: Request) -> Response:
    text = request.path_params["id"]

    def load() -> tuple[dict, list[dict], str | None] | None:
        with request.app.state.sessions() as session:
            found = leagues.loaded(session, league_id(text))
            if found is None:
                return None
            others = [leagues.listing(other, "") for other in leagues.every(session, found.matrix) if other.id != found.id]
            report = next((f.sha256 for f in found.files if f.path == "report.md"), None)
            return leagues.detail(found, ""), others, None if report is None else _report_text(request, report)
    loaded = await run_in_threadpool(load)
    if loaded is None:
        return _not_found(request, f"There is no league {text[:20]} in this archive.")
    league, others, report = loaded
    extras = [m for m in ("jain_median", "harm_throughput_median") if any(row[m] is not None for row in league["ranking"])]
    return _page(request, "league.html", {"title": league["title"], "l": league, "others": others, "report": report,
                                          "extras": extras})


async def league_compare_page(request: Request) -> Response:
    body = await run_in_threadpool(compared_leagues, request, "")
    if isinstance(body, tuple):
        status, message = body
        return _page(request, "error.html", {"title": "Compare leagues", "message": message[0].upper() + message[1:] + "."},
                     status)
    return _page(request, "league_compare.html", {"title": "Compare leagues", "c": body})
