"""The pantheon-sim binary (crates/sim, docs/sim.md) as Python sees it: its command lines, the JSON
line it prints, its one-line errors, and how its processes are tied to ours.

pantheon-sim is the virtual-time driver of docs/architecture.md's two ideas: pantheon-emu's link model and
pantheon-udp's crates/cc controllers under a discrete-event clock. Its path options are
pantheon-emu's, parsed by the same Rust code, so a bad option gets the emulator's message word for
word; a user mistake is exit status 2 and one line `pantheon-sim: ...` on stderr.

A flow on its command line is `--flow SPEC@START_S+DURATION_S`; the i-th one is flow i-1 in the
records and, with --text-logs, in the names of the logs flow{i-1}.*, as the harness numbers them. Times are written with repr() so that no digit of a start or
duration is rounded away.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import signal
import subprocess
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pantheon.binaries import binary
from pantheon.errors import PantheonError
from pantheon.repository import ROOT

PROGRAM = "pantheon-sim"
PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a process gets when its parent dies."""


class SimError(PantheonError):
    """pantheon-sim refused its input; the message is its own line without the program's prefix."""


@dataclass(frozen=True)
class FlowArg:
    cc: str
    """A crates/cc spec, e.g. `copa:delta=0.5`."""
    start_s: float = 0.0
    duration_s: float | None = None
    """None: until the end of the run."""

    def argument(self) -> str:
        duration = "" if self.duration_s is None else f"+{float(self.duration_s)!r}"
        return f"{self.cc}@{float(self.start_s)!r}{duration}"


@dataclass(frozen=True)
class SenderRow:
    """One row of `pantheon-sim run --flows-file`: a bulk flow's sender, or one transfer of a flow
    with transfers (several rows share their `flow` number, cc and extra delay)."""

    flow: int
    """The records' flow number, from 0."""
    cc: str
    start_s: float
    duration_s: float | None
    """None: until the end of the run."""
    bytes: int | None = None
    """None: a bulk sender."""
    extra_delay_ms: float = 0.0


FLOWS_FILE_HEADER = "flow,cc,start_s,duration_s,bytes,extra_delay_ms"


def write_flows_file(path: Path, rows: Sequence[SenderRow]) -> Path:
    """The CSV pantheon-sim reads with --flows-file (crates/sim/src/scenario.rs): times with repr(),
    so no digit is rounded away. A crates/cc spec has no comma but between its parameters, so the
    spec is quoted."""
    def cell(value: float | int | None) -> str:
        return "" if value is None else repr(value)

    lines = [FLOWS_FILE_HEADER, *(f'{r.flow},"{r.cc}",{cell(float(r.start_s))},'
                                  f'{cell(None if r.duration_s is None else float(r.duration_s))},{cell(r.bytes)},'
                                  f'{cell(float(r.extra_delay_ms))}' for r in rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_command(out_dir: Path, flows: Sequence[FlowArg] | Path, path_options: Sequence[str], runtime_s: float,
                seed: int, text_logs: bool = False, link_phase_us: int | None = None,
                exact_starts: bool = False) -> list[str]:
    """`pantheon-sim run`: records.parquet, datalink.log and acklink.log in out_dir (and
    transfers.parquet where flows have transfers), and with text_logs the tunnel's and the
    emulator's own logs too. `flows`: `--flow` arguments, or a flows file (write_flows_file).
    `link_phase_us`: how far the link's delivery schedule runs ahead of the flows' clock (default:
    the emulator's lead, 1.13-1.24 s drawn from the seed: crates/sim/src/link_clock.rs).
    `exact_starts`: every flow starts at its planned instant, not as late as the hosts start it
    (crates/sim/src/host.rs)."""
    if isinstance(flows, Path):
        flow_args = ["--flows-file", str(flows)]
    else:
        flow_args = [arg for f in flows for arg in ("--flow", f.argument())]
    phase = ["--link-phase-us", str(link_phase_us)] if link_phase_us is not None else []
    return [str(binary(PROGRAM)), "run", "--out", str(out_dir), "--seed", str(seed), "--runtime-s", repr(float(runtime_s)),
            *(["--text-logs"] if text_logs else []), *(["--exact-starts"] if exact_starts else []), *phase,
            *flow_args, *path_options]


def message(stderr: str) -> str:
    """pantheon-sim's one-line error, without its prefix (the caller adds its own)."""
    lines = stderr.strip().splitlines()
    return lines[-1].removeprefix(f"{PROGRAM}: ") if lines else ""


def die_with_parent() -> None:
    """Asks the kernel to SIGKILL this process when its parent dies (prctl PR_SET_PDEATHSIG), so a
    SIGKILLed `pantheon sim` leaves no simulator or worker running. Safe in a child before exec."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _child_setup() -> None:
    # The campaign's workers ignore SIGINT (their parent decides what Ctrl-C ends); the simulator
    # takes the default again, so Ctrl-C at the terminal stops it at once.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    die_with_parent()


def spawn(argv: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """Starts pantheon-sim tied to this process: it dies with it, and Ctrl-C reaches it."""
    return subprocess.Popen(argv, preexec_fn=_child_setup, **popen)  # noqa: PLW1509 - only async-signal-safe calls


def check_path_options(path_options: Sequence[str], seed: int) -> None:
    """Lets the simulator judge the path options once, on a 1 ms run, so a bad value stops a
    campaign before it starts, with the emulator's own message (a SimError)."""
    with tempfile.TemporaryDirectory(prefix="pantheon-sim-check-") as scratch:
        argv = run_command(Path(scratch), [FlowArg("cubic")], path_options, runtime_s=0.001, seed=seed)
        done = subprocess.run(argv, capture_output=True, text=True, preexec_fn=die_with_parent)  # noqa: PLW1509
    if done.returncode != 0:
        raise SimError(message(done.stderr) or f"{PROGRAM} exited with status {done.returncode}")


def version() -> dict:
    """Which simulator ran: the workspace's version (pantheon-sim has no --version) and the
    binary's SHA-256, which tells two builds of one version apart."""
    workspace = tomllib.loads((ROOT / "Cargo.toml").read_text()).get("workspace", {}).get("package", {})
    digest = hashlib.sha256(binary(PROGRAM).read_bytes()).hexdigest()
    return {"version": str(workspace.get("version", "unknown")), "binary_sha256": digest}


def parse_report(stdout: str) -> dict:
    """The JSON line a run prints: {"events", "wall_s", "sim_s", "flows": [...]}."""
    lines = stdout.strip().splitlines()
    if not lines:
        raise ValueError(f"{PROGRAM} printed no report")
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as e:
        raise ValueError(f"{PROGRAM} printed a report that is not JSON ({e}): {lines[-1][:200]}") from None
