"""The JSON API (everything the pages show), the uploads, the downloads and the bulk export.

    GET  /api/health                     {"ok": true}, or 503 when the database does not answer
    GET  /api/token                      the name a bearer token belongs to, or 401 (the client's first step)
    POST /api/uploads                    a data dir as gzip-compressed tar with MANIFEST.json (staging.py)
    GET  /api/results?FILTERS            one page of results (queries.py names the filters)
    GET  /api/filters                    the values each filter can take
    GET  /api/results/{id}               a result: metadata, hosts, versions, clock bounds, per-scheme stats, files
    GET  /api/results/{id}/runs          its runs, each with its flows' metrics
    GET  /api/summary                    experiments × schemes scores
    GET  /api/schemes/{name}             one scheme across every experiment
    GET  /api/export.{csv,parquet}       every flow of every run of the archive, one row each
    GET  /results/{id}/files/PATH        a file of the data dir
    GET  /results/{id}/archive.tar.gz    the whole data dir, as uploaded
    GET  /api/leagues[?matrix=NAME]      every league (of one matrix), newest first (leagues.py)
    GET  /api/leagues/{id}               a league: its ranking, per-dimension breakdown, files
    GET  /api/leagues/compare?a=ID&b=ID  two leagues scheme by scheme: rank and win share in each, the change
    GET  /leagues/{id}/files/PATH        a file of the league dir (league.json, league.parquet, ...)
    GET  /leagues/{id}/archive.tar.gz    the whole league dir, as uploaded

POST /api/uploads takes a league dir (one with league.json) as it takes a data dir, and answers
with the league's id and URL (/leagues/N) instead of a result's.

Uploaded files (PDFs aside, which Chrome's viewer will not open sandboxed) are served with a
sandboxing Content-Security-Policy: a report.html or an SVG from an uploader runs no script in the
archive's origin.
"""
from __future__ import annotations

import hashlib
import io
import mimetypes
import shutil
from typing import Any

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
from sqlalchemy import select, text
from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response

from pantheon.archive import leagues, staging, tokens, upload, views
from pantheon.archive.models import File, Flow, League, LeagueFile, Result, Run
from pantheon.archive.queries import PER_PAGE, FilterError, Filters, choices, find, result_id
from pantheon.archive.staging import Refused

DRAIN_BYTES = 16 << 20
"""The most of a refused body read before answering (see _drain)."""
UNTRUSTED_HEADERS = {"Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff"}


def base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status)


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _holder(request: Request) -> Any:
    presented = _bearer(request)
    if presented is None:
        return None
    with request.app.state.sessions() as session:
        token = tokens.holder(session, presented)
        return (token.id, token.name) if token else None


async def token(request: Request) -> Response:
    holder = await run_in_threadpool(_holder, request)
    if holder is None:
        return error(401, "no token, or a token this archive does not know or has revoked (Authorization: Bearer TOKEN)")
    return JSONResponse({"name": holder[1]})


