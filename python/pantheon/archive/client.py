"""`pantheon archive upload DATA_DIR --to URL`: the data dir (or a league dir) as a gzip-compressed tar with a
MANIFEST.json of every file's sha256 at its top level (the server checks each), sent to
POST /api/uploads with the token as a bearer token. The token is checked first (GET /api/token),
so a bad token costs no upload. The archive is built in a temporary file and streamed from it:
a data dir of gigabytes never sits in memory. Only regular files are sent; a symbolic link in the
data dir is an error (the server would refuse it).
"""
from __future__ import annotations

import hashlib
import http.client
import io
import json
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from pantheon.archive.staging import MANIFEST
from pantheon.errors import PantheonError

LEAGUE_JSON = "league.json"
"""The file of a league dir (pantheon league; the server's leagues.py reads it): uploaded as a data dir is."""
TOKEN_VARIABLE = "PANTHEON_ARCHIVE_TOKEN"
LOCAL_TOKEN = Path("archive/files/local-token")
"""Where a server on a loopback address with the default --files keeps the token it made for this
machine's user (tokens.write_local), relative to the directory both were started in."""
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
"""Addresses only this machine reaches: a server on one makes its first token for its user."""
TIMEOUT_S = 600.0
"""How long the client waits for the server's answer to one request, s (a large data dir is
re-analysed before the answer)."""
CHUNK_BYTES = 1 << 20


class UploadError(PantheonError):
    """An upload that did not land; the message is the archive's, or why it could not be reached."""


def data_files(root: Path) -> list[tuple[str, Path]]:
    """(relative path, path) of every file under root, sorted; an UploadError at a link or special file."""
    found = []
    for directory, subdirs, names in os.walk(root):
        for name in sorted(subdirs + names):
            path = Path(directory) / name
            if path.is_symlink():
                raise UploadError(f"{path} is a symbolic link: the archive takes regular files only (copy what it points to)")
            if name in names and not path.is_file():
                raise UploadError(f"{path} is not a regular file")
        subdirs.sort()
        found += [(str((Path(directory) / n).relative_to(root)).replace(os.sep, "/"), Path(directory) / n) for n in names]
    if not found:
        raise UploadError(f"{root} holds no files")
    return sorted(found)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def pack(root: Path, out) -> None:
    """Writes the data dir's tar.gz, MANIFEST.json first, to the binary file `out`."""
    files = data_files(root)
    manifest = json.dumps({"files": {rel: sha256_file(path) for rel, path in files}}, indent=1, sort_keys=True).encode()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT, compresslevel=6) as tar:
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mtime, info.mode = len(manifest), int(time.time()), 0o644
        tar.addfile(info, io.BytesIO(manifest))
        for rel, path in files:
            info = tar.gettarinfo(str(path), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with path.open("rb") as f:
                tar.addfile(info, f)


class ArchiveUrlError(PantheonError):
    """An archive's address (upload's --to, observe's --archive) that cannot be one."""


def archive_url(url: str, option: str = "--to") -> tuple[str, str, int | None, str]:
    """(scheme, host, port or None, path without its trailing slash) of an archive's URL; an
    ArchiveUrlError in one line where it has no http(s) scheme or host, a bracket left open, or a
    port that is no TCP port (urlsplit raises ValueError for the last two)."""
    wrong = f"{option} {url!r} is not an archive's URL (http://HOST:PORT/ or https://HOST/)"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise ArchiveUrlError(f"{wrong}: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ArchiveUrlError(wrong)
    return parts.scheme, parts.hostname, port, parts.path.rstrip("/")


def token_from_file(path: Path, option: str = "--token-file") -> str:
    """The upload token a file holds (a token file of `archive serve`'s, or one a person wrote);
    a PantheonError in one line when it cannot be read or holds none."""
    try:
        token = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise PantheonError(f"{option} {path}: cannot read the token ({getattr(e, 'strerror', None) or e})") from None
    if not token:
        raise PantheonError(f"{option} {path} holds no token")
    return token


def _local_token(url: str) -> str | None:
    """The token a server on this machine made for its user (LOCAL_TOKEN), for a loopback URL."""
    if archive_url(url)[1] not in LOOPBACK_HOSTS or not LOCAL_TOKEN.is_file():
        return None
    return LOCAL_TOKEN.read_text().strip() or None


def _connection(url: str) -> tuple[http.client.HTTPConnection, str]:
    scheme, host, port, path = archive_url(url)
    kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    return kind(host, port, timeout=TIMEOUT_S, blocksize=CHUNK_BYTES), path


def _answer(response: http.client.HTTPResponse) -> dict:
    raw = response.read()
    try:
        body = json.loads(raw)
    except ValueError:
        body = {"error": raw[:200].decode("utf-8", "replace").strip() or response.reason}
    if response.status == 401:
        raise UploadError(f"the archive refused the token: {body.get('error', response.reason)}")
    if response.status == 503:
        raise UploadError(f"the archive is unavailable (503): {body.get('error', response.reason)}")
    if response.status >= 400:
        raise UploadError(f"the archive refused the upload ({response.status}): {body.get('error', response.reason)}")
    return body


def _request(url: str, method: str, path: str, headers: dict, body=None) -> dict:
    connection, prefix = _connection(url)
    try:
        connection.request(method, prefix + path, body=body, headers=headers)
        return _answer(connection.getresponse())
    except (OSError, http.client.HTTPException) as e:
        raise UploadError(f"could not reach the archive at {url} ({e})") from None
    finally:
        connection.close()


def upload(data_dir: Path, url: str, token: str | None, description: dict[str, str] | None = None) -> dict:
    """Uploads a data dir or a league dir; the server's answer {"id", "url", "created"} (a league's URL is /leagues/N)."""
    token = token or os.environ.get(TOKEN_VARIABLE) or _local_token(url)
    if not token:
        local = (f"; an archive served here makes one for its user in its --files directory, FILES/local-token (none "
                 f"at {LOCAL_TOKEN.resolve()}): give it with --token-file") if archive_url(url)[1] in LOOPBACK_HOSTS else ""
        raise UploadError(f"no token: give --token TOKEN or --token-file FILE, or set {TOKEN_VARIABLE} "
                          f"(pantheon archive token create NAME makes one){local}")
    if not data_dir.is_dir():
        raise UploadError(f"{data_dir} is not a directory (give a data dir of pantheon test, pantheon sim or pantheon demo, "
                          "or a league dir of pantheon league)")
    if not (data_dir / "perf.json").is_file() and not (data_dir / LEAGUE_JSON).is_file():
        raise UploadError(f"{data_dir} has no perf.json: run pantheon analyze {data_dir} first (or, for a league, "
                          f"give the --data-dir of pantheon league, which holds {LEAGUE_JSON})")
    auth = {"Authorization": f"Bearer {token}"}
    _request(url, "GET", "/api/token", auth)
    with tempfile.TemporaryFile() as body:
        pack(data_dir, body)
        size = body.tell()
        body.seek(0)
        print(f"pantheon archive: sending {data_dir} ({size / 1e6:.1f} MB compressed)", file=sys.stderr, flush=True)
        query = urlencode({k: v for k, v in (description or {}).items() if v is not None})
        return _request(url, "POST", "/api/uploads" + (f"?{query}" if query else ""),
                        {**auth, "Content-Type": "application/gzip", "Content-Length": str(size)}, body)
