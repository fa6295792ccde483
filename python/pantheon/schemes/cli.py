"""`pantheon schemes list | setup | check`: what the registry holds, setting schemes up, and the
check every scheme must pass — a short flow over an emulated 12 Mbit/s, 20 ms path that moves at
least 1 Mbit/s over the tunnel (Pantheon's throughput: bits over the span of the deliveries) and
stops cleanly when killed (paper §3.1.1: each scheme verified to
run, behind the same start/stop interface)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from pathlib import Path

from pantheon import plan as plans
from pantheon import schemes
from pantheon.errors import PantheonError
from pantheon.harness.campaign import run_campaign
from pantheon.harness.local import Emulated
from pantheon.netns import require_root
from pantheon.progress import Progress

CHECK_MIN_MBPS = 1.0
CHECK_MIN_SPAN_S = 2.0
"""A scheme may take a while to start (a browser does), but it must then keep delivering."""
# 12 Mbit/s each way, 20 ms each way (RTT 40 ms), a DropTail buffer of one BDP (12e6 · 0.040 / 8 B).
CHECK_PATH = ["--delay", "20", "--uplink-rate", "12", "--downlink-rate", "12",
              "--uplink-queue-bytes", "60000", "--downlink-queue-bytes", "60000"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "schemes", help="list, set up and check the schemes (pantheon schemes --help)",
        description="The scheme registry: one manifest per scheme in schemes/ (and $PANTHEON_SCHEMES_PATH; "
        "docs/adding-a-scheme.md). List the schemes and whether each can run here, set them up, and check that each "
        "runs over an emulated path.",
        epilog="example:\n  pantheon schemes list")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list", help="every scheme: ready, needs setup, or unavailable here and why",
        description="List every scheme of the registry: ready, needs setup (and the command that sets it up), "
        "unavailable here, or broken (a manifest that does not read), and why.",
        epilog="example:\n  pantheon schemes list")
    listing.set_defaults(run=_run_list)
    setup = actions.add_parser(
        "setup", help="install and build schemes (idempotent)",
        description="Install and build schemes: their Debian packages and build steps, as their manifests say; "
        f"idempotent, so a scheme already set up is quick. Each scheme's log is in {schemes.SETUP_LOGS.name}/NAME.log.",
        epilog="example:\n  pantheon schemes setup copa vegas-user")
    setup.set_defaults(run=_run_setup)
    check = actions.add_parser(
        "check", help="a 5 s flow of each over an emulated 12 Mbit/s, 20 ms path",
        description=f"Check schemes: a short flow of each (5 s unless its manifest asks for longer) over an emulated "
        f"12 Mbit/s, 20 ms path must move at least {CHECK_MIN_MBPS:g} Mbit/s over the tunnel, keep delivering for "
        f"{CHECK_MIN_SPAN_S:g} s, and stop cleanly when killed.",
        epilog="example:\n  pantheon schemes check cubic vegas-user")
    check.set_defaults(run=_run_check, makes_namespaces=check.prog)
    for p in (setup, check):
        which = p.add_mutually_exclusive_group(required=True)
        which.add_argument("names", nargs="*", default=[], help="scheme names", metavar="NAME")
        which.add_argument("--all", action="store_true", help="every scheme")
    check.add_argument("--data-dir", type=Path, help="where the check runs go (default data/check-DATE-TIME)")


def _run_list(args: argparse.Namespace) -> int:
    return _list(schemes.registry())


def _run_setup(args: argparse.Namespace) -> int:
    registry = schemes.registry()
    return _setup(registry, _names(registry, args))


def _run_check(args: argparse.Namespace) -> int:
    registry = schemes.registry()
    return _check(registry, _names(registry, args), args.data_dir)


def _names(registry: schemes.Registry, args: argparse.Namespace) -> list[str]:
    names = registry.names() if args.all else args.names
    if not names:
        raise PantheonError(f"name the schemes to {args.action}, or --all")
    return names


def _list(registry: schemes.Registry) -> int:
    rows = []
    for name in registry.names():
        if name in registry.broken:
            rows.append((name, "broken", "", registry.broken[name]))
            continue
        scheme = registry.schemes[name]
        kind, why = scheme.status()
        rows.append((name, kind, scheme.display, why + (f"; run: pantheon schemes setup {name}" if kind == "needs setup" else "")))
    width = max(len("scheme"), *(len(r[0]) for r in rows))
    print(f"{'scheme':<{width}}  {'status':<11}  {'display':<16}  why")
    for name, kind, display, why in rows:
        print(f"{name:<{width}}  {kind:<11}  {display:<16}  {why}".rstrip())
    return 0


def _setup(registry: schemes.Registry, names: list[str]) -> int:
    schemes.SETUP_LOGS.mkdir(exist_ok=True)
    failed = 0
    for name in names:
        if name not in registry.schemes:
            print(f"setup {name}: {registry.problem(name)}", file=sys.stderr)
            failed += 1
            continue
        scheme = registry.schemes[name]
        if reason := scheme.unavailable_reason():
            print(f"setup {name}: skipped, unavailable here: {reason}")
            continue
        started = time.monotonic()
        if reason := schemes.run_setup(scheme, schemes.SETUP_LOGS / f"{name}.log"):
            print(f"setup {name}: FAILED: {reason}", file=sys.stderr)
            failed += 1
        else:
            print(f"setup {name}: ok ({time.monotonic() - started:.1f} s)")
    return 1 if failed else 0


def delivered(run_dir: Path) -> tuple[float, float]:
    """(throughput Mbit/s, seconds between the first and the last delivery) of the run's data,
    Pantheon's throughput: bits delivered over the span of the deliveries (paper §3.2)."""
    import pyarrow.parquet as pq  # here: ~0.2 s to load, which every other subcommand would pay

    table = pq.read_table(run_dir / "records.parquet", columns=["direction", "size_bytes", "recv_us"]).to_pylist()
    rows = [(r["recv_us"], r["size_bytes"]) for r in table if r["direction"] == "data" and r["recv_us"] is not None]
    if len(rows) < 2:
        return 0.0, 0.0
    span_us = max(t for t, _ in rows) - min(t for t, _ in rows)
    return sum(8 * b for _, b in rows) / max(span_us, 1), span_us / 1e6


