"""The archive's real parts for its tests (issue 20 §3, docs/archive.md): a throwaway PostgreSQL
cluster, `pantheon archive serve` as a process on a free port, and small real data dirs.

The cluster is Debian's PostgreSQL 15 (initdb, then the postmaster) in a directory of its own,
listening only on a Unix socket there, so no port can clash with another test run or a system
PostgreSQL; fsync is off because a test's database need not outlive a power cut. PostgreSQL refuses to
run as root, so under root it runs as the `postgres` user the Debian package creates. It is stopped by
the process group of its postmaster (the backends are its children) and deleted whatever happens.

The server runs as `pantheon archive serve` would for a user, in its own process group (uvicorn's
workers, if any, go with it), and is ready once it has printed the contract's one line
`pantheon archive: serving http://HOST:PORT/`.

Data dirs come from `pantheon sim` (a second or two each): real records, perf.json, plots and a
report, as an experiment leaves them."""
from __future__ import annotations

import contextlib
import datetime
import gzip
import hashlib
import itertools
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy

from prerequisites import missing

REPO = Path(__file__).resolve().parent.parent
PANTHEON = REPO / ".venv" / "bin" / "pantheon"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
SERVING = re.compile(r"^pantheon archive: serving (http://\S+/)$", re.MULTILINE)
# Starting the server imports FastAPI, SQLAlchemy and Alembic and runs the migrations: ~2 s alone,
# several times that on a busy 2-core machine.
SERVER_START_S = 60.0
STOP_S = 15.0


