#!/usr/bin/env python3
"""Fidelity of the userspace twins: cubic-user, reno-user and bbr-user against the kernel's cubic,
reno and bbr, over the emulator.

What is measured
    Each pair (kernel scheme, its twin: a crates/cc controller driven by pantheon-udp) runs RUNS
    times over each path in one `pantheon test local` campaign, the two schemes' runs interleaved,
    through the same tunnel and emulator. Per pair and path the table shows the mean throughput and
    the mean p95 one-way delay of the runs (perf.json, docs/analysis.md) and the twin's ratio to the
    kernel.

      tput Mbit/s   mean over runs of the flow's throughput
      p95 ms        mean over runs of the flow's p95 one-way delay
      ratio         twin / kernel; `*` marks a throughput off by more than 5% or a p95 delay off by
                    more than 15% (issue 15 §3's goal)

Paths (12 Mbit/s each way and 30 ms each way unless said otherwise):
    1bdp      DropTail 90 000 bytes on the uplink: one BDP of the 60 ms round trip
    deep      DropTail 450 000 bytes: five BDPs, 300 ms of queue
    cellular  Mahimahi's TMobile-LTE-short trace each way (~13 Mbit/s mean uplink, bursty),
              DropTail 150 000 bytes (the path bench/mahimahi_parity.py calls `lte`)
    lossy     1bdp with 20% i.i.d. loss on the uplink, where BBR v1's gain cycle no longer holds
              its bandwidth estimate up (1.25 × 0.8 = 1) and Linux's policer detection engages
    policer   the preset policer-12mbps-10ms: 12 Mbit/s, 10 ms, a one-packet buffer each way (the
              original Pantheon's "token-bucket policer", Mahimahi's millisecond clock)
    tbf       a 48 Mbit/s uplink, 10 ms, 100 packets of DropTail, behind a token-bucket policer of
              12 Mbit/s with a 60 000-byte bucket (the policers of Flach et al., SIGCOMM 2016)

Why
    The simulator runs the twins where a researcher would have run the kernel's schemes
    (calibration, Indigo's training, `pantheon sim --schemes cubic-user`), so a twin that differs
    from its kernel scheme makes every simulated result differ from what Pantheon measured.

Campaigns already in --data-dir are reused, not rerun, so that a long table can be gathered in
several invocations (each short enough to share the machine) and printed whole by the last.

Run as root, from the repository (cargo build --release and ./setup.sh first):
    python3 bench/twin_fidelity.py [--runs 3] [--runtime 30] [--pairs bbr,cubic,reno]
        [--paths 1bdp,deep,cellular,lossy,policer,tbf] [--data-dir DIR]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PANTHEON = REPO / ".venv" / "bin" / "pantheon"
TRACES = Path("/usr/share/mahimahi/traces")
TWINS = {"bbr": "bbr-user", "cubic": "cubic-user", "reno": "reno-user"}
PATHS = {
    "1bdp": ["--delay", "30", "--uplink-queue", "droptail", "--uplink-queue-bytes", "90000"],
    "deep": ["--delay", "30", "--uplink-queue", "droptail", "--uplink-queue-bytes", "450000"],
    "cellular": ["--delay", "30", "--uplink-trace", str(TRACES / "TMobile-LTE-short.up"),
                 "--downlink-trace", str(TRACES / "TMobile-LTE-short.down"),
                 "--uplink-queue", "droptail", "--uplink-queue-bytes", "150000"],
    "lossy": ["--delay", "30", "--uplink-queue", "droptail", "--uplink-queue-bytes", "90000", "--uplink-loss", "0.2"],
    "policer": ["--emulator", "policer-12mbps-10ms"],
    "tbf": ["--delay", "10", "--uplink-rate", "48", "--uplink-queue", "droptail", "--uplink-queue-packets", "100",
            "--uplink-policer", "12,60000"],
}
THROUGHPUT_BOUND = 0.05
DELAY_BOUND = 0.15


@dataclass(frozen=True)
class Cell:
    """One scheme's runs on one path: means over its valid runs."""

    throughput_mbps: float
    delay_p95_ms: float
    runs: int


