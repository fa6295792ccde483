"""`pantheon archive`: serve the archive, manage its upload tokens, upload a data dir.

    pantheon archive serve [--db URL] [--files DIR] [--host H] [--port P]
    pantheon archive token create NAME [--db URL]      prints the token once, as its last word
    pantheon archive token revoke NAME [--db URL]
    pantheon archive upload DATA_DIR... --to URL [--token T]   (or PANTHEON_ARCHIVE_TOKEN; a league dir too)

A server on a loopback address whose database has no token yet makes one for this machine's user
and writes it to FILES/local-token (mode 0600); `upload` to a loopback URL with no token given reads
archive/files/local-token, so `pantheon archive serve` and `pantheon archive upload data/demo-*`
give a browsable archive in two commands. A server reachable from elsewhere never does this.

serve prints one line, `pantheon archive: serving http://HOST:PORT/`, once it listens, and stops
cleanly (exit 0) on SIGINT or SIGTERM.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from pantheon.archive.client import LOCAL_TOKEN, LOOPBACK_HOSTS, TOKEN_VARIABLE
from pantheon.archive.db import DEFAULT_URL
from pantheon.archive.staging import Limits
from pantheon.errors import PantheonError

DEFAULT_FILES = LOCAL_TOKEN.parent
MB = 1 << 20
UPLOAD_REFUSED = 1
"""Exit status of an upload that did not land (the archive refused it, or could not be reached)."""
PORT_MAX = 65535


class ServeError(PantheonError):
    """An option of pantheon archive serve that cannot work."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    archive = sub.add_parser(
        "archive", help="the results archive: serve it, manage upload tokens, upload a data dir",
        description="The results archive (docs/archive.md): a website and API over uploaded data dirs, each checked "
        "against the analysis; serve it, manage who may upload, upload.",
        epilog="example:\n  pantheon archive upload data/nepal --to http://127.0.0.1:8080/")
    commands = archive.add_subparsers(metavar="COMMAND", required=True)

    serve = commands.add_parser(
        "serve", help="run the archive's website and API",
        description="Run the archive's website and API until SIGINT or SIGTERM. On a loopback address, a database "
        "without tokens gets one for this machine's user (FILES/local-token), which pantheon archive upload to a "
        "loopback URL reads.",
        epilog="example:\n  pantheon archive serve --port 8080")
    serve.add_argument("--db", default=DEFAULT_URL, help=f"database URL: sqlite:///FILE or postgresql://USER@HOST/DB (default {DEFAULT_URL})")
    serve.add_argument("--files", type=Path, default=DEFAULT_FILES, help=f"directory of the file store (default {DEFAULT_FILES})")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port to listen on; 0 picks a free one (default 8080)")
    serve.add_argument("--max-upload-mb", type=float, default=1024, help="largest upload accepted, compressed, MiB (default 1024)")
    serve.add_argument("--max-unpacked-mb", type=float, default=4096,
                       help="most an upload may unpack to, MiB (default 4096; a larger one is refused as a decompression bomb)")
    serve.add_argument("--max-files", type=int, default=100_000, help="most files in one upload (default 100000)")
    serve.set_defaults(run=_serve)

    token = commands.add_parser(
        "token", help="create or revoke an upload token",
        description="Create or revoke an upload token: the archive keeps only its hash, and refuses the uploads of "
        "a revoked one.",
        epilog="example:\n  pantheon archive token create ci-runner")
    actions = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    for action, what in (("create", "make a token for NAME and print it (once; only its hash is kept)"),
                         ("revoke", "revoke NAME's token: its uploads are refused from now on")):
        parser = actions.add_parser(action, help=what, description=what[0].upper() + what[1:] + ".",
                                    epilog=f"example:\n  pantheon archive token {action} ci-runner")
        parser.add_argument("name", metavar="NAME", help="who holds the token (a person, a lab, a CI job)")
        parser.add_argument("--db", default=DEFAULT_URL, help=f"database URL (default {DEFAULT_URL})")
        parser.set_defaults(run=_token)

    upload = commands.add_parser(
        "upload", help="upload a data dir (pantheon test, sim or demo; analysed) or a league dir to an archive",
        description="Upload data dirs of pantheon test, sim or demo, each analysed first, or league dirs of pantheon "
        "league (with league.json), to an archive; prints each one's page. Exit status 1 when the archive refused one "
        "or could not be reached.",
        epilog="example:\n  pantheon archive upload data/nepal --to http://127.0.0.1:8080/")
    upload.add_argument("data_dirs", type=Path, nargs="+", metavar="DATA_DIR",
                        help="one or more data dirs, each analysed, or league dirs (pantheon league --data-dir)")
    upload.add_argument("--to", required=True, metavar="URL", help="the archive, e.g. http://127.0.0.1:8080/")
    upload.add_argument("--token", help=f"upload token (default: --token-file, ${TOKEN_VARIABLE}, or for a loopback URL "
                        f"{LOCAL_TOKEN}, the token archive serve --files {LOCAL_TOKEN.parent} made)")
    upload.add_argument("--token-file", type=Path, metavar="FILE",
                        help="a file holding the upload token (an archive serve's FILES/local-token, or your own)")
    upload.add_argument("--title", help="the result's title (default: made from the path and the schemes; a league's: its "
                        "matrix and commit)")
    upload.add_argument("--description", help="a paragraph on the experiment, shown on its page (a league's default: its "
                        "matrix's)")
    upload.add_argument("--kind", choices=["emulation", "simulation", "node-cloud", "cloud-cloud"],
                        help="what the path was (default: from the data dir; a real path is node-cloud unless told)")
    upload.add_argument("--node", help="the host the experiment ran from (default: --local-desc of pantheon test remote)")
    upload.add_argument("--peer", help="the far host (default: --remote-desc of pantheon test remote)")
    upload.add_argument("--link", help="the node's link type: ethernet, wifi, cellular, ...")
    upload.set_defaults(run=_upload)


