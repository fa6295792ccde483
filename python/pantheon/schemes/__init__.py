"""The scheme registry: one TOML manifest per scheme (Yan et al., ATC 2018, §3.1.1: every scheme
exposes the same interface, a full-throttle flow that runs until it is killed).

A manifest names the scheme (display name, plot colour, description with citation, the exact
versions it runs), which side runs first, the receiver and sender command lines, and how to set it
up: Debian packages, build commands, and the files that exist once it is built. Placeholders:
{python} this environment's interpreter, {dir} the manifest's directory, {port} the scheme's port,
{local} this side's tunnel address, {peer} the other side's. docs/adding-a-scheme.md is the guide.

Manifests live in schemes/ and in the directories of $PANTHEON_SCHEMES_PATH (colon-separated; the
first manifest of a name wins). A manifest that does not parse is kept as a broken entry with its
reason, so one bad file never hides the other schemes.

`pantheon schemes` (list, setup, check) is cli.py, which this module does not import: the analysis
reads the registry and must not load the harness.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pantheon.errors import PantheonError
from pantheon.repository import ROOT

SCHEMES_DIR = ROOT / "schemes"
SETUP_LOGS = ROOT / ".setup-logs"
AVAILABLE_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
SIDES = ("receiver", "sender")
UDP_SENDER = "pantheon-udp"
"""The sender program of the schemes whose controller is crates/cc's (`pantheon-udp send --cc SPEC`)."""
KERNEL_TCP_ECN = "net.ipv4.tcp_ecn=1"
"""How kernel TCP negotiates ECN (ip-sysctl.rst: 1 requests it on outgoing connections and accepts
it on incoming ones); the sysctl is per network namespace, and the harness sets it only in a
flow's own (harness/launch.py), never the host's."""


def ecn_spec(spec: str) -> str:
    """A crates/cc spec with the flow's ECN on: `cubic` -> `cubic:ecn=1`, `copa:delta=0.5` ->
    `copa:delta=0.5,ecn=1`; a spec that says ecn already as it is. A controller that always uses
    ECN of its own (DCTCP, Prague: crates/cc's `scalable_ecn`) keeps its codepoint whatever the
    flow's option says (crates/cc/src/flow/controller.rs)."""
    _, _, params = spec.partition(":")
    if "ecn" in (item.split("=", 1)[0].strip() for item in params.split(",")):
        return spec
    return f"{spec}{',' if params else ':'}ecn=1"


class SchemeError(PantheonError):
    """A scheme name or manifest is not usable; the message says why and what to do."""


@dataclass(frozen=True)
class Setup:
    debian: tuple[str, ...] = ()
    """Debian packages the scheme needs."""
    tools: tuple[tuple[str, str], ...] = ()
    """(command, Debian package that provides it): the package is installed only when the command
    is not on PATH, so a tool that came another way (e.g. npm inside NodeSource's nodejs) is used."""
    commands: tuple[tuple[str, ...], ...] = ()
    """Build steps, run in order in the manifest's directory; each must be idempotent."""
    ready: tuple[str, ...] = ()
    """Files that exist once the build succeeded."""


