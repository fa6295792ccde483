#!/usr/bin/env python3
"""Bulk kernel-TCP throughput through pantheon-emu, side by side with Mahimahi.

What is measured
    One iperf3 flow (kernel TCP, Cubic or BBR) runs from inside the emulated path (the uplink) to an
    iperf3 server on the far side, for each case below, once through our emulator (pantheon-emu) and
    once through Mahimahi (run by ../shared/tools/mahimahi-anchor) with the same parameters, in the
    same invocation of this script. The throughput is iperf3's receiver-side figure
    (end.sum_received.bits_per_second) after the first OMIT_S seconds, which hold the slow-start ramp.

      a  delay 20 ms each way, no rate limit         target: ours >= 2000 Mbit/s
      b  delay 20 ms + 1000 Mbit/s each way,         target: ours >= 950 Mbit/s
         DropTail queue of 2 500 000 bytes (20 ms at 1000 Mbit/s)
      c  delay 30 ms + 12 Mbit/s each way,           target: ours within 1 % of Mahimahi
         DropTail queue of 90 000 bytes
      d  case b with FQ-CoDel (RFC 8290, its         target: ours >= 950 Mbit/s
         defaults) instead of DropTail, limit         (issue 34 §5; Mahimahi has no FQ-CoDel,
         2 500 000 bytes                              so no Mahimahi run)

    A rate of R Mbit/s means R Mbit/s of 1500-byte IP packets (Mahimahi's delivery opportunities), so
    TCP goodput tops out near R * 1448 / 1500 (about 965 Mbit/s at 1000 Mbit/s).

Why
    The emulator must not be the bottleneck of the experiments it hosts (cases a, b) and must deliver
    what Mahimahi, the emulator the original Pantheon used, delivers on a slow link (case c).

CPU seconds per Gbit
    The emulator process is started by this script, and this script reaps it with wait4(), whose
    rusage is the user + system CPU of the emulator and of every descendant it reaped, the client
    command included. The client command is a shell that ends with the shell builtin `times`, which
    prints the CPU of that shell and of its children (the iperf3 client); that is subtracted.
    What is left is the CPU of the emulator's own processes and threads, setup included, divided by
    the Gbit the iperf3 sender moved over the whole test (the warm-up seconds included). For Mahimahi
    the same figure also covers the anchor's wrapper (bash, unshare, su, the iptables calls its
    shells make), a small fixed cost per run.

TCP buffers
    At 40 ms RTT and 2 Gbit/s the windows need 10 MB and more, beyond the default maximum socket
    buffers. Both endpoints of every run get tcp_rmem/tcp_wmem from TCP_BUFFER_SYSCTLS: the server's
    namespace before the run, the client's namespace (created by the emulator, or by Mahimahi's
    innermost shell, where the client runs as a non-root user) through nsenter while the client
    waits for the go-ahead. The script writes sysctls only in namespaces of the run: its own
    pbench-<pid>, the emulator's inner one, and the anchor's mmanchor (values put back afterwards).

Run as root, from anywhere:
    python3 bench/emulator_throughput.py [--seconds 10] [--cc cubic,bbr] [--cases a,b,c] [--emu PATH]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import support
from support import link, mahimahi, processes
from support.figures import comma_list, number
from support.iperf import OMIT_S, Measurement, attempt, client_script, measure
from support.link import Link
from support.mahimahi import ANCHOR, anchor_with_tcp_buffers, double_quoted, write_constant_rate_trace
from support.processes import BenchError
from support.tcp_buffers import TCP_BUFFER_SYSCTLS, tcp_netns

DEFAULT_EMU = support.BIN / "pantheon-emu"


@dataclass(frozen=True)
class Case:
    name: str
    link: Link
    min_ours_mbps: float | None = None
    max_deviation_from_mahimahi: float | None = None  # fraction, 0.01 = 1 %

    def describe(self) -> str:
        return self.link.describe()

    def target(self) -> str:
        if self.min_ours_mbps is not None:
            return f">= {self.min_ours_mbps:g}"
        return f"+-{self.max_deviation_from_mahimahi:.0%} of mm"

    def met(self, ours_mbps: float, mahimahi_mbps: float | None) -> bool | None:
        if self.min_ours_mbps is not None:
            return ours_mbps >= self.min_ours_mbps
        if mahimahi_mbps is None:
            return None
        return abs(ours_mbps / mahimahi_mbps - 1) <= self.max_deviation_from_mahimahi


CASES = {
    "a": Case("a", Link(delay_ms=20, rate_mbps=None, queue_bytes=None), min_ours_mbps=2000),
    "b": Case("b", link.GIGABIT, min_ours_mbps=950),
    "c": Case("c", Link(delay_ms=30, rate_mbps=12, queue_bytes=90_000), max_deviation_from_mahimahi=0.01),
    "d": Case("d", replace(link.GIGABIT, queue="fq-codel"), min_ours_mbps=950),
}
MAHIMAHI_QUEUES = ("droptail", "codel", "pie")
"""The queues Mahimahi 0.98 has; a case with another is run through ours alone."""


@dataclass(frozen=True)
class Row:
    case: Case
    cc: str
    ours: Measurement | None  # None: the run failed (the reason went to stderr)
    mahimahi: Measurement | None


def main() -> int:
    args = parse_args()
    problem = mahimahi.missing_prerequisite(args.emu)
    if problem:
        print(f"emulator_throughput: {problem}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, processes.raise_keyboard_interrupt)
    try:
        rows = run_all(args)
    except BenchError as error:
        print(f"emulator_throughput: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("emulator_throughput: interrupted; namespaces and processes cleaned up", file=sys.stderr)
        return 130
    print_table(rows, args.seconds)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Bulk iperf3 TCP throughput through pantheon-emu and Mahimahi, same parameters.",
        epilog="Cases: " + "; ".join(f"{c.name}: {c.describe()}, target {c.target()}" for c in CASES.values()),
    )
    parser.add_argument("--seconds", type=int, default=10,
                        help=f"measured seconds per run, after {OMIT_S} s of warm-up (default 10)")
    parser.add_argument("--cc", type=comma_list(("cubic", "bbr", "reno")), default=["cubic", "bbr"],
                        help="kernel congestion controls, comma-separated (default cubic,bbr)")
    parser.add_argument("--cases", type=comma_list(tuple(CASES)), default=list(CASES),
                        help="cases to run, comma-separated (default a,b,c)")
    parser.add_argument("--emu", type=Path, default=DEFAULT_EMU,
                        help=f"pantheon-emu binary (default {DEFAULT_EMU})")
    return parser.parse_args()


def run_all(args: argparse.Namespace) -> list[Row]:
    netns = f"pbench-{os.getpid()}"
    rows = []
    with tcp_netns(netns), anchor_with_tcp_buffers(), tempfile.TemporaryDirectory(prefix="pbench-") as tmp:
        Path(tmp).chmod(0o777)  # Mahimahi's client runs as user mmanchor and writes here
        total = len(args.cases) * len(args.cc)
        for index, (case_name, cc) in enumerate(((c, cc) for c in args.cases for cc in args.cc), 1):
            case = CASES[case_name]
            ours = attempt(f"[{index}/{total}] {case.name} {cc} ours",
                           partial(run_ours, args.emu, netns, case, cc, args.seconds, Path(tmp)))
            mahimahi = None
            if case.link.queue in MAHIMAHI_QUEUES:
                mahimahi = attempt(f"[{index}/{total}] {case.name} {cc} mahimahi",
                                   partial(run_mahimahi, case, cc, args.seconds, Path(tmp)))
            rows.append(Row(case, cc, ours, mahimahi))
    return rows


def run_ours(emu: Path, netns: str, case: Case, cc: str, seconds: int, tmp: Path) -> Measurement:
    server_prefix = ["ip", "netns", "exec", netns]
    client = client_script(cc, seconds, tmp)
    return measure(server_prefix, [*server_prefix, str(emu), *case.link.emulator_options(), "--", "sh", "-c", client],
                   seconds, tmp)


def run_mahimahi(case: Case, cc: str, seconds: int, tmp: Path) -> Measurement:
    client = "sh -c " + double_quoted(client_script(cc, seconds, tmp))
    link = case.link
    chain = f"mm-delay {link.delay_ms} "
    if link.rate_mbps is not None:
        trace = tmp / f"{link.rate_mbps}mbps.trace"
        write_constant_rate_trace(trace, link.rate_mbps)
        chain += (f"mm-link {trace} {trace} --uplink-queue={link.queue} --uplink-queue-args=bytes={link.queue_bytes}"
                  f" --downlink-queue={link.queue} --downlink-queue-args=bytes={link.queue_bytes} -- ")
    return measure([str(ANCHOR), "exec"], [str(ANCHOR), "run", chain + client], seconds, tmp)


def print_table(rows: list[Row], seconds: int) -> None:
    header = ("case", "parameters", "cc", "ours Mbit/s", "mm Mbit/s", "ours/mm",
              "ours CPU s/Gbit", "mm CPU s/Gbit", "target (ours)", "met")
    lines = [header]
    for row in rows:
        ours_mbps = row.ours.throughput_mbps if row.ours else None
        mm_mbps = row.mahimahi.throughput_mbps if row.mahimahi else None
        met = row.case.met(ours_mbps, mm_mbps) if ours_mbps is not None else None
        lines.append((
            row.case.name, row.case.describe(), row.cc,
            number(ours_mbps, 1), number(mm_mbps, 1),
            number(ours_mbps / mm_mbps if ours_mbps and mm_mbps else None, 3),
            number(row.ours.cpu_s_per_gbit if row.ours else None, 3),
            number(row.mahimahi.cpu_s_per_gbit if row.mahimahi else None, 3),
            row.case.target(), {True: "yes", False: "NO", None: "?"}[met],
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    print(f"\nThroughput: iperf3 receiver side, {seconds} s after {OMIT_S} s warm-up; one flow, uplink direction. "
          f"TCP buffers (both ends): " + ", ".join(f"{k}={v}" for k, v in TCP_BUFFER_SYSCTLS.items()) + ".")
    print("CPU s/Gbit: emulator user+sys CPU (wait4 rusage minus the client's `times`) per Gbit sent, "
          "warm-up included; Mahimahi's also counts the anchor wrapper.")


if __name__ == "__main__":
    sys.exit(main())
