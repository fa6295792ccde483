"""One side of a WebRTC video call between two headless Chromium browsers, as a Pantheon scheme
(the original Pantheon's "webrtc": Yan et al., ATC 2018, §3). The sender streams a generated
high-motion video (make_video.py) through Chromium's fake camera, VP8, at whatever rate Google
Congestion Control allows (Holmer et al., draft-ietf-rmcat-gcc-02; Carlucci et al., MMSys 2016);
the receiver answers the call and plays the video. Media flows sender -> receiver, RTCP feedback
(transport-wide congestion control reports, RTP/AVPF) flows back.

    webrtc.py recv LOCAL PORT    serve the pages and signalling on LOCAL:PORT (signalling.py),
                                 then open page/receiver.html in Chromium
    webrtc.py send PEER PORT     wait for PEER:PORT to answer, then open page/sender.html from it

The rate is GCC's alone: the page raises the encoder's ceiling (by default a few Mbit/s chosen
from the resolution) to 50 Mbit/s, and leaves GCC's start (300 kbit/s) and its initial probing
untouched. On the 12 Mbit/s, 20 ms path the call carries over 1 Mbit/s within 3 s of the flow's
start, of which ~1.5 s is browser start-up and signalling, so the SDP is not munged
(x-google-start-bitrate): the scheme runs Chromium's congestion control as shipped.

ICE uses host candidates only, with no STUN or TURN server (there is no Internet here). Chromium
would hide local addresses behind mDNS names (draft-ietf-mmusic-mdns-ice-candidates) that nothing
here resolves, so that feature is turned off and the candidates are the tunnel's own addresses.

Each page logs a line a second of its WebRTC statistics (rate, GCC's estimate and target, RTT,
loss, resolution, frames, what limits the encoder), which the wrapper writes to standard error.

Chromium runs in this process's group, so the harness's group-wide SIGTERM and SIGKILL reach every
one of its processes, and the wrapper is their subreaper, so none escapes its process tree. On
SIGTERM or SIGINT the wrapper kills that whole tree at once (the browser's state is thrown away,
so an orderly shutdown would only be slower: ~1.5 s), waits until it is gone and removes the
browser's temporary profile, which also holds the browser's own temporary files. A browser whose
wrapper is killed outright dies with it (PR_SET_PDEATHSIG), and the profile it left is removed by
the next wrapper that starts. A profile's owner is known by a lock, not a pid: the wrapper holds an
flock(2) on the profile's directory for its life, which the kernel drops however it ends. A pid
would not do: under a Pantheon tunnel each side runs in a PID namespace of its own, so the same pid
names different wrappers on the two sides, and a process on the other side cannot be asked after.
"""
from __future__ import annotations

import collections
import contextlib
import ctypes
import fcntl
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from signalling import SignallingServer

HERE = Path(__file__).resolve().parent
PAGE_DIR = HERE / "page"
VIDEO = HERE / "video.y4m"
CHROMIUM = Path("/usr/lib/chromium/chromium")
"""Debian's browser binary; /usr/bin/chromium is a shell script that execs it."""
PROFILE_PREFIX = "pantheon-webrtc-"
SERVER_WAIT_S = 60.0
"""How long the sender waits for the receiver's page server before giving up."""
GONE_WAIT_S = 1.0
POLL_S = 0.05
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

BROWSER_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu",
    "--use-fake-ui-for-media-stream",                     # grant camera access without asking
    "--disable-features=WebRtcHideLocalIpsWithMdns",      # ICE candidates carry the tunnel addresses
    "--autoplay-policy=no-user-gesture-required",
    # A headless page counts as hidden; keep its timers and renderer at full speed.
    "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    # Nothing but the call: no first-run pages, updates, sync or other background traffic.
    "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-extensions", "--password-store=basic",
    "--mute-audio",
    # Console lines of the pages come out at log level INFO on standard error.
    "--enable-logging=stderr", "--log-level=0",
]
CONSOLE_LINE = re.compile(r':CONSOLE[:(]\d*\)?\] "(?P<message>.*)", source: ')
CHROMIUM_TAIL_LINES = 20


