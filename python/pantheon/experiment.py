"""What an experiment command asks for, declared once for every command that runs one.

`pantheon test local` (over the emulator) and `pantheon sim` (in the simulator) take the same
options: which schemes (or a scenario), how many runs of how long with how many flows, the seed,
the data dir, and the path (an `--emulator NAME` preset and the emulator's own options, listed in
`--help`). `pantheon test remote` takes the scheme, run and output options; its path is a real one
(no emulator, no path options). The options become an `Experiment`, and the one place
that expands them is here: presets merged with the user's path options, scheme names or a
scenario file turned into run plans, and what is skipped and why.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pantheon import files, presets, queues
from pantheon import plan as plans
from pantheon.errors import PantheonError

_DIRECTION_OPTIONS = (
    ("rate", "MBPS", "{d} constant rate in Mbit/s, or 'unlimited' (default 12)"),
    ("trace", "FILE", "{d} Mahimahi trace: one line per 1500-byte delivery opportunity, in ms; loops"),
    ("poisson", "MBPS", "{d} Poisson deliveries at this mean rate in Mbit/s"),
    ("queue", "KIND", "{d} queue discipline: droptail (needs a limit), infinite (default), or an AQM: codel, pie, "
     "fq-codel, red, dualpi2 (docs/emulator.md)"),
    ("queue-packets", "N", "{d} queue limit in packets"),
    ("queue-bytes", "N", "{d} queue limit in bytes"),
    ("queue-args", "ARGS", "{d} queue parameters in Mahimahi's form, e.g. packets=1000,target=5,interval=100 "
     "(ms; each AQM's keys in docs/emulator.md)"),
    ("loss", "P", "{d} i.i.d. loss probability in [0, 1] (default 0)"),
    ("policer", "MBPS,BYTES", "{d} token-bucket policer: rate in Mbit/s and bucket depth in bytes"),
)
PATH_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("--delay", "MS", "one-way propagation delay in ms, each direction (fractions allowed; default 0)"),
    *((f"--{d}-{name}", metavar, text.format(d=d)) for d in ("uplink", "downlink") for name, metavar, text in _DIRECTION_OPTIONS),
    ("--timing", "CLOCK", "the path model's clock: us (exact; the default) or mahimahi (Mahimahi's whole "
     "milliseconds; presets use it)"),
)
"""The emulator's path options (flag, metavar, help): pantheon-emu's and pantheon-sim's, which parse
them with the same Rust code and judge their values; the tests check this list against
`pantheon-emu --help`. The logs' options are the harness's to set, so they are not here."""

HOST_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("--stalls", "N,MS", "hold the emulator's writes back as a stalling host would: N stalls a second, MS ms long "
     "on average (default none; for comparisons with Mahimahi on a loaded host, docs/emulator.md)"),
)
"""pantheon-emu's options that model the host, not the path: `pantheon test local` takes them,
`pantheon sim` (whose hosts are its own model, docs/sim.md) does not."""


MAX_RUN_TIMES = 1000
"""Most repetitions of each scheme in one campaign (1000 runs of 30 s are over 8 hours a scheme;
every run's plan is made up front, so 10^9 would exhaust memory before the first)."""


class _PathOption(argparse.Action):
    """Collects the path options as `--flag value` pairs in the order given, the order the
    emulator reads them and metadata.json records them."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        namespace.path_options = [*namespace.path_options, self.option_strings[0], values]


def add_scheme_options(parser: argparse.ArgumentParser, schemes_help: str, all_help: str) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--schemes", help=schemes_help)
    which.add_argument("--all", action="store_true", help=all_help)
    which.add_argument("--scenario", type=Path, help="TOML file of flows {scheme, start_s, duration_s}, schemes mixed")


def add_run_options(parser: argparse.ArgumentParser, *, clock: str, run_times_help: str, seed_help: str) -> None:
    """`clock` says whose seconds a run lasts ("" for the wall clock, "simulated " in the simulator)."""
    parser.add_argument("--run-times", type=int, default=1, help=run_times_help)
    parser.add_argument("--runtime", type=float, default=30.0, help=f"{clock}seconds each run lasts (default 30)")
    parser.add_argument("--flows", type=int, default=1, help="flows per run (default 1)")
    parser.add_argument("--interval", type=float, default=0.0, help=f"{clock}seconds between flow starts (default 0)")
    parser.add_argument("--seed", type=int, default=0, help=seed_help)
    parser.add_argument("--ecn", action="store_true",
                        help="every flow negotiates ECN (RFC 3168): kernel TCP with net.ipv4.tcp_ecn=1 in the flow's own "
                        "namespaces, pantheon-udp controllers with ecn=1; DCTCP and Prague always do (a scenario's flows "
                        "say it one by one: ecn = true)")


def seed_of(base_seed: int, repetition: int) -> int:
    """The seed of run `repetition` (from 1) of every label: `--seed + K - 1`, so a scheme's
    repetitions see different random losses and Poisson deliveries (independent draws), the
    schemes' run K see the same ones (common random numbers sharpen a paired comparison), and the
    whole campaign is reproducible. The emulated and the simulated campaigns both use it."""
    return base_seed + repetition - 1


def add_output_options(parser: argparse.ArgumentParser, default_dir: str) -> None:
    parser.add_argument("--data-dir", type=Path, help=f"where results go (default data/{default_dir}-DATE-TIME)")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument("--no-analyze", action="store_true", help="skip the analysis at the end (pantheon analyze DATA_DIR)")


def add_path_options(parser: argparse.ArgumentParser, *, host: bool = False) -> None:
    """The path options, and with `host` the emulator's HOST_OPTIONS."""
    path = parser.add_argument_group(
        "emulated path", "Default: 12 Mbit/s each way, no delay, infinite queue. --emulator NAME starts from one of "
        "Pantheon's paths (pantheon emulators), --emulator FILE.toml from a preset file (pantheon calibrate writes "
        "them); the options below replace its values for what they set.")
    path.add_argument("--emulator", metavar="NAME|FILE", help="one of Pantheon's emulated paths (pantheon emulators), "
                      "or a preset file's path (FILE.toml, presets.py)")
    for flag, metavar, text in (*PATH_OPTIONS, *(HOST_OPTIONS if host else ())):
        path.add_argument(flag, action=_PathOption, dest="path_options", default=[], metavar=metavar, help=text)


def _delivery(values: dict[str, str], d: str) -> str:
    """A direction's delivery, loss and policer, in words."""
    if trace := values.get(f"--{d}-trace"):
        rate = f"trace {Path(trace).name}"
    elif poisson := values.get(f"--{d}-poisson"):
        rate = f"Poisson {poisson} Mbit/s"
    else:
        given = values.get(f"--{d}-rate", "12")
        rate = "unlimited rate" if given == "unlimited" else f"{given} Mbit/s"
    if loss := values.get(f"--{d}-loss"):
        rate += f", loss {loss}"
    if policer := values.get(f"--{d}-policer"):
        rate += f", policer {policer} (Mbit/s, bytes)"
    return rate


def describe_path(options: list[str], emulator: str | None = None) -> str:
    """The emulated path in one line, from its options (`--flag value` pairs, a preset's merged
    with the user's: expanded_path_options): what `test local` and `sim` print as they start, e.g.
    "12 Mbit/s each way, 0 ms, infinite queues (the default; ...)", "50 Mbit/s each way, 10 ms,
    FQ-CoDel queues of 1000 packets (target=5,interval=100)"."""
    values = queues.options_dict(options)
    up, down = _delivery(values, "uplink"), _delivery(values, "downlink")
    rates = f"{up} each way" if up == down else f"uplink {up}, downlink {down}"
    line = f"{rates}, {values.get('--delay', '0')} ms, {queues.describe(values)}"
    if values.get("--timing") == "mahimahi":
        line += ", Mahimahi's millisecond timing"
    if emulator:
        return f"{emulator}: {line}"
    if not options:
        return f"{line} (the default; --emulator NAME or the path options to change it)"
    return line


MAX_TRACE_BYTES = 256 << 20
"""A Mahimahi trace of a day at 100 Mbit/s is ~60 MB; reading more (/dev/zero) is not reading a trace."""


def uplink_rate_mbps(options: list[str]) -> float | None:
    """The uplink's mean delivery rate in Mbit/s, which a workload's load is a fraction of: its
    constant rate (12 by default), its Poisson mean, or its trace's mean (a 1500-byte opportunity
    per line over the trace's period, as the emulator loops it); None when it is unlimited or the
    trace cannot be read (the emulator's own check says why)."""
    values = queues.options_dict(options)
    try:
        if trace := values.get("--uplink-trace"):
            stamps_ms = [int(line) for line in files.read_small_text(Path(trace), MAX_TRACE_BYTES).split()]
            return len(stamps_ms) * 1500 * 8 / (stamps_ms[-1] * 1e3) if stamps_ms and stamps_ms[-1] > 0 else None
        if poisson := values.get("--uplink-poisson"):
            return float(poisson)
        rate = values.get("--uplink-rate", "12")
        return None if rate == "unlimited" else float(rate)
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Selection:
    plans: list[plans.Plan]
    skipped: dict[str, str]
    """Scheme name -> why it is not run."""
    not_run: list[str]
    """The skipped schemes the user asked for by name (a skip under --all of a scheme this machine
    cannot run is expected; these are not), which make the exit status 1."""


@dataclass(frozen=True)
class Experiment:
    schemes: tuple[str, ...]
    """The schemes asked for by name; empty with `all_schemes` or a `scenario`."""
    all_schemes: bool
    scenario: Path | None
    run_times: int
    runtime_s: float
    flows: int
    interval_s: float
    seed: int
    data_dir: Path
    emulator: str | None
    """A built-in preset's name or a preset file's path (presets.py), or None."""
    path_options: tuple[str, ...]
    """The user's own path options, `--flag value` pairs; they replace the preset's."""
    quiet: bool = False
    ecn: bool = False
    """Every flow negotiates ECN (`--ecn`), a scenario's too."""
    pairs: bool = False
    """Every pair of the schemes shares the path, each scheme with itself too (`pantheon harm`),
    instead of each scheme alone."""

    def __post_init__(self) -> None:
        if not 1 <= self.run_times <= MAX_RUN_TIMES:
            raise PantheonError(f"--run-times must be from 1 to {MAX_RUN_TIMES}, got {self.run_times}")

    @classmethod
    def from_args(cls, args: argparse.Namespace, default_dir: str) -> Experiment:
        data_dir = args.data_dir or Path("data") / datetime.now().strftime(f"{default_dir}-%Y%m%d-%H%M%S")
        return cls(schemes=tuple(s for s in (args.schemes or "").split(",") if s), all_schemes=args.all,
                   scenario=args.scenario, run_times=args.run_times, runtime_s=args.runtime, flows=args.flows,
                   interval_s=args.interval, seed=args.seed, data_dir=data_dir, emulator=args.emulator,
                   path_options=tuple(args.path_options), quiet=args.quiet, ecn=args.ecn)

    def arguments(self, **command: object) -> dict:
        """The record of what was asked, for metadata.json, under the command line's names (the
        analysis reads them, from old data dirs too); `command` adds the command's own."""
        return {"schemes": ",".join(self.schemes) or None, "all": self.all_schemes,
                "scenario": str(self.scenario) if self.scenario else None, "run_times": self.run_times,
                "runtime": self.runtime_s, "flows": self.flows, "interval": self.interval_s, "seed": self.seed,
                "data_dir": str(self.data_dir), "emulator": self.emulator, "path_options": list(self.path_options),
                "quiet": self.quiet, "ecn": self.ecn, **command}

    def expanded_path_options(self) -> list[str]:
        """The path's options: the preset's (its trace files written under the data dir), less those
        the user set again, then the user's."""
        if not self.emulator:
            return list(self.path_options)
        preset = presets.lookup(self.emulator)
        traces = self.data_dir / "traces"
        traces.mkdir(parents=True, exist_ok=True)
        return presets.merge(preset.options(traces), list(self.path_options))

    def select(self, *, every: list[str], problem: Callable[[str], str | None], verb: str,
               skip_line: str, expected_skip: Callable[[str], bool],
               ecn_problem: Callable[[str], str | None] | None = None, rate_mbps: float | None = None) -> Selection:
        """The runs' plans. `every` is what --all means, `problem(name)` why a scheme cannot `verb`
        here (or None), `ecn_problem(name)` why a flow of it cannot negotiate ECN (None: every
        scheme can); each skipped scheme is reported with `skip_line` (a format of name and why)
        on stderr, and a PantheonError ends it, in one line saying why of each, when nothing is left
        to run. `rate_mbps` is the path's bottleneck rate (uplink_rate_mbps), which a scenario's
        workload load is a fraction of."""
        if self.scenario:
            plan = plans.scenario(self.scenario, rate_mbps)
            plan = plan.with_ecn() if self.ecn else plan
            problems = [f"{name}: {why}" for name in plan.schemes if (why := problem(name))]
            if ecn_problem and not problems:
                problems = [f"flow {i} ({f.scheme}) asks for ECN: {why}" for i, f in enumerate(plan.flows, 1)
                            if f.ecn and (why := ecn_problem(f.scheme))]
            if problems:
                raise PantheonError(f"scenario {self.scenario} cannot {verb}: {'; '.join(problems)}")
            return Selection([plan], {}, [])
        asked = every if self.all_schemes else list(dict.fromkeys(self.schemes))

        def why_not(name: str) -> str | None:
            return problem(name) or (ecn_problem(name) if self.ecn and ecn_problem else None)

        skipped = {name: why for name in asked if (why := why_not(name))}
        wanted = [name for name in asked if name not in skipped]
        if not wanted:
            raise PantheonError(f"no scheme can {verb}: {'; '.join(f'{name}: {why}' for name, why in skipped.items())}")
        for name, why in skipped.items():
            print(skip_line.format(name=name, why=why), file=sys.stderr)
        # Under --all a scheme this machine cannot run, or that cannot use ECN with --ecn, is expected.
        not_run = [name for name in skipped
                   if not (self.all_schemes and (expected_skip(name) or not problem(name)))]
        if self.pairs:
            return Selection([plans.pair(a, b, self.runtime_s, self.ecn) for i, a in enumerate(wanted) for b in wanted[i:]],
                             skipped, not_run)
        return Selection([plans.uniform(name, self.flows, self.interval_s, self.runtime_s, self.ecn) for name in wanted],
                         skipped, not_run)
