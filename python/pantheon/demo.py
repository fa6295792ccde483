"""The main job: every scheme of the library that can run here, one short run each over one
emulated path — 12 Mbit/s each way, 20 ms one-way delay (RTT 40 ms), a DropTail buffer of one
bandwidth-delay product (60 kB) — then the analysis: each scheme's throughput against its 95th-
percentile one-way delay (the paper's Figure 2 view, Yan et al., ATC 2018) in report.html and
report.pdf in the data dir."""
from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from pantheon.experiment import Experiment
from pantheon.harness.local import run_local
from pantheon.plan import check_runtime

PATH_OPTIONS = ("--delay", "20", "--uplink-rate", "12", "--downlink-rate", "12",
                "--uplink-queue-bytes", "60000", "--downlink-queue-bytes", "60000")


def add_parser(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser(
        "demo", help="every scheme that can run here over an emulated 12 Mbit/s, 20 ms path; a report",
        description="Run every scheme that can run here (or those named), one short run each over an emulated path of "
        "12 Mbit/s each way, 20 ms one-way delay and a DropTail buffer of one bandwidth-delay product (60 kB), then "
        "analyse the runs: each scheme's throughput against its 95th-percentile one-way delay, in report.html and "
        "report.pdf in the data dir.",
        epilog="example:\n  pantheon demo --schemes cubic,bbr,copa --runtime 5")
    demo.add_argument("--runtime", type=float, default=10.0, help="seconds each scheme runs (default 10)")
    demo.add_argument("--schemes", help="comma-separated scheme names (default: all that can run here)")
    demo.add_argument("--data-dir", type=Path, help="where results go (default data/demo-DATE-TIME)")
    demo.set_defaults(run=run, makes_namespaces=demo.prog)


def run(args: argparse.Namespace) -> int:
    return run_demo(runtime_s=args.runtime, schemes=args.schemes, data_dir=args.data_dir)


def run_demo(runtime_s: float, schemes: str | None, data_dir: Path | None) -> int:
    check_runtime(runtime_s, "--runtime")
    data_dir = data_dir or Path("data") / datetime.now().strftime("demo-%Y%m%d-%H%M%S")
    names = tuple(s for s in (schemes or "").split(",") if s)
    print(f"pantheon demo: {'the schemes ' + schemes if schemes else 'every scheme that can run here'}, "
          f"{runtime_s:g} s each over 12 Mbit/s, 20 ms one-way delay, a 60 kB buffer; results in {data_dir}", flush=True)
    asked = Experiment(schemes=names, all_schemes=not names, scenario=None, run_times=1, runtime_s=runtime_s, flows=1,
                       interval_s=0.0, seed=0, data_dir=data_dir, emulator=None, path_options=PATH_OPTIONS)
    status = run_local(asked, random_order=False, analyze=True, arguments=asked.arguments(command="demo"))
    if (data_dir / "report.html").exists():
        print(f"pantheon demo: report in {data_dir / 'report.html'} and {data_dir / 'report.pdf'}")
    return status
