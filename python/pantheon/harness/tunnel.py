"""How the harness drives `pantheon-tunnel` (crates/tunnel; docs/tunnel.md): the command lines of
a flow's two endpoints, the logs they write, and the server's line telling how to connect."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pantheon.binaries import binary

CONNECT_LINE = re.compile(r"pantheon-tunnel client (?P<host>\S+):(?P<port>\d+) --token (?P<token>\S+)")


@dataclass(frozen=True)
class EndpointLogs:
    """The four logs of one endpoint: native (µs) and the original's text form, each way."""
    ingress: Path
    egress: Path
    ingress_text: Path
    egress_text: Path

    @classmethod
    def under(cls, directory: Path, stem: str) -> EndpointLogs:
        return cls(*(directory / f"{stem}.{kind}.log" for kind in ("ingress", "egress", "ingress.text", "egress.text")))

    def options(self) -> list[str]:
        return [
            "--ingress-log", str(self.ingress), "--egress-log", str(self.egress),
            "--ingress-text-log", str(self.ingress_text), "--egress-text-log", str(self.egress_text),
        ]


def server_command(logs: EndpointLogs, command: list[str]) -> list[str]:
    return [str(binary("pantheon-tunnel")), "server", *logs.options(), "--", *command]


def client_command(server_port: int, token: str, logs: EndpointLogs, command: list[str]) -> list[str]:
    """The client, run inside the emulated namespace, connecting out to the server at the
    emulator's peer address."""
    return [str(binary("pantheon-tunnel")), "client", f"$MAHIMAHI_BASE:{server_port}", "--token", token, *logs.options(), "--", *command]


def parse_connect_line(line: str) -> tuple[int, str]:
    """(port, token) from the server's first line of output; ValueError if it is not one."""
    match = CONNECT_LINE.search(line)
    if not match:
        raise ValueError(f"the tunnel server did not say how to connect (it printed {line.strip()!r})")
    return int(match["port"]), match["token"]