@dataclass(frozen=True)
class Scheme:
    name: str
    display: str
    color: str
    description: str
    run_first: str
    receiver: tuple[str, ...]
    sender: tuple[str, ...]
    directory: Path
    versions: str = ""
    needs_kernel_cc: str | None = None
    needs_files: tuple[str, ...] = ()
    """Files the scheme cannot run without that no setup step makes (committed data: Indigo's trained
    weights); while one is missing the scheme is unavailable."""
    setup: Setup = field(default_factory=Setup)
    stand_in: str | None = None
    """A crates/cc scheme that models this one where only such schemes run (the simulator: the
    league runs kernel TCP Cubic as cubic-user, flagged as a stand-in); None where none does."""
    congestion_control: bool = True
    """False for a sender that is not a congestion controller (cbr's unresponsive cross traffic):
    the league leaves it out of "every scheme"."""
    check_runtime_s: float = 5.0
    """Length of the flow `pantheon schemes check` runs; longer only for schemes that take seconds to
    start (a browser), said why in the manifest."""

    def expand(self, part: str, **values: str) -> str:
        return part.format(python=sys.executable, dir=str(self.directory), **values)

    def command(self, side: str, *, port: int, ecn: bool = False, spec: str | None = None) -> list[str]:
        """The side's command line; `{local}` and `{peer}` stay for whoever knows the addresses.
        `spec`: a crates/cc spec replacing a pantheon-udp sender's own (a flow's `cc`: the cbr
        scheme's rate). `ecn`: a crates/cc sender's spec turns ECN on (ecn_spec); kernel TCP's
        sysctl is the launcher's to set (ecn_switch)."""
        template = self.receiver if side == "receiver" else self.sender
        command = [self.expand(part, port=str(port), local="{local}", peer="{peer}") for part in template]
        if side == "sender" and (own := self.cc_spec()) is not None:
            chosen = spec or own
            command[command.index("--cc") + 1] = ecn_spec(chosen) if ecn else chosen
        return command

    def cc_spec(self) -> str | None:
        """The crates/cc spec the sender runs (`copa:delta=0.5`), or None when the sender is not
        pantheon-udp with a controller."""
        sender = self.sender
        if not sender or Path(sender[0]).name != UDP_SENDER or "--cc" not in sender:
            return None
        at = sender.index("--cc")
        return sender[at + 1] if at + 1 < len(sender) else None

    def ecn_switch(self) -> str | None:
        """How a flow of this scheme negotiates ECN: "sysctl" (kernel TCP: KERNEL_TCP_ECN in the
        flow's namespaces), "spec" (a crates/cc controller: ecn=1 in its spec); None where it cannot
        be asked to (QUIC libraries, a browser, a scheme's own program)."""
        if self.cc_spec():
            return "spec"
        if self.needs_kernel_cc and "pantheon.kernel_tcp" in self.sender:
            return "sysctl"
        return None

    def transfer_mode(self) -> str | None:
        """How a flow of this scheme runs finite transfers (harness/transfers.py): "tcp" (kernel
        TCP, a connection per transfer), "udp" (pantheon-udp, `--bytes` per transfer); None where it
        cannot (QUIC libraries, a browser, a scheme's own program run bulk flows only)."""
        if self.cc_spec():
            return "udp"
        if self.needs_kernel_cc and "pantheon.kernel_tcp" in self.sender:
            return "tcp"
        return None

    def unavailable_reason(self) -> str | None:
        """Why this scheme cannot run on this machine whatever is installed, or None."""
        if self.needs_kernel_cc and self.needs_kernel_cc not in AVAILABLE_CC.read_text().split():
            return f"the kernel has no '{self.needs_kernel_cc}' congestion control (modprobe tcp_{self.needs_kernel_cc})"
        if absent := [f for f in (self.expand(n) for n in self.needs_files) if not Path(f).exists()]:
            return f"{os.path.normpath(absent[0])} is missing (no setup step makes it; see the scheme's description)"
        return None

    def missing_debian_packages(self) -> list[str]:
        missing = [p for p in self.setup.debian if not debian_package_installed(p)]
        return missing + [p for tool, p in self.setup.tools if shutil.which(tool) is None and p not in missing]

    def setup_reason(self) -> str | None:
        """What is missing before the scheme can run (run `pantheon schemes setup NAME`), or None."""
        if failed := setup_failure(self.name):
            return f"its last setup failed: {failed}"
        if missing := self.missing_debian_packages():
            return f"Debian package{'s' if len(missing) > 1 else ''} {', '.join(missing)} not installed"
        if absent := [f for f in (self.expand(r) for r in self.setup.ready) if not Path(f).exists()]:
            return f"not built ({absent[0]} is missing)"
        return None

    def status(self) -> tuple[str, str]:
        """('ready' | 'needs setup' | 'unavailable', why)."""
        if reason := self.unavailable_reason():
            return "unavailable", reason
        if reason := self.setup_reason():
            return "needs setup", reason
        return "ready", ""