def unclean_stops(run_dir: Path) -> list[str]:
    """Sides that had to be SIGKILLed because they ignored SIGTERM."""
    found = []
    for exit_file in sorted((run_dir / "control").glob("*.exit")):
        if json.loads(exit_file.read_text()).get("needed_sigkill"):
            found.append(f"{exit_file.stem.split('.')[1]} ignored SIGTERM and was killed")
    return found


def _check(registry: schemes.Registry, names: list[str], data_dir: Path | None) -> int:
    require_root("pantheon schemes check")
    data_dir = data_dir or Path("data") / datetime.now().strftime("check-%Y%m%d-%H%M%S")
    width = max(len("scheme"), *(len(n) for n in names))
    print(f"{'scheme':<{width}}  result  Mbit/s  note", flush=True)
    # The table is the plain output; on a terminal a bar below it counts the schemes and the time left.
    progress = Progress(len(names), quiet=False, lines=False)
    failed = 0
    try:
        for name in names:
            if problem := registry.problem(name):
                unavailable = name in registry.schemes and registry.schemes[name].unavailable_reason()
                progress.started(name)
                progress.ended("")
                progress.write(f"{name:<{width}}  {'skip' if unavailable else 'FAIL':<6}  {'':>6}  {problem}", sys.stdout)
                failed += not unavailable
                continue
            runtime_s = registry.schemes[name].check_runtime_s
            run_campaign(plans=[plans.uniform(name, 1, 0.0, runtime_s)], schemes={name: registry.schemes[name]},
                         mode=Emulated(CHECK_PATH), data_dir=data_dir / name, run_times=1, random_order=False, seed=0,
                         quiet=True, arguments={"command": "schemes check", "scheme": name}, progress=progress)
            run_dir = data_dir / name / name / "run1"
            outcome = json.loads((run_dir / "run.json").read_text())
            notes = outcome["failures"] + unclean_stops(run_dir)
            mbps, span_s = delivered(run_dir) if (run_dir / "records.parquet").exists() else (0.0, 0.0)
            if mbps < CHECK_MIN_MBPS:
                notes.append(f"moved {mbps:.2f} Mbit/s, less than {CHECK_MIN_MBPS:g}")
            elif span_s < CHECK_MIN_SPAN_S:
                notes.append(f"delivered data for only {span_s:.1f} s of {runtime_s:g}")
            progress.write(f"{name:<{width}}  {'FAIL' if notes else 'pass':<6}  {mbps:6.2f}  {'; '.join(notes) or ''}".rstrip(),
                           sys.stdout)
            failed += bool(notes)
    finally:
        progress.close()
    print(f"{failed} failed; runs in {data_dir}" if failed else f"all passed; runs in {data_dir}")
    return 1 if failed else 0
