"""How the harness drives `pantheon-tunnel` (crates/tunnel; docs/tunnel.md): the command lines of
a flow's two endpoints, the logs they write, the session key they share, the server's line telling
how to connect and the endpoints' exit line counting the datagrams they refused.

The key never appears on a command line or in a file others can read: `write_session_key` creates
the file (O_EXCL, mode 0600) and only its path is passed."""
from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from pantheon.binaries import binary

CONNECT_LINE = re.compile(r"^pantheon-tunnel client (?P<host>\S+):(?P<port>\d+)$")
DROPPED_LINE = re.compile(r"^pantheon-tunnel: dropped (?P<count>\d+) datagrams", re.MULTILINE)
KEY_BYTES = 32


@dataclass(frozen=True)
class EndpointLogs:
    """The logs of one endpoint: native (µs) and the original's text form, each way, and, where the
    two endpoints read different clocks (remote mode), its clock exchanges with the peer
    (`t1_us t2_us t3_us t4_us` lines, those it initiated). Local mode asks for no clock log: both
    endpoints read one clock, and without one the endpoints send no probes across the emulated
    path, whose link logs then hold the schemes' datagrams alone."""
    ingress: Path
    egress: Path
    ingress_text: Path
    egress_text: Path
    clock: Path | None

    @classmethod
    def under(cls, directory: Path, stem: str, *, clock: bool) -> EndpointLogs:
        def log(kind: str) -> Path:
            return directory / f"{stem}.{kind}.log"

        return cls(log("ingress"), log("egress"), log("ingress.text"), log("egress.text"), log("clock") if clock else None)

    def options(self) -> list[str]:
        return [
            "--ingress-log", str(self.ingress), "--egress-log", str(self.egress),
            "--ingress-text-log", str(self.ingress_text), "--egress-text-log", str(self.egress_text),
            *(["--clock-log", str(self.clock)] if self.clock else []),
        ]


def write_session_key(path: Path) -> Path:
    """A fresh session key in a new file at `path` that only its owner can read; FileExistsError if
    something is there already (never reuse, never follow a planted link)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(KEY_BYTES) + "\n")
    return path


def server_command(logs: EndpointLogs, key_file: Path, command: list[str], listen: str | None = None) -> list[str]:
    """The server endpoint; `listen` is its IP:PORT (default: every address, a free port)."""
    where = ["--listen", listen] if listen else []
    return [str(binary("pantheon-tunnel")), "server", *where, "--key-file", str(key_file), *logs.options(), "--", *command]


def client_command(server: str, key_file: Path, logs: EndpointLogs, command: list[str],
                   extra_delay_ms: float = 0.0) -> list[str]:
    """The client endpoint, connecting out to `server` ("HOST:PORT"; local mode passes
    "$MAHIMAHI_BASE:PORT", which its agent expands inside the emulated namespace).
    `extra_delay_ms`: the flow's own extra one-way delay, each direction, which the client holds
    its outer datagrams for (outside the emulator's shared bottleneck: docs/tunnel.md)."""
    delay = ["--extra-delay-ms", repr(float(extra_delay_ms))] if extra_delay_ms else []
    return [str(binary("pantheon-tunnel")), "client", server, "--key-file", str(key_file), *logs.options(), *delay,
            "--", *command]


def parse_connect_line(line: str) -> tuple[str, int]:
    """(host, port) from the server's first line of output; ValueError if it is not one."""
    match = CONNECT_LINE.match(line.strip())
    if not match:
        raise ValueError(f"the tunnel server did not say how to connect (it printed {line.strip()!r})")
    return match["host"], int(match["port"])


def dropped_datagrams(output: str) -> int | None:
    """How many datagrams an endpoint refused (bad tag, replayed, from a stranger, ...), from its
    exit line in `output`; None if it has none (it did not exit normally)."""
    match = DROPPED_LINE.search(output)
    return int(match["count"]) if match else None