class Failure(Exception):
    """Ends the scheme with a one-line message (exit status 1)."""


class UsageError(Failure):
    """Bad command-line arguments (exit status 2)."""


def say(message: str) -> None:
    print(f"webrtc: {message}", file=sys.stderr, flush=True)


def _url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def _parse(argv: list[str]) -> tuple[str, str, int]:
    usage = "usage: webrtc.py recv LOCAL_ADDRESS PORT | webrtc.py send PEER_ADDRESS PORT"
    if len(argv) != 3 or argv[0] not in ("recv", "send"):
        raise UsageError(usage)
    role, address, port = argv
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise UsageError(f"'{address}' is not an IP address; {usage}") from None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"'{port}' is not a port number (1-65535); {usage}")
    return role, address, int(port)


def _y4m_format(path: Path) -> dict[str, int]:
    """width, height and fps from a Y4M stream header (`YUV4MPEG2 W640 H480 F30:1 ...`)."""
    with open(path, "rb") as f:
        header = f.readline(256).decode("ascii", "replace").split()
    fields = {item[0]: item[1:] for item in header[1:] if item}
    try:
        if header[:1] != ["YUV4MPEG2"]:
            raise ValueError
        numerator, _, denominator = fields.get("F", "30:1").partition(":")
        return {"width": int(fields["W"]), "height": int(fields["H"]), "fps": round(int(numerator) / int(denominator or 1))}
    except (KeyError, ValueError, ZeroDivisionError):
        raise Failure(f"{path} is not a Y4M video; run `pantheon schemes setup webrtc` to make it again") from None


def _processes() -> dict[int, int]:
    """pid -> parent pid of every process."""
    parents = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
    return parents


def _tree(root: int) -> list[int]:
    """root and all its descendants."""
    children = collections.defaultdict(list)
    for pid, parent in _processes().items():
        children[parent].append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children[pid])
    return found


def _reap() -> None:
    """Collect every child that has ended (orphaned browser processes become our children)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def _remove_stale_profiles() -> None:
    """Profiles of wrappers that were killed before they could remove them: no wrapper holds their
    lock (`_owned_profile`)."""
    for path in Path(tempfile.gettempdir()).glob(f"{PROFILE_PREFIX}*"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # its wrapper is alive
        finally:
            os.close(fd)
        shutil.rmtree(path, ignore_errors=True)


def _owned_profile() -> tuple[Path, int]:
    """A fresh profile directory and a descriptor holding its lock. It is made under a name the
    stale-profile sweep ignores and renamed once locked, so the sweep of a wrapper starting at the
    same moment never finds it unlocked."""
    fresh = Path(tempfile.mkdtemp(prefix=f".{PROFILE_PREFIX}"))
    fd = os.open(fresh, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    profile = fresh.with_name(fresh.name[1:])
    fresh.rename(profile)
    return profile, fd


_LIBC = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _adopt_orphans() -> None:
    """Become the subreaper of the browser's processes, so that ones whose parent died are still
    our descendants and can be found and ended (prctl(2), PR_SET_CHILD_SUBREAPER)."""
    _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1)


class Browser:
    """A headless Chromium with its own temporary profile, showing one page. Its console lines
    go to this process's standard error; `failure` is set when the page reports a FATAL one."""

    def __init__(self, role: str, url: str, flags: list[str]) -> None:
        self.role = role
        self.failure: str | None = None
        self.tail: collections.deque[str] = collections.deque(maxlen=CHROMIUM_TAIL_LINES)
        self.profile, self._lock = _owned_profile()
        try:
            # Chromium's own temporary files (its singleton socket directory among them) go inside
            # the profile, so removing the profile removes them too.
            self.proc = subprocess.Popen(
                [str(CHROMIUM), *BROWSER_FLAGS, *flags, f"--user-data-dir={self.profile}", url],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                env={**os.environ, "TMPDIR": str(self.profile)}, preexec_fn=_die_with_parent)
        except OSError as e:
            self._remove_profile()
            raise Failure(f"cannot start {CHROMIUM}: {e}") from None
        threading.Thread(target=self._forward_console, daemon=True).start()

    def _forward_console(self) -> None:
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            match = CONSOLE_LINE.search(line)
            if not match:
                self.tail.append(line)
                continue
            message = match["message"]
            if message.startswith("FATAL "):
                self.failure = f"{self.role} page: {message[len('FATAL '):]}"
            else:
                print(message, file=sys.stderr, flush=True)

    def death(self, status: int) -> str:
        """Why the browser exited on its own: its last lines, then its fatal error on one line."""
        print("\n".join(self.tail), file=sys.stderr)
        fatal = [line for line in self.tail if ":FATAL:" in line]
        reason = fatal[-1].partition("] ")[2] if fatal else "see its last lines above"
        return f"chromium ({self.role}) exited on its own with status {status}: {reason}"

    def exited(self) -> int | None:
        return self.proc.poll()

    def stop(self) -> None:
        """Kill every process of the browser, wait until they are gone, remove the profile."""
        deadline = time.monotonic() + GONE_WAIT_S
        while (left := _tree(os.getpid())[1:]) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            _reap()
            time.sleep(0.01)
        self._remove_profile()

    def _remove_profile(self) -> None:
        shutil.rmtree(self.profile, ignore_errors=True)
        os.close(self._lock)


