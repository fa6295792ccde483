"""The runs of a data dir and how they were set up, in either of two layouts.

This harness's (docs/harness.md):  metadata.json; LABEL/runK/{run.json, records.parquet,
datalink.log, acklink.log}. In remote mode (docs/remote.md) metadata.json has a "remote" section
(the two hosts, which one sent) and each run.json a "clock" (the measured clock fit, whose bound
goes beside every one-way delay) and "flags". The original Pantheon's (Yan et al., ATC 2018, §3.2; its
`analyze` read these): pantheon_metadata.json; SCHEME_datalink_runK.log and SCHEME_acklink_runK.log
side by side, flows staggered by `interval` and all ending at `runtime`.

Scheme names become what a reader sees through the metadata (display names) and the scheme
manifests (plot colours, schemes/*.toml); a label that is neither (a scenario of mixed schemes,
or a scheme this checkout lacks) gets a colour of its own from a fixed palette.
"""
from __future__ import annotations

import contextlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from pantheon import queues
from pantheon import schemes as registry
from pantheon.analysis import LEGACY_HEAD_START_S, METADATA_FORMAT_VERSION
from pantheon.analysis.metrics import bound_text
from pantheon.errors import PantheonError

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
ORIGINAL_LOG = re.compile(r"^(?P<scheme>.+)_datalink_run(?P<run>\d+)\.log$")


class DataDirError(PantheonError):
    """Not a data dir this analysis can read; the message says what it expected."""


@dataclass(frozen=True)
class FlowPlan:
    """One flow as run.json plans it (plan.Flow): a bulk flow, or one carrying finite transfers
    (role "finite": one, "poisson": many), constant-rate traffic or latency probes (docs/harness.md).
    run.json written before workloads has neither role nor transfers: a bulk flow, no extra delay."""
    scheme: str
    start_s: float
    duration_s: float
    role: str = "bulk"
    """bulk | finite | poisson | onoff | cbr | probes."""
    transfers: tuple[tuple[float, int], ...] = ()
    """(planned start s, bytes) of each transfer, in plan order; empty for a flow without."""
    extra_delay_ms: float = 0.0
    """This flow's extra one-way delay each way, outside the shared bottleneck: its base RTT is
    2 (path delay + extra_delay_ms)."""
    cc: str | None = None
    """A crates/cc spec replacing the scheme's (cbr, probes): the flow ran pantheon-udp."""


@dataclass
class RunSource:
    label: str
    number: int
    records: Path | None
    """records.parquet, the exact per-packet records, where the run has them."""
    datalink: Path | None
    acklink: Path | None
    outputs: Path
    """Where this run's plots go."""
    plot_prefix: str
    runtime_s: float | None
    flows: list[FlowPlan]
    failures: list[str] = field(default_factory=list)
    clock: dict | None = None
    """run.json's "clock" in remote mode: the fit of the remote host's clock against the local one
    (pantheon.harness.clock.ClockFit.to_json); None where both ends shared one clock."""
    flags: list[str] = field(default_factory=list)
    """run.json's "flags": what the harness found wrong with the run's clocks (remote mode)."""
    transfers: Path | None = None
    """transfers.parquet, one row per planned transfer, where a flow of the run had transfers."""
    start_lateness_ms: list[float | None] = field(default_factory=list)
    """run.json's: per flow, how long after it was due the harness started it (empty before
    issue 35, and in simulated runs, where nothing is late)."""
    host_steal_pct: float | None = None
    """run.json's: the share of the harness host's CPU time a hypervisor stole while the flows ran
    (harness/steal.py); None where it was not measured."""

    @property
    def name(self) -> str:
        return f"{self.label} run {self.number}"

    @property
    def delay_bound_ms(self) -> float | None:
        """How far each one-way delay may be off because it spans two hosts' clocks, ms."""
        return self.clock["bound_us"] / 1000 if self.clock else None


@dataclass(frozen=True)
class SchemeLook:
    display: str
    color: str
    description: str = ""
    version: str = ""


@dataclass
class DataDir:
    path: Path
    layout: str
    """"harness" or "pantheon" (the original's)."""
    metadata: dict
    runs: list[RunSource]
    looks: dict[str, SchemeLook]
    setup: list[tuple[str, str]]
    """(what, value) rows describing the experiment, for the report."""
    head_start_s: float = LEGACY_HEAD_START_S
    """How long after a flow's first side its second side started (metadata.json's
    `head_start_s`): a flow's first packet is late only past this."""


def _manifest_colors() -> dict[str, str]:
    try:
        return {name: s.color for name, s in registry.all_schemes().items()}
    except registry.SchemeError:
        return {}