async def receive(request: Request, body_path, limit_bytes: int) -> str:
    """Streams the request body to a file, refusing it past limit_bytes; its sha256."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit_bytes:
        raise Refused(f"the upload is {int(declared):,} bytes, over this archive's limit of {limit_bytes:,}", 413)
    digest, received = hashlib.sha256(), 0
    with body_path.open("wb") as out:
        async for chunk in request.stream():
            received += len(chunk)
            if received > limit_bytes:
                raise Refused(f"the upload is over this archive's limit of {limit_bytes:,} bytes", 413)
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


async def _drain(request: Request) -> None:
    """Reads and drops up to DRAIN_BYTES of a body the server will not take: a client that sends its
    whole body before reading the answer (Python's urllib, for one) then reads the 401 instead of a
    connection reset. A larger body is cut off; pantheon archive upload checks its token first."""
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > DRAIN_BYTES:
                return
    except ClientDisconnect:
        return


async def uploads(request: Request) -> Response:
    state = request.app.state
    holder = await run_in_threadpool(_holder, request)
    if holder is None:
        await _drain(request)
        return error(401, "no token, or a token this archive does not know or has revoked (Authorization: Bearer TOKEN)")
    told = upload.Description(**{name: request.query_params.get(name)
                                 for name in ("title", "description", "kind", "node", "peer", "link")})
    stage = state.store.stage_dir()
    try:
        body = stage / "body.tar.gz"
        body_sha256 = await receive(request, body, state.limits.upload_bytes)
        unpacked = await run_in_threadpool(staging.unpack, body, stage, state.limits)
        is_league = leagues.LEAGUE_JSON in unpacked.files
        ingest = leagues.ingest if is_league else upload.ingest
        new_id, created = await run_in_threadpool(ingest, state.sessions, state.store, unpacked, body, body_sha256,
                                                  holder[0], told)
    except Refused as e:
        return error(e.status, str(e))
    except ClientDisconnect:
        return error(400, "the upload was cut off before its end")
    finally:
        await run_in_threadpool(shutil.rmtree, stage, True)
    url = (leagues.league_url if is_league else views.result_url)(base_url(request), new_id)
    return JSONResponse({"id": new_id, "url": url, "created": created}, 201 if created else 200)


def _filters(request: Request) -> Filters:
    return Filters.parse(dict(request.query_params))


async def results(request: Request) -> Response:
    try:
        filters = _filters(request)
    except FilterError as e:
        return error(400, str(e))

    def page() -> dict:
        with request.app.state.sessions() as session:
            found, total = find(session, filters)
            return {"results": [views.listing(r, base_url(request)) for r in found], "total": total,
                    "page": filters.page, "per_page": PER_PAGE}
    return JSONResponse(await run_in_threadpool(page))


async def filters(request: Request) -> Response:
    def values() -> dict:
        with request.app.state.sessions() as session:
            return choices(session)
    return JSONResponse(await run_in_threadpool(values))


def _result_id(request: Request) -> int:
    """The path's result id, or 0 (no result has it) where the text cannot be one."""
    return result_id(str(request.path_params["id"])) or 0


async def result(request: Request) -> Response:
    def one() -> dict | None:
        with request.app.state.sessions() as session:
            found = views.loaded(session, _result_id(request))
            return views.detail(found, base_url(request)) if found else None
    body = await run_in_threadpool(one)
    return JSONResponse(body) if body else error(404, "no such result")


async def result_runs(request: Request) -> Response:
    def all_runs() -> list | None:
        with request.app.state.sessions() as session:
            found = views.loaded(session, _result_id(request))
            return views.runs(found) if found else None
    body = await run_in_threadpool(all_runs)
    return JSONResponse({"runs": body}) if body is not None else error(404, "no such result")


async def summary(request: Request) -> Response:
    def table() -> dict:
        with request.app.state.sessions() as session:
            return views.summary(session, base_url(request))
    return JSONResponse(await run_in_threadpool(table))


async def scheme(request: Request) -> Response:
    if "\x00" in request.path_params["name"]:
        return error(400, "a scheme's name holds no NUL character")

    def history() -> dict:
        with request.app.state.sessions() as session:
            return views.scheme_history(session, base_url(request), request.path_params["name"])
    return JSONResponse(await run_in_threadpool(history))


EXPORT_RESULT_COLUMNS = ("id", "title", "kind", "preset", "node", "peer", "direction", "link", "started_at")


def export_table(request: Request) -> pa.Table:
    """Every flow of every run (flow "all" included), one row each, with its run's and result's columns."""
    columns = ([getattr(Result, c).label("result_id" if c == "id" else c) for c in EXPORT_RESULT_COLUMNS]
               + [getattr(Run, c).label("run" if c == "number" else c) for c in views.RUN_COLUMNS]
               + [Run.flags]
               + [getattr(Flow, c).label("flow_scheme" if c == "scheme" else c) for c in views.FLOW_COLUMNS])
    query = (select(*columns).join(Run, Run.result_id == Result.id).join(Flow, Flow.run_id == Run.id)
             .order_by(Result.id, Run.position, Flow.position))
    with request.app.state.sessions() as session:
        rows = [dict(row._mapping) for row in session.execute(query)]
    if not rows:
        return pa.table({c: pa.array([], pa.string()) for c in ("result_id", "scheme", "run", "flow")})
    return pa.Table.from_pylist(rows)


EXPORTS = {"csv": (pcsv.write_csv, "text/csv"), "parquet": (pq.write_table, "application/vnd.apache.parquet")}
"""Export format → (pyarrow writer of a table to a file, media type)."""


async def export(request: Request) -> Response:
    if request.path_params["format"] not in EXPORTS:
        return error(404, "the export is /api/export.csv or /api/export.parquet")
    write, media = EXPORTS[request.path_params["format"]]

    def written() -> bytes:
        out = io.BytesIO()
        write(export_table(request), out)
        return out.getvalue()
    return Response(await run_in_threadpool(written), media_type=media,
                    headers={"Content-Disposition": f'attachment; filename="pantheon-archive.{request.path_params["format"]}"'})


async def file(request: Request) -> Response:
    path = request.path_params["path"]

    def lookup() -> str | None:
        with request.app.state.sessions() as session:
            return session.scalar(select(File.sha256).where(File.result_id == _result_id(request), File.path == path))
    # PostgreSQL refuses NUL in text, and no file's name holds one (staging.check_name).
    digest = None if "\x00" in path else await run_in_threadpool(lookup)
    if digest is None:
        return error(404, "no such file in this result")
    media = mimetypes.guess_type(path)[0] or "application/octet-stream"
    # Chrome's PDF viewer does not open in a sandboxed document; a PDF runs no script in this origin.
    headers = {"X-Content-Type-Options": "nosniff"} if media == "application/pdf" else UNTRUSTED_HEADERS
    return FileResponse(request.app.state.store.path(digest), media_type=media, headers=headers)


async def archive(request: Request) -> Response:
    def lookup() -> str | None:
        with request.app.state.sessions() as session:
            return session.scalar(select(Result.archive_sha256).where(Result.id == _result_id(request)))
    digest = await run_in_threadpool(lookup)
    if digest is None:
        return error(404, "no such result")
    return FileResponse(request.app.state.store.path(digest), media_type="application/gzip",
                        filename=f"pantheon-result-{request.path_params['id']}.tar.gz", headers=UNTRUSTED_HEADERS)


def league_id(text: str) -> int:
    """A league id from a URL, or 0 (no league has it) where the text cannot be one."""
    return result_id(text) or 0


async def league_list(request: Request) -> Response:
    matrix = request.query_params.get("matrix") or None
    if matrix is not None and "\x00" in matrix:
        return error(400, "a matrix's name holds no NUL character")

    def load() -> dict:
        with request.app.state.sessions() as session:
            return {"leagues": [leagues.listing(league, base_url(request)) for league in leagues.every(session, matrix)]}
    return JSONResponse(await run_in_threadpool(load))


async def league(request: Request) -> Response:
    def one() -> dict | None:
        with request.app.state.sessions() as session:
            found = leagues.loaded(session, league_id(str(request.path_params["id"])))
            return leagues.detail(found, base_url(request)) if found else None
    body = await run_in_threadpool(one)
    return JSONResponse(body) if body else error(404, "no such league")


def compared_leagues(request: Request, base: str) -> dict | tuple[int, str]:
    """The two leagues of ?a=ID&b=ID compared (leagues.compared), or the HTTP status and one line
    saying what is wrong (400 an id that is none, 404 a league the archive does not hold)."""
    ids = [result_id(request.query_params.get(key, "")) for key in ("a", "b")]
    if None in ids:
        return 400, "give two leagues to compare: /leagues/compare?a=ID&b=ID"
    with request.app.state.sessions() as session:
        found = [leagues.loaded(session, i or 0) for i in ids]
        if None in found:
            return 404, f"there is no league {ids[found.index(None)]} in this archive"
        a, b = (leagues.detail(f, base) for f in found if f is not None)
    return leagues.compared(a, b)


async def league_compare(request: Request) -> Response:
    body = await run_in_threadpool(compared_leagues, request, base_url(request))
    if isinstance(body, tuple):
        return error(*body)
    return JSONResponse(body)


async def league_file(request: Request) -> Response:
    path = request.path_params["path"]

    def lookup() -> str | None:
        with request.app.state.sessions() as session:
            return session.scalar(select(LeagueFile.sha256).where(
                LeagueFile.league_id == league_id(str(request.path_params["id"])), LeagueFile.path == path))
    digest = None if "\x00" in path else await run_in_threadpool(lookup)
    if digest is None:
        return error(404, "no such file in this league")
    if path.endswith(leagues.TEXT_FILES):
        media = "text/plain; charset=utf-8"
    elif path.endswith(".parquet"):
        media = "application/vnd.apache.parquet"
    else:
        media = mimetypes.guess_type(path)[0] or "application/octet-stream"
    return FileResponse(request.app.state.store.path(digest), media_type=media, headers=UNTRUSTED_HEADERS)


async def league_archive(request: Request) -> Response:
    def lookup() -> str | None:
        with request.app.state.sessions() as session:
            return session.scalar(select(League.archive_sha256).where(League.id == league_id(str(request.path_params["id"]))))
    digest = await run_in_threadpool(lookup)
    if digest is None:
        return error(404, "no such league")
    return FileResponse(request.app.state.store.path(digest), media_type="application/gzip",
                        filename=f"pantheon-league-{request.path_params['id']}.tar.gz", headers=UNTRUSTED_HEADERS)


UNREACHABLE = "the archive's database is unreachable; try again later"


async def health(request: Request) -> Response:
    """Ok only when the database answers: a monitor or load balancer in front must not be told all
    is well by a server whose every other route would fail."""
    def ping() -> None:
        with request.app.state.sessions() as session:
            session.execute(text("SELECT 1"))
    try:
        await run_in_threadpool(ping)
    except OperationalError:
        return JSONResponse({"ok": False, "error": UNREACHABLE}, 503)
    return JSONResponse({"ok": True})


async def database_unreachable(request: Request, exc: Exception) -> Response:
    """Any route whose database went away (a PostgreSQL restart, a dropped connection): 503 with
    one line instead of a bare 500. The pool's pre-ping reconnects once the database is back, and
    an upload's transaction was never committed, so nothing half-written is visible."""
    if request.url.path.startswith("/api/"):
        return error(503, UNREACHABLE)
    return Response(f"<!doctype html><title>Unavailable</title><p>{UNREACHABLE}.</p>", 503, media_type="text/html")