def campaign(pair: str, path: str, runs: int, runtime_s: int, data_dir: Path) -> dict[str, Cell]:
    """{scheme: Cell} of the kernel scheme and its twin on `path`; run unless `data_dir` has it."""
    perf_path = data_dir / "perf.json"
    if not perf_path.exists():
        argv = [str(PANTHEON), "test", "local", "--schemes", f"{pair},{TWINS[pair]}", *PATHS[path],
                "--run-times", str(runs), "--runtime", str(runtime_s), "--data-dir", str(data_dir), "--quiet"]
        done = subprocess.run(argv, capture_output=True, text=True)
        if not perf_path.exists():
            sys.exit(f"{pair} on {path} wrote no perf.json (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    cells = {}
    for name, scheme in json.loads(perf_path.read_text())["schemes"].items():
        flows = [run["flows"]["all"] for run in scheme["runs"].values() if run["valid"]]
        if flows:
            cells[name] = Cell(statistics.mean(f["throughput_mbps"] for f in flows),
                               statistics.mean(f["delay_p95_ms"] for f in flows), len(flows))
    return cells


def ratio(twin: float, kernel: float, bound: float) -> str:
    r = twin / kernel if kernel else float("inf")
    return f"{r:6.3f}{'*' if abs(r - 1) > bound else ' '}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each scheme per path (default 3)")
    parser.add_argument("--runtime", type=int, default=30, help="seconds per run (default 30)")
    parser.add_argument("--pairs", default=",".join(TWINS), help="kernel schemes whose twins to compare")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"some of {', '.join(PATHS)}")
    parser.add_argument("--data-dir", type=Path, help="where campaigns go, and are reused from (default: a new "
                                                      "temporary directory)")
    args = parser.parse_args()
    pairs = [p for p in args.pairs.split(",") if p]
    paths = [p for p in args.paths.split(",") if p]
    unknown = [p for p in pairs if p not in TWINS] + [p for p in paths if p not in PATHS]
    if unknown:
        sys.exit(f"unknown pair or path: {', '.join(unknown)} (pairs: {', '.join(TWINS)}; paths: {', '.join(PATHS)})")
    root = args.data_dir or Path(tempfile.mkdtemp(prefix="twin-fidelity-"))
    print(f"{args.runs} runs x {args.runtime} s per scheme and path (campaigns already in {root} are reused)")
    print(f"{'pair':<18} {'path':<9} {'kernel tput':>11} {'twin tput':>9} {'ratio':>7} "
          f"{'kernel p95':>10} {'twin p95':>8} {'ratio':>7}  runs")
    outside = []
    for path in paths:
        for pair in pairs:
            cells = campaign(pair, path, args.runs, args.runtime, root / path / pair)
            twin = TWINS[pair]
            if pair not in cells or twin not in cells:
                print(f"{pair + ' / ' + twin:<18} {path:<9} missing: a scheme has no valid run")
                continue
            k, t = cells[pair], cells[twin]
            print(f"{pair + ' / ' + twin:<18} {path:<9} {k.throughput_mbps:11.2f} {t.throughput_mbps:9.2f} "
                  f"{ratio(t.throughput_mbps, k.throughput_mbps, THROUGHPUT_BOUND)} {k.delay_p95_ms:10.1f} "
                  f"{t.delay_p95_ms:8.1f} {ratio(t.delay_p95_ms, k.delay_p95_ms, DELAY_BOUND)}  {k.runs}/{t.runs}")
            if (abs(t.throughput_mbps / k.throughput_mbps - 1) > THROUGHPUT_BOUND
                    or abs(t.delay_p95_ms / k.delay_p95_ms - 1) > DELAY_BOUND):
                outside.append(f"{twin} on {path}")
    print(f"outside {THROUGHPUT_BOUND:.0%} throughput / {DELAY_BOUND:.0%} p95 delay: "
          + (", ".join(outside) if outside else "none"))
    print(f"data: {root}")


if __name__ == "__main__":
    main()