def _wait_for_server(url: str, stopping: threading.Event) -> bool:
    """True once the receiver's server answers; False if told to stop first."""
    deadline = time.monotonic() + SERVER_WAIT_S
    while not stopping.is_set():
        try:
            with urllib.request.urlopen(url, timeout=1):
                return True
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                raise Failure(f"no answer from the receiver's page server at {url} after {SERVER_WAIT_S:.0f} s") from None
            stopping.wait(0.2)
    return False


def run(role: str, address: str, port: int, stopping: threading.Event) -> None:
    if not CHROMIUM.exists():
        raise Failure(f"{CHROMIUM} is missing: run `pantheon schemes setup webrtc` (Debian package chromium)")
    _remove_stale_profiles()
    _adopt_orphans()
    base = f"http://{_url_host(address)}:{port}"
    # getUserMedia exists only in secure contexts (W3C Media Capture §9.2); the page server is
    # plain HTTP on a tunnel address, so that origin is declared secure.
    flags = [f"--unsafely-treat-insecure-origin-as-secure={base}"]
    server = None
    if role == "recv":
        try:
            server = SignallingServer((address, port), PAGE_DIR)  # listening from here on
        except OSError as e:
            raise Failure(f"cannot listen on {address}:{port}: {e.strerror}") from None
        url = f"{base}/receiver.html"
    else:
        if not VIDEO.exists():
            raise Failure(f"{VIDEO} is missing: run `pantheon schemes setup webrtc` to generate it")
        source = _y4m_format(VIDEO)
        if not _wait_for_server(f"{base}/sender.html", stopping):
            return
        url = f"{base}/sender.html?" + "&".join(f"{k}={v}" for k, v in source.items())
        flags += ["--use-fake-device-for-media-stream", f"--use-file-for-fake-video-capture={VIDEO}"]
    # The browser is forked before any other thread exists, so its pre-exec step runs safely.
    browser = Browser("receiver" if role == "recv" else "sender", url, flags)
    try:
        if server:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        while not stopping.wait(POLL_S):
            if browser.failure:
                raise Failure(browser.failure)
            status = browser.exited()
            if status is not None and not stopping.is_set():
                raise Failure(browser.death(status))
    finally:
        browser.stop()
        if server:
            server.server_close()


def main(argv: list[str]) -> int:
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    try:
        run(*_parse(argv), stopping)
    except Failure as e:
        say(str(e))
        return 2 if isinstance(e, UsageError) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