def stop_group(proc: subprocess.Popen, first: signal.Signals = signal.SIGTERM) -> int | None:
    """Stop a process started with start_new_session=True and everything in its group: `first`, then
    SIGKILL after STOP_S. Returns the exit status the process gave to `first` (None if it had to be killed)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, first)
    try:
        status: int | None = proc.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        status = None
    # Children that outlived the leader (a backend, a worker) still carry its group id.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return status


# --- PostgreSQL ---------------------------------------------------------------------------------


class Postgres:
    """A throwaway cluster's postmaster, which a test may stop and start again; databases are made in
    it per server."""

    def __init__(self, top: Path, as_user: dict) -> None:
        self.socket_dir = top
        """Where the postmaster's Unix socket is (it listens on no TCP port), its data dir beside it."""
        self.port = 5432
        """The number in the socket's name (.s.PGSQL.PORT), the socket in a directory of its own; no TCP
        port is opened, so none can clash."""
        self.proc: subprocess.Popen | None = None
        """The postmaster, leader of its process group (its backends are its children)."""
        self._as_user = as_user
        self._names = itertools.count(1)

    def start(self) -> None:
        """Start the postmaster and wait until it accepts connections."""
        with open(self.socket_dir / "postgres.log", "ab") as log:
            self.proc = subprocess.Popen(
                [str(PG_BIN / "postgres"), "-D", str(self.socket_dir / "data"), "-k", str(self.socket_dir),
                 "-p", str(self.port), "-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off",
                 "-c", "full_page_writes=off", "-c", "max_connections=200"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **self._as_user)
        deadline = time.monotonic() + 60
        while subprocess.run([str(PG_BIN / "pg_isready"), "-q", "-h", str(self.socket_dir), "-p", str(self.port)]
                             ).returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start: {(self.socket_dir / 'postgres.log').read_text()[-2000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the postmaster: SIGINT is PostgreSQL's "fast" shutdown (backends ended, no client waited for)."""
        if self.proc is not None:
            stop_group(self.proc, signal.SIGINT)
            self.proc = None

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of `database` over the socket, as a user would pass to --db."""
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port={self.port}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run SQL with psql (the test's own look at the database, not through the server)."""
        done = subprocess.run([str(PG_BIN / "psql"), "-h", str(self.socket_dir), "-p", str(self.port), "-U", "postgres",
                               "-d", database, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql],
                              capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {done.stderr.strip()}")
        return done.stdout.strip()

    def tool(self, program: str, *args: str) -> None:
        """Run one of PostgreSQL's client programs (pg_dump, pg_restore, ...) against this cluster."""
        done = subprocess.run([str(PG_BIN / program), "-h", str(self.socket_dir), "-p", str(self.port), "-U", "postgres",
                               *args], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{program} {' '.join(args)}: {done.stderr.strip()}")

    def new_database(self) -> str:
        """A fresh empty database's URL."""
        name = f"archive{next(self._names)}"
        self.psql(f"CREATE DATABASE {name}")
        return self.url(name)


def _cluster_user() -> dict:
    """subprocess arguments that run the cluster's programs as a user PostgreSQL accepts."""
    if os.geteuid() != 0:
        return {}
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        missing("PostgreSQL refuses root and there is no postgres user (apt-get install postgresql)")
    return {"user": "postgres", "group": "postgres", "extra_groups": []}


@contextmanager
def postgres_cluster() -> Iterator[Postgres]:
    """initdb a cluster in a new temporary directory, start its postmaster, yield it; stop and delete it."""
    if not (PG_BIN / "initdb").is_file():
        missing(f"{PG_BIN}/initdb is missing (apt-get install postgresql-15)")
    as_user = _cluster_user()
    # Not under pytest's tmp_path: /tmp/pytest-of-root is root's alone, and the postgres user must reach
    # its directory; the socket's path must also stay under the 107 bytes a Unix socket name allows.
    top = Path(tempfile.mkdtemp(prefix="pantheon-pg-"))
    postgres = Postgres(top, as_user)
    try:
        if as_user:
            shutil.chown(top, "postgres", "postgres")
        done = subprocess.run([str(PG_BIN / "initdb"), "-D", str(top / "data"), "-U", "postgres", "-A", "trust",
                               "-E", "UTF8", "--no-sync", "--no-instructions"],
                              capture_output=True, text=True, timeout=120, **as_user)
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()}")
        postgres.start()
        yield postgres
    finally:
        postgres.stop()
        shutil.rmtree(top, ignore_errors=True)


# --- the server ---------------------------------------------------------------------------------


class ArchiveServer:
    """`pantheon archive serve` running as a process; `url` ends with a slash."""

    def __init__(self, db: str, files: Path, log_dir: Path, cwd: Path | None = None, options: tuple[str, ...] = ()) -> None:
        self.db = db
        """The database's URL (--db)."""
        self.files = files
        """The content-addressed store's directory (--files)."""
        self.log_dir = log_dir
        """Where the server's stdout and stderr go, one pair of files per start."""
        self.cwd = cwd
        """None: serve with --db and --files; else serve with neither, in this directory (db and files
        then say where the defaults put them)."""
        self.options = options
        """More options of `pantheon archive serve` (limits, say)."""
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.port = 0
        self._starts = 0

    def start(self, port: int = 0) -> None:
        """Start the server on `port` (0: a free one it picks and names) and wait for its serving line."""
        self._starts += 1
        out = self.log_dir / f"serve{self._starts}.out"
        err = self.log_dir / f"serve{self._starts}.err"
        where = [] if self.cwd else ["--db", self.db, "--files", str(self.files)]
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            self.proc = subprocess.Popen([str(PANTHEON), "archive", "serve", *where, "--host", "127.0.0.1",
                                          "--port", str(port), *self.options], stdout=stdout, stderr=stderr, cwd=self.cwd,
                                         start_new_session=True)
        deadline = time.monotonic() + SERVER_START_S
        while (m := SERVING.search(out.read_text(errors="replace"))) is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the archive server exited with {self.proc.returncode}: "
                                   f"{err.read_text(errors='replace')[-3000:]}")
            if time.monotonic() > deadline:
                stop_group(self.proc, signal.SIGKILL)
                raise RuntimeError(f"the archive server printed no serving line in {SERVER_START_S:.0f} s: "
                                   f"{err.read_text(errors='replace')[-3000:]}")
            time.sleep(0.05)
        self.url = m.group(1)
        self.port = urllib.parse.urlsplit(self.url).port or 0
        assert self.url == f"http://127.0.0.1:{port or self.port}/", self.url
        assert get_json(self.url + "api/health") == {"ok": True}

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int | None:
        """Stop the server's process group with `sig` (SIGKILL after a grace period); its exit status."""
        assert self.proc is not None
        return stop_group(self.proc, sig)

    def token(self, name: str) -> str:
        """A new upload token (`pantheon archive token create NAME --db URL`: its last word)."""
        done = pantheon("archive", "token", "create", name, "--db", self.db)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[-1]

    def upload(self, data_dir: Path, token: str | None, timeout: float = 120) -> subprocess.CompletedProcess:
        """`pantheon archive upload DATA_DIR --to URL [--token T]`."""
        args = ["archive", "upload", str(data_dir), "--to", self.url]
        return pantheon(*args, *(["--token", token] if token is not None else []), timeout=timeout)

    def upload_all(self, data_dirs: dict[str, Path], token: str, timeout: float = 300) -> dict[str, int]:
        """Upload every data dir with the command line, all at once; each one's result id, by name."""
        started = {name: subprocess.Popen([str(PANTHEON), "archive", "upload", str(path), "--to", self.url, "--token", token],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for name, path in data_dirs.items()}
        ids = {}
        for name, proc in started.items():
            stdout, stderr = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, f"pantheon archive upload {data_dirs[name]}: {stderr}"
            url = stdout.split()[-1]
            assert url.startswith(f"{self.url}results/"), stdout
            ids[name] = int(url.rsplit("/", 1)[1])
        return ids

    def results(self, **query: str) -> dict:
        """GET /api/results with `query`."""
        return get_json(self.url + "api/results?" + urllib.parse.urlencode(query))


def pantheon(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 120
             ) -> subprocess.CompletedProcess:
    """Run the pantheon command line (the checkout's python/ first on PYTHONPATH, as the tests run)."""
    return subprocess.run([str(PANTHEON), *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, **(env or {})})


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def get_bytes(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


@contextmanager
def archive_server(db: str, root: Path) -> Iterator[ArchiveServer]:
    """A started server over database `db` with its files under `root`; stopped however the test ends."""
    (root / "logs").mkdir(parents=True, exist_ok=True)
    server = ArchiveServer(db, root / "files", root / "logs")
    server.start()
    try:
        yield server
    finally:
        if server.proc is not None:
            server.stop()


DATABASES = ["sqlite", "postgresql"]
"""The kinds of database the archive's tests run against (a test parametrised over them)."""


def new_database(request: pytest.FixtureRequest, kind: str, root: Path) -> str:
    """A fresh empty database's --db URL: a SQLite file under `root`, or a new database in the session's
    PostgreSQL cluster (started only when a test asks for one)."""
    if kind == "sqlite":
        return f"sqlite:///{root / 'archive.db'}"
    postgres: Postgres = request.getfixturevalue("postgres")
    return postgres.new_database()


@dataclass
class Archive:
    """A running server with the session's experiments uploaded by the command line."""

    server: ArchiveServer
    token: str
    """The upload token they were uploaded with."""
    ids: dict[str, int]
    """Each experiment's result id, by experiment name."""


# --- data dirs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Experiment:
    """A data dir made by `pantheon sim` for the archive's tests."""

    name: str
    """Its directory's name, e.g. "copa-cubic"."""
    schemes: tuple[str, ...]
    flows: int
    emulator: str | None
    """The --emulator preset, or None for the default path with --delay."""
    path: Path


# Distinct on purpose so the find-results filters have something to tell apart: schemes, flows and
# the emulated path differ; two runs each so per-scheme statistics have a spread; three schemes in
# one experiment so the summary table's row has a colour between its best and its worst.
EXPERIMENTS = {
    "copa-cubic": (("copa", "cubic-user"), 1, None),
    "vegas-2flows": (("vegas-user",), 2, "buffer-30000b"),
    "nepal-3schemes": (("bbr-user", "copa", "reno-user"), 1, "nepal-wifi"),
}
RUNTIME_S = 2


def make_experiments(root: Path) -> dict[str, Experiment]:
    """Simulate every EXPERIMENTS entry under `root`, all at once (a second or two each)."""
    started = {}
    for name, (schemes, flows, emulator) in EXPERIMENTS.items():
        path = root / name
        path_args = ["--emulator", emulator] if emulator else ["--delay", "10"]
        started[name] = (subprocess.Popen(
            [str(PANTHEON), "sim", "--schemes", ",".join(schemes), "--run-times", "2", "--runtime", str(RUNTIME_S),
             "--flows", str(flows), "--jobs", "1", "--quiet", "--data-dir", str(path), *path_args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), Experiment(name, schemes, flows, emulator, path))
    made = {}
    for name, (proc, experiment) in started.items():
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"pantheon sim for {name}: {stderr}"
        made[name] = experiment
    return made


def copy_with_start_time(source: Path, dest: Path, minutes_later: int) -> Path:
    """A copy of a data dir that is another experiment to the archive: its metadata's start time moved
    by `minutes_later` (so its manifest differs), everything else the same real data."""
    shutil.copytree(source, dest)
    meta_path = dest / "metadata.json"
    meta = json.loads(meta_path.read_text())
    start = datetime.datetime.fromisoformat(meta["start_time"]) + datetime.timedelta(minutes=minutes_later)
    meta["start_time"] = start.isoformat(timespec="seconds")
    meta_path.write_text(json.dumps(meta, indent=2))
    return dest


# --- uploads by hand ----------------------------------------------------------------------------
# The contract's upload format written here from its description (docs/archive.md), not with the
# client under test: a gzip-compressed tar of the data dir's files by relative path, and
# MANIFEST.json at the top {"files": {RELPATH: SHA256HEX}} covering every other member. The hostile
# uploads are this list with a member changed.

Member = tuple[tarfile.TarInfo, bytes]


def regular(name: str, data: bytes) -> Member:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    return info, data


def manifest_member(files: list[Member]) -> Member:
    hashes = {info.name: hashlib.sha256(data).hexdigest() for info, data in files if info.isreg()}
    return regular("MANIFEST.json", json.dumps({"files": hashes}).encode())


def data_dir_members(data_dir: Path) -> list[Member]:
    """Every file of `data_dir` as a member, and a manifest of them first."""
    files = [regular(p.relative_to(data_dir).as_posix(), p.read_bytes())
             for p in sorted(data_dir.rglob("*")) if p.is_file()]
    return [manifest_member(files), *files]


def tar_member(info: tarfile.TarInfo, data: bytes) -> bytes:
    """One member as a tar stream holds it: header blocks, then the contents padded to a block."""
    return info.tobuf(tarfile.PAX_FORMAT) + data + b"\0" * (-len(data) % tarfile.BLOCKSIZE)


def pack(members: list[Member]) -> bytes:
    """The members as a gzip-compressed tar, in order (two zero blocks end a tar)."""
    tar = b"".join(tar_member(info, data) for info, data in members) + b"\0" * (2 * tarfile.BLOCKSIZE)
    return gzip.compress(tar, compresslevel=1, mtime=0)


def post_upload(server_url: str, body: bytes, token: str | None, timeout: float = 120, query: str = ""
                ) -> tuple[int, dict]:
    """POST /api/uploads[?query]; the status and the JSON answer (errors included)."""
    headers = {"Content-Type": "application/gzip"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(server_url + "api/uploads" + (f"?{query}" if query else ""), data=body,
                                     headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


def row_counts(db: str) -> dict[str, int]:
    """Rows in every table of the archive's database, read directly (not through the server): what a
    refused or interrupted upload must leave unchanged."""
    engine = sqlalchemy.create_engine(db.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as connection:
            return {table: connection.execute(sqlalchemy.text(f'SELECT count(*) FROM "{table}"')).scalar_one()
                    for table in sqlalchemy.inspect(connection).get_table_names()}
    finally:
        engine.dispose()