@dataclass(frozen=True)
class Registry:
    schemes: dict[str, Scheme]
    broken: dict[str, str]
    """Manifest name -> why it could not be read."""

    def names(self) -> list[str]:
        return sorted({*self.schemes, *self.broken})

    def ecn_problem(self, name: str) -> str | None:
        """Why a flow of the named (sound) scheme cannot negotiate ECN, or None."""
        if self.schemes[name].ecn_switch() is None:
            return f"{name} cannot be asked to use ECN (kernel TCP and pantheon-udp schemes can: docs/harness.md)"
        return None

    def problem(self, name: str) -> str | None:
        """Why the named scheme cannot run now (unknown, broken, unavailable, not set up), or None."""
        if name in self.broken:
            return self.broken[name]
        if name not in self.schemes:
            return f"unknown scheme (known: {', '.join(self.names())})"
        kind, reason = self.schemes[name].status()
        if kind == "needs setup":
            return f"{reason}; run: pantheon schemes setup {name}"
        return reason or None


def debian_package_installed(package: str) -> bool:
    done = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    return done.returncode == 0 and "install ok installed" in done.stdout


def setup_failure(name: str) -> str | None:
    """The one-line reason of the scheme's last failed setup, if its last setup failed."""
    try:
        return (SETUP_LOGS / f"{name}.failed").read_text().strip() or None
    except FileNotFoundError:
        return None