def _looks(labels: list[str], known: dict[str, dict]) -> dict[str, SchemeLook]:
    colors = _manifest_colors()
    taken = {colors[label] for label in labels if label in colors}
    spare = iter([c for c in PALETTE if c not in taken])
    looks: dict[str, SchemeLook] = {}
    for label in labels:
        meta = known.get(label, {})
        color = colors.get(label) or next(spare, PALETTE[len(looks) % len(PALETTE)])
        looks[label] = SchemeLook(meta.get("display", label), color, meta.get("description", ""), meta.get("version", ""))
    return looks


def read_json(path: Path) -> dict:
    """A JSON object from a file; a DataDirError naming the file when it is unreadable, not
    UTF-8, not JSON, or not an object."""
    try:
        value = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as e:
        raise DataDirError(f"{path} is unreadable ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise DataDirError(f"{path} is not text (byte {e.object[e.start]:#04x} at offset {e.start} is not UTF-8)") from None
    except json.JSONDecodeError as e:
        raise DataDirError(f"{path} is not JSON ({e})") from None
    if not isinstance(value, dict):
        raise DataDirError(f"{path} is not a JSON object (it holds a {type(value).__name__})")
    return value


def format_version(document: dict, path: Path, newest: int) -> int:
    """The `format_version` of a result file (1 where it has none: written before the key existed);
    a DataDirError in one line for a newer one than `newest`, or for a value that is no version."""
    version = document.get("format_version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= newest:
        raise DataDirError(f"{path} has format_version {version!r}; this pantheon reads versions 1 to {newest}: "
                           "read it with the pantheon that wrote it, or a newer one")
    return version


METADATA_TYPES: dict[str, type] = {
    "arguments": dict, "schemes": dict, "skipped_schemes": dict, "emulator_options": list, "trials": list,
    "machine": dict, "sysctls": dict, "remote": dict, "start_time": str, "pantheon_version": str, "git_commit": str,
}
"""The type of each key of metadata.json that the analysis reads (trials.py writes them)."""
REMOTE_TEXTS = ("host", "sender", "tunnel_server", "local_desc", "local_addr", "remote_desc", "remote_addr",
                "remote_pantheon_version", "remote_git_commit")
"""The keys of metadata.json's "remote" that the report prints as text (harness/remote.py writes them)."""


def _json_type(value: object) -> str:
    """A JSON value's kind, as its reader would say it."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "true or false", type(None): "null"}
    return names.get(type(value), "a number")


def _metadata_problem(metadata: dict) -> str | None:
    """What in metadata.json is not of the shape the analysis reads, in a few words; None if all is."""
    for key, kind in METADATA_TYPES.items():
        if key in metadata and not isinstance(metadata[key], kind):
            return f"{key} is {_json_type(metadata[key])}, not {_json_type(kind())}"
    if bad := next((name for name, entry in metadata.get("schemes", {}).items() if not isinstance(entry, dict)), None):
        return f"schemes.{bad} is {_json_type(metadata['schemes'][bad])}, not an object"
    if any(not isinstance(option, str) for option in metadata.get("emulator_options", [])):
        return "emulator_options holds something other than strings"
    for trial in metadata.get("trials", []):
        if not (isinstance(trial, dict) and isinstance(trial.get("label"), str) and isinstance(trial.get("repetition"), int)):
            return f"trials holds {json.dumps(trial)[:60]}, not an object with a string label and an integer repetition"
    remote = metadata.get("remote", {})
    if bad := next((key for key in REMOTE_TEXTS if not isinstance(remote.get(key, ""), str | None)), None):
        return f"remote.{bad} is {_json_type(remote[bad])}, not a string"
    if not isinstance(remote.get("remote_machine", {}), dict):
        return f"remote.remote_machine is {_json_type(remote['remote_machine'])}, not an object"
    return None


def _flows(info: dict) -> list[FlowPlan]:
    """run.json's flows, after its other keys' types are checked; a ValueError says what is wrong."""
    for key, kind in (("flows", list), ("failures", list), ("flags", list), ("clock", dict)):
        if key in info and not isinstance(info[key], kind) and not (key == "clock" and info[key] is None):
            raise ValueError(f"{key} is {_json_type(info[key])}, not {_json_type(kind())}")
    if isinstance(runtime := info.get("runtime_s"), bool) or not isinstance(runtime, int | float | None):
        raise ValueError(f"runtime_s is {_json_type(runtime)}, not a number")
    try:
        return [FlowPlan(str(f["scheme"]), float(f["start_s"]), float(f["duration_s"]), str(f.get("role", "bulk")),
                         tuple((float(t["start_s"]), int(t["bytes"])) for t in f.get("transfers", [])),
                         float(f.get("extra_delay_ms", 0.0)), None if f.get("cc") is None else str(f["cc"]))
                for f in info.get("flows", [])]
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ValueError("flows is not a list of objects with scheme, start_s and duration_s (and, where a flow "
                         "has them, transfers of start_s and bytes, a numeric extra_delay_ms)") from None


def _harness(path: Path) -> DataDir:
    try:
        metadata = read_json(path / "metadata.json")
    except DataDirError as e:
        raise DataDirError(f"{e}; is this a data dir of pantheon test?") from None
    version = format_version(metadata, path / "metadata.json", METADATA_FORMAT_VERSION)
    if problem := _metadata_problem(metadata):
        raise DataDirError(f"{path / 'metadata.json'}: {problem}; is it one that pantheon wrote?")
    head_start_s = metadata.get("head_start_s", LEGACY_HEAD_START_S) if version >= 2 else LEGACY_HEAD_START_S
    if isinstance(head_start_s, bool) or not isinstance(head_start_s, int | float) or not 0 <= head_start_s < math.inf:
        raise DataDirError(f"{path / 'metadata.json'}: head_start_s must be a number of seconds, not negative, "
                           f"got {head_start_s!r}")
    order = [(t["label"], t["repetition"]) for t in metadata.get("trials", [])]
    found = sorted((d.parent.name, int(d.name[3:])) for d in path.glob("*/run*") if d.is_dir() and d.name[3:].isdigit())
    runs = []
    for label, number in [*[o for o in order if o in found], *[f for f in found if f not in order]]:
        run_dir = path / label / f"run{number}"
        try:
            info = read_json(run_dir / "run.json")
        except DataDirError as e:
            info = {"ok": False, "failures": [f"the run did not finish: {e}"]}
        try:
            flows = _flows(info)
        except ValueError as e:
            info, flows = {"ok": False, "failures": [f"{run_dir / 'run.json'}: {e}"]}, []
        exists = lambda p: p if p.exists() else None  # noqa: E731
        runs.append(RunSource(
            label=label, number=number, records=exists(run_dir / "records.parquet"),
            datalink=exists(run_dir / "datalink.log"), acklink=exists(run_dir / "acklink.log"),
            outputs=run_dir, plot_prefix="", runtime_s=info.get("runtime_s"), flows=flows,
            failures=list(info.get("failures", [])) if not info.get("ok", False) else [],
            clock=info.get("clock"), flags=list(info.get("flags", [])), transfers=exists(run_dir / "transfers.parquet"),
            start_lateness_ms=_lateness(info.get("start_lateness_ms")), host_steal_pct=_number(info.get("host_steal_pct")),
        ))
    labels = list(dict.fromkeys(r.label for r in runs))
    return DataDir(path, "harness", metadata, runs, _looks(labels, metadata.get("schemes", {})), _harness_setup(path, metadata, runs),
                   float(head_start_s))


def _lateness(value: object) -> list[float | None]:
    """run.json's start_lateness_ms, where it is a list of numbers (or nulls); else nothing."""
    if not isinstance(value, list):
        return []
    return [_number(v) for v in value]


def _number(value: object) -> float | None:
    """A number of run.json as a float; None for anything else."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _machine(machine: dict) -> str:
    return (f"{machine.get('hostname', '?')}: Linux {machine.get('kernel', '?')}, "
            f"{machine.get('cpus', '?')} CPUs, Python {machine.get('python', '?')}")


def _remote_setup(metadata: dict, remote: dict, runs: list[RunSource]) -> list[tuple[str, str]]:
    """The rows saying the path was real (remote mode, docs/remote.md): between which hosts, which
    way the data flowed, and how well the clocks were measured."""
    def host(side: str, fallback: str) -> str:
        desc, addr = remote.get(f"{side}_desc") or fallback, remote.get(f"{side}_addr")
        return f"{desc} ({addr})" if addr else desc

    local = host("local", metadata.get("machine", {}).get("hostname", "the local host"))
    far = host("remote", remote.get("host", "the remote host"))
    sender, receiver = (local, far) if remote.get("sender") == "local" else (far, local)
    rows = [("Path", f"a real path between {local}, here, and {far}, reached over ssh"),
            ("Data flow", f"{sender} → {receiver} (the {remote.get('sender', '?')} host sent); "
                          f"tunnel server on the {remote.get('tunnel_server', '?')} host")]
    bounds = sorted(r.delay_bound_ms for r in runs if r.delay_bound_ms is not None)
    if bounds:
        low, high = bound_text(bounds[0]), bound_text(bounds[-1])
        span = f"{high} ms" if low == high else f"{low}–{high} ms"
        rows.append(("Clocks", f"measured over the path in each run (docs/clocks.md): one-way delays are within "
                               f"± {span} of the truth (the runs' bounds)"))
    return rows


def _harness_setup(path: Path, metadata: dict, runs: list[RunSource]) -> list[tuple[str, str]]:
    arguments = metadata.get("arguments", {})
    options = metadata.get("emulator_options", [])
    remote = metadata.get("remote")
    rows = []
    if arguments.get("emulator"):
        rows.append(("Path", f"Pantheon's {arguments['emulator']} emulator"))
    if remote is not None:
        rows += _remote_setup(metadata, remote, runs)
    if options or remote is None:
        rows.append(("Emulator options", " ".join(options) or "defaults (12 Mbit/s each way, no delay, infinite queue)"))
        if any(queues.Queue.of(options, d).aqm for d in queues.DIRECTIONS):
            rows.append(("Queues", queues.describe(options)))
    if arguments.get("ecn"):
        rows.append(("ECN", "every flow negotiated ECN (--ecn)"))
    schemes = metadata.get("schemes", {})
    rows.append(("Schemes", "; ".join(f"{v.get('display', k)} ({', '.join(filter(None, (k, v.get('version'))))})"
                                      for k, v in schemes.items())))
    if arguments.get("scenario"):
        rows.append(("Scenario", str(arguments["scenario"])))
    else:
        interval = arguments.get("interval", 0)
        flows = arguments.get("flows", 1)
        rows.append(("Flows per run", f"{flows}" + (f", started {interval:g} s apart" if flows > 1 and interval else "")))
    order = f"random order (seed {arguments.get('seed')})" if arguments.get("random_order") else "in the order given"
    runtime = arguments.get("runtime")
    per_scheme = f"{arguments.get('run_times', '?')} per scheme" + (f" of {runtime:g} s" if isinstance(runtime, (int, float)) else "")
    rows.append(("Runs", f"{per_scheme}, {order}; {len(runs)} in all"))
    if machine := metadata.get("machine"):
        rows.append(("Machine", _machine(machine)))
    if "pantheon_version" in metadata:
        rows.append(("Pantheon", f"{metadata['pantheon_version']}, commit {str(metadata.get('git_commit', '?'))[:12]}"))
    if machine := (remote or {}).get("remote_machine"):
        rows.append(("Remote machine", _machine(machine)))
    if remote and "remote_pantheon_version" in remote:
        rows.append(("Remote Pantheon", f"{remote['remote_pantheon_version']}, "
                                        f"commit {str(remote.get('remote_git_commit', '?'))[:12]}"))
    if "start_time" in metadata:
        rows.append(("Started", metadata["start_time"]))
    rows.append(("Data", str(path.resolve())))
    return rows


def _pantheon(path: Path) -> DataDir:
    metadata: dict = {}
    meta_path = path / "pantheon_metadata.json"
    if meta_path.exists():
        metadata = read_json(meta_path)
    try:
        runtime = float(metadata["runtime"]) if "runtime" in metadata else None
        flow_count = int(metadata.get("flows", 1))
        interval = float(metadata.get("interval", 0))
    except (TypeError, ValueError):
        raise DataDirError(f"{meta_path}: runtime, flows and interval must be numbers") from None
    runs = []
    for log in sorted(path.glob("*_datalink_run*.log")):
        m = ORIGINAL_LOG.match(log.name)
        if not m:
            continue
        scheme, number = m["scheme"], int(m["run"])
        ack = path / f"{scheme}_acklink_run{number}.log"
        flows = [FlowPlan(scheme, i * interval, runtime - i * interval) for i in range(flow_count)] if runtime else []
        runs.append(RunSource(label=scheme, number=number, records=None, datalink=log, acklink=ack if ack.exists() else None,
                              outputs=path, plot_prefix=f"{scheme}_run{number}_", runtime_s=runtime, flows=flows))
    runs.sort(key=lambda r: (r.number, r.label))
    labels = list(dict.fromkeys(r.label for r in runs))
    known = {}
    with contextlib.suppress(registry.SchemeError):
        known = {n: {"display": s.display, "description": s.description} for n, s in registry.all_schemes().items()}
    setup = [(str(k).replace("_", " ").capitalize(), json.dumps(v) if isinstance(v, (dict, list)) else str(v))
             for k, v in metadata.items()]
    setup.append(("Data", str(path.resolve())))
    return DataDir(path, "pantheon", metadata, runs, _looks(labels, known), setup)


def open_data_dir(path: Path) -> DataDir:
    """The runs of a data dir; a DataDirError saying what was expected when it is neither layout."""
    path = Path(path)
    if not path.is_dir():
        raise DataDirError(f"{path} is not a directory (give the --data-dir of a pantheon test, or an original Pantheon data dir)")
    if (path / "metadata.json").exists():
        data = _harness(path)
    elif (path / "pantheon_metadata.json").exists() or any(path.glob("*_datalink_run*.log")):
        data = _pantheon(path)
    else:
        raise DataDirError(f"{path} holds neither metadata.json (pantheon test) nor *_datalink_runN.log (original Pantheon)")
    if not data.runs:
        raise DataDirError(f"{path} holds no runs yet")
    return data
