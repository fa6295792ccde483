"""The scheme registry: one TOML manifest per scheme under schemes/ (name, display name, plot
colour, description with citation, which side runs first, and the receiver and sender command
lines). Placeholders in commands: {python} this environment's interpreter, {port} the scheme's
port, {local} this side's tunnel address, {peer} the other side's tunnel address."""
from __future__ import annotations

import os
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

SCHEMES_DIR = Path(__file__).resolve().parents[2] / "schemes"
AVAILABLE_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


class SchemeError(ValueError):
    """A scheme name or manifest is not usable; the message says why and what to do."""


@dataclass(frozen=True)
class Scheme:
    name: str
    display: str
    color: str
    description: str
    run_first: str
    receiver: tuple[str, ...]
    sender: tuple[str, ...]
    needs_kernel_cc: str | None = None

    def command(self, side: str, *, port: int) -> list[str]:
        """The side's command line; `{local}` and `{peer}` stay for whoever knows the addresses."""
        template = self.receiver if side == "receiver" else self.sender
        values = {"python": sys.executable, "port": str(port), "local": "{local}", "peer": "{peer}"}
        return [part.format(**values) for part in template]

    def unavailable_reason(self) -> str | None:
        """Why this scheme cannot run on this machine, or None."""
        if self.needs_kernel_cc and self.needs_kernel_cc not in AVAILABLE_CC.read_text().split():
            return f"the kernel has no '{self.needs_kernel_cc}' congestion control (modprobe tcp_{self.needs_kernel_cc})"
        return None


def _load(path: Path) -> Scheme:
    try:
        data = tomllib.loads(path.read_text())
        scheme = Scheme(
            name=data["name"], display=data["display"], color=data["color"], description=data["description"],
            run_first=data["run_first"], receiver=tuple(data["receiver"]), sender=tuple(data["sender"]),
            needs_kernel_cc=data.get("needs_kernel_cc"),
        )
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as e:
        raise SchemeError(f"{path}: broken manifest ({type(e).__name__}: {e}); see an existing one in {SCHEMES_DIR}") from None
    if scheme.run_first not in ("receiver", "sender"):
        raise SchemeError(f"{path}: run_first must be 'receiver' or 'sender', not '{scheme.run_first}'")
    if scheme.name != path.stem:
        raise SchemeError(f"{path}: name '{scheme.name}' differs from the file name")
    return scheme


def _directories() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("PANTHEON_SCHEMES_PATH", "").split(":") if p]
    return [SCHEMES_DIR, *extra]


def all_schemes() -> dict[str, Scheme]:
    found: dict[str, Scheme] = {}
    for directory in _directories():
        for path in sorted(directory.glob("*.toml")):
            found.setdefault(path.stem, _load(path))
    return found


def lookup(names: list[str]) -> list[Scheme]:
    """The named schemes, in order; a SchemeError naming the unknown ones otherwise."""
    known = all_schemes()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SchemeError(f"unknown scheme{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in names]
