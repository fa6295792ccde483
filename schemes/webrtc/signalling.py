"""The signalling server of the WebRTC scheme: it serves the two pages and relays one offer and one
answer between them (JSEP, RFC 8829 §3: the offerer sends a session description, the answerer
replies with one). ICE runs without trickling: each page waits for its candidates to be gathered
and sends a description that already holds them (RFC 8829 §3.5.1), so one exchange is all a call
needs. The pages poll; a description not there yet answers 204 No Content.

    GET  /sender.html, /receiver.html, /peer.js      the pages
    POST /offer, /answer                             a page posts its description (SDP text)
    GET  /offer, /answer                             200 with the description, or 204 until posted
"""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

PAGES = {"/sender.html": "text/html", "/receiver.html": "text/html", "/peer.js": "text/javascript"}
DESCRIPTIONS = ("/offer", "/answer")
MAX_SDP_BYTES = 1 << 16


class SignallingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], page_dir: Path) -> None:
        self.page_dir = page_dir
        self.descriptions: dict[str, bytes] = {}
        self.lock = threading.Lock()
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: SignallingServer

    def do_GET(self) -> None:
        path = urlsplit(self.path).path  # the sender page's query is for the page alone
        if path in PAGES:
            self._reply(200, (self.server.page_dir / path.lstrip("/")).read_bytes(), PAGES[path])
        elif path in DESCRIPTIONS:
            with self.server.lock:
                sdp = self.server.descriptions.get(path)
            self._reply(204, b"") if sdp is None else self._reply(200, sdp, "application/sdp")
        else:
            self._reply(404, b"no such page\n", "text/plain")

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        length_field = self.headers.get("Content-Length", "")
        length = int(length_field) if length_field.isdigit() else 0
        if path not in DESCRIPTIONS or not 0 < length <= MAX_SDP_BYTES:
            self._reply(400, b"post an SDP description to /offer or /answer\n", "text/plain")
            return
        body = self.rfile.read(length)
        with self.server.lock:
            self.server.descriptions[path] = body
        self._reply(204, b"")

    def _reply(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the pages' own console lines say how the call goes."""
