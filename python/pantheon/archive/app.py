"""The archive as an ASGI application (Starlette): the routes of api.py and pages.py over one
database and one file store. make_app migrates the database to the newest schema, empties the
staging directory and removes the blobs no row names (what a server stopped mid-upload left) before
the first request.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import sessionmaker
from starlette.applications import Starlette
from starlette.routing import Route

from pantheon.archive import api, pages, tokens
from pantheon.archive.db import opened
from pantheon.archive.models import File, League, LeagueFile, Result
from pantheon.archive.staging import Limits
from pantheon.archive.store import Store


@dataclass(frozen=True)
class Settings:
    db_url: str
    files: Path
    limits: Limits
    local_token: bool = False
    """Whether to make a first token for this machine's user, in FILES/local-token (tokens.write_local)."""


ROUTES = [
    Route("/", pages.find_page),
    Route("/results/{id}", pages.result_page),
    Route("/results/{id}/files/{path:path}", api.file),
    Route("/results/{id}/archive.tar.gz", api.archive),
    Route("/summary", pages.summary_page),
    Route("/schemes/{name}", pages.scheme_page),
    Route("/compare", pages.compare_page),
    Route("/faq", pages.faq_page),
    Route("/leagues", pages.leagues_page),
    Route("/leagues/compare", pages.league_compare_page),
    Route("/leagues/{id}", pages.league_page),
    Route("/leagues/{id}/files/{path:path}", api.league_file),
    Route("/leagues/{id}/archive.tar.gz", api.league_archive),
    Route("/api/health", api.health),
    Route("/api/token", api.token),
    Route("/api/uploads", api.uploads, methods=["POST"]),
    Route("/api/results", api.results),
    Route("/api/filters", api.filters),
    Route("/api/results/{id}", api.result),
    Route("/api/results/{id}/runs", api.result_runs),
    Route("/api/summary", api.summary),
    Route("/api/schemes/{name}", api.scheme),
    Route("/api/export.{format:str}", api.export),
    Route("/api/leagues", api.league_list),
    Route("/api/leagues/compare", api.league_compare),
    Route("/api/leagues/{id}", api.league),
]


def make_app(settings: Settings) -> Starlette:
    engine = opened(settings.db_url)
    store = Store(settings.files)
    store.open()
    sessions = sessionmaker(engine, expire_on_commit=False)
    with sessions() as session:
        named = (set(session.scalars(select(File.sha256).distinct())) | set(session.scalars(select(Result.archive_sha256)))
                 | set(session.scalars(select(LeagueFile.sha256).distinct()))
                 | set(session.scalars(select(League.archive_sha256))))
        if removed := store.sweep(named):
            print(f"pantheon archive: removed {removed} file(s) of uploads a stopped server left half-done",
                  file=sys.stderr, flush=True)
    if settings.local_token:
        with sessions() as session:
            if tokens.write_local(session, store.root / "local-token"):
                print(f"pantheon archive: made an upload token for this machine's user in {store.root / 'local-token'}",
                      file=sys.stderr, flush=True)
    app = Starlette(routes=ROUTES, exception_handlers={OperationalError: api.database_unreachable})
    app.state.sessions = sessions
    app.state.store = store
    app.state.limits = settings.limits
    return app