def serve_limits(args: argparse.Namespace) -> Limits:
    """The upload limits of `serve`'s options, after checking every option a server cannot start
    with (before the database or the store is touched); a ServeError naming the first."""
    if not 0 <= args.port <= PORT_MAX:
        raise ServeError(f"--port {args.port} is not a TCP port (0 to {PORT_MAX}; 0 picks a free one)")
    if args.files.exists() and not args.files.is_dir():
        raise ServeError(f"--files {args.files} is not a directory (give the directory of the archive's file store)")
    for option, mib in (("--max-upload-mb", args.max_upload_mb), ("--max-unpacked-mb", args.max_unpacked_mb)):
        if not (math.isfinite(mib) and mib > 0):
            raise ServeError(f"{option} {mib:g} is not a size: give a number of MiB above 0")
    if args.max_files < 1:
        raise ServeError(f"--max-files {args.max_files}: an upload holds at least one file; give 1 or more")
    return Limits(upload_bytes=max(1, int(args.max_upload_mb * MB)), unpacked_bytes=max(1, int(args.max_unpacked_mb * MB)),
                  files=args.max_files)


def _serve(args: argparse.Namespace) -> int:
    limits = serve_limits(args)
    import uvicorn

    from pantheon.archive.app import Settings, make_app

    app = make_app(Settings(args.db, args.files, limits, local_token=args.host in LOOPBACK_HOSTS))

    class Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if not self.should_exit:
                port = self.servers[0].sockets[0].getsockname()[1]
                print(f"pantheon archive: serving http://{args.host}:{port}/", flush=True)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            """SIGINT and SIGTERM end the serving loop and the process exits 0 (uvicorn's own
            handler would raise the signal again once stopped)."""
            previous = {s: signal.signal(s, self.handle_exit) for s in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for s, handler in previous.items():
                    signal.signal(s, handler)

    server = Server(uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", proxy_headers=True,
                                   timeout_graceful_shutdown=5))
    server.run()
    return 0


def _token(args: argparse.Namespace) -> int:
    from sqlalchemy.orm import Session

    from pantheon.archive import tokens
    from pantheon.archive.db import opened

    engine = opened(args.db, make_directory=False)
    with Session(engine) as session:
        if args.token_command == "create":
            token = tokens.create(session, args.name)
            print(f"pantheon archive: token for {args.name.strip()} (shown once; keep it secret): {token}")
        else:
            tokens.revoke(session, args.name)
            print(f"pantheon archive: revoked the token of {args.name}")
    return 0


def _upload(args: argparse.Namespace) -> int:
    from pantheon.archive import client

    told = {name: getattr(args, name) for name in ("title", "description", "kind", "node", "peer", "link")}
    client.archive_url(args.to)  # a URL that cannot be an archive's is the user's mistake once, not once a data dir
    token = args.token or (client.token_from_file(args.token_file) if args.token_file else None)
    refused = 0
    for data_dir in args.data_dirs:
        try:
            answer = client.upload(data_dir, args.to, token, told)
        except client.UploadError as e:
            print(f"pantheon: {e}", file=sys.stderr)
            refused += 1
            continue
        verb = "uploaded" if answer.get("created") else "already in the archive"
        print(f"pantheon archive: {data_dir} {verb}: {answer['url']}", flush=True)
    return UPLOAD_REFUSED if refused else 0