def _strings(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SchemeError(f"{what} must be a list of strings")
    return tuple(value)


def _setup(data: object) -> Setup:
    if not isinstance(data, dict):
        raise SchemeError("[setup] must be a table")
    if unknown := set(data) - {"debian", "tools", "commands", "ready"}:
        raise SchemeError(f"[setup] has unknown key(s) {', '.join(sorted(unknown))} (known: debian, tools, commands, ready)")
    tools = data.get("tools", {})
    if not isinstance(tools, dict) or not all(isinstance(v, str) for v in tools.values()):
        raise SchemeError("setup.tools must be a table of command = \"Debian package\"")
    commands = data.get("commands", [])
    if not isinstance(commands, list):
        raise SchemeError("setup.commands must be a list of command lines (lists of strings)")
    return Setup(debian=_strings(data.get("debian", []), "setup.debian"), tools=tuple(tools.items()),
                 commands=tuple(_strings(c, "each of setup.commands") for c in commands),
                 ready=_strings(data.get("ready", []), "setup.ready"))


def load(path: Path) -> Scheme:
    """The scheme of one manifest; a SchemeError saying what is wrong with it otherwise."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise SchemeError(f"{path}: not a readable TOML manifest ({e})") from None
    try:
        missing = [k for k in ("name", "display", "color", "description", "run_first", "receiver", "sender") if k not in data]
        if missing:
            raise SchemeError(f"missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
        texts = {k: data[k] for k in ("name", "display", "color", "description", "run_first")}
        if bad := [k for k, v in texts.items() if not isinstance(v, str)]:
            raise SchemeError(f"{', '.join(bad)} must be text")
        scheme = Scheme(
            **texts, receiver=_strings(data["receiver"], "receiver"), sender=_strings(data["sender"], "sender"),
            directory=path.parent.resolve(), versions=str(data.get("versions", "")),
            needs_kernel_cc=data.get("needs_kernel_cc"), needs_files=_strings(data.get("needs_files", []), "needs_files"),
            setup=_setup(data.get("setup", {})),
            check_runtime_s=data.get("check_runtime_s", 5.0),
            stand_in=data.get("stand_in"), congestion_control=data.get("congestion_control", True),
        )
        if scheme.stand_in is not None and not isinstance(scheme.stand_in, str):
            raise SchemeError(f"stand_in must be a scheme's name, not {scheme.stand_in!r}")
        if not isinstance(scheme.congestion_control, bool):
            raise SchemeError(f"congestion_control must be true or false, not {scheme.congestion_control!r}")
        if not isinstance(scheme.check_runtime_s, (int, float)) or not 1 <= scheme.check_runtime_s <= 60:
            raise SchemeError(f"check_runtime_s must be a number of seconds in 1..60, not {scheme.check_runtime_s!r}")
        if scheme.run_first not in SIDES:
            raise SchemeError(f"run_first must be 'receiver' or 'sender', not '{scheme.run_first}'")
        if scheme.name != path.stem:
            raise SchemeError(f"name '{scheme.name}' differs from the file name")
        for part in (*scheme.receiver, *scheme.sender):
            scheme.expand(part, port="0", local="", peer="")
    except SchemeError as e:
        raise SchemeError(f"{path}: {e}; see docs/adding-a-scheme.md") from None
    except (KeyError, IndexError, ValueError) as e:
        raise SchemeError(f"{path}: a command uses an unknown placeholder ({e}); known: "
                          "{python} {dir} {port} {local} {peer}") from None
    return scheme


def _directories() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("PANTHEON_SCHEMES_PATH", "").split(":") if p]
    return [SCHEMES_DIR, *extra]


def registry() -> Registry:
    schemes: dict[str, Scheme] = {}
    broken: dict[str, str] = {}
    for directory in _directories():
        for path in sorted(directory.glob("*.toml")):
            if path.stem in schemes or path.stem in broken:
                continue
            try:
                schemes[path.stem] = load(path)
            except SchemeError as e:
                broken[path.stem] = f"broken manifest: {e}"
    return Registry(schemes, broken)


def all_schemes() -> dict[str, Scheme]:
    """Every scheme whose manifest is sound."""
    return registry().schemes


def lookup(names: list[str]) -> list[Scheme]:
    """The named schemes, in order; a SchemeError naming the unknown or broken ones otherwise."""
    known = registry()
    if problems := [f"{n}: {known.problem(n)}" for n in names if n not in known.schemes]:
        raise SchemeError("; ".join(problems))
    return [known.schemes[n] for n in names]


def run_setup(scheme: Scheme, log: Path) -> str | None:
    """Installs the scheme's Debian packages and runs its build commands, output to `log`; None on
    success, else the one-line reason (also kept, so `pantheon schemes list` shows it)."""
    failed_marker = SETUP_LOGS / f"{scheme.name}.failed"
    failed_marker.unlink(missing_ok=True)
    reason = _setup_steps(scheme, log)
    if reason:
        failed_marker.write_text(reason + "\n")
    return reason


def _setup_steps(scheme: Scheme, log: Path) -> str | None:
    with open(log, "w") as out:
        if missing := scheme.missing_debian_packages():
            if os.geteuid() != 0:
                return f"needs Debian packages {' '.join(missing)}: run as root (or apt-get install them)"
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            for step in (["apt-get", "update", "-qq"],
                         ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]):
                out.write(f"$ {' '.join(step)}\n")
                out.flush()
                if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, env=env).returncode != 0:
                    return f"{' '.join(step[:2])} failed for {' '.join(missing)} (see {log})"
        for template in scheme.setup.commands:
            step = [scheme.expand(part) for part in template]
            if shutil.which(step[0]) is None and not Path(step[0]).exists():
                return f"'{step[0]}' is not installed (needed by: {' '.join(step)})"
            out.write(f"$ {' '.join(step)}\n")
            out.flush()
            done = subprocess.run(step, cwd=scheme.directory, stdout=out, stderr=subprocess.STDOUT)
            if done.returncode != 0:
                return f"'{' '.join(step)}' exited with status {done.returncode} (see {log})"
    if absent := [f for f in (scheme.expand(r) for r in scheme.setup.ready) if not Path(f).exists()]:
        return f"setup ran but {absent[0]} is missing (see {log})"
    return None
