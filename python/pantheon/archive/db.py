"""The archive's database: SQLite in a file by default (nothing to set up), PostgreSQL by URL for a
shared deployment (psycopg 3). SQLite runs in write-ahead-log mode with a busy timeout, so that
readers never wait for an upload and concurrent uploads queue for the one writer instead of failing
(https://www.sqlite.org/wal.html).
"""
from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from pantheon.errors import PantheonError

DEFAULT_URL = "sqlite:///archive/archive.db"
"""A SQLite file under ./archive/, beside the default file store archive/files."""
SQLITE_BUSY_TIMEOUT_MS = 60_000
"""How long a SQLite writer waits for another's transaction to end before giving up, ms: longer
than the commit of the largest upload (its rows only; files are moved before)."""


class DatabaseError(PantheonError):
    """A database URL that cannot be used."""


def _sqlalchemy_url(url: str) -> str:
    """postgresql:// means psycopg 3 here (SQLAlchemy's own default is psycopg2, not installed)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def engine_for(url: str, make_directory: bool = True) -> Engine:
    """An engine for a database URL. The directory of a SQLite file is made if missing, or with
    make_directory=False a DatabaseError says it is missing (a token made in a database no server
    reads would be lost)."""
    try:
        parsed = make_url(_sqlalchemy_url(url))
    except ArgumentError:
        raise DatabaseError(f"--db {url!r} is not a database URL (sqlite:///FILE or postgresql://USER@HOST/DB)") from None
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            directory = Path(parsed.database).parent
            if not make_directory and not directory.is_dir():
                raise DatabaseError(f"--db {url!r}: the directory {directory} does not exist (give the --db of the "
                                    "archive's server; pantheon archive serve makes its database)")
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise DatabaseError(f"--db {url!r}: cannot make the directory {directory} ({e.strerror})") from None
        engine = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _pragmas(connection, _record) -> None:
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    if parsed.get_backend_name() == "postgresql":
        return create_engine(parsed, pool_pre_ping=True)
    raise DatabaseError(f"--db {url!r}: the archive keeps its data in SQLite (sqlite:///FILE) or PostgreSQL (postgresql://...)")


def opened(url: str, make_directory: bool = True) -> Engine:
    """engine_for(url), with the database brought to the newest schema (schema.upgrade); a
    DatabaseError in one line when it cannot be opened (no such file system, no permission, a
    PostgreSQL that does not answer)."""
    from pantheon.archive import schema

    engine = engine_for(url, make_directory)
    try:
        schema.upgrade(engine)
    except OperationalError as e:
        shown = make_url(_sqlalchemy_url(url)).render_as_string(hide_password=True)
        reason = str(e.orig or e).strip().splitlines()[0] if str(e.orig or e).strip() else type(e).__name__
        raise DatabaseError(f"cannot open the database {shown} ({reason})") from None
    return engine
