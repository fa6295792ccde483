#!/usr/bin/env python3
"""Same parameters, same results as Mahimahi? Throughput and p95 one-way delay, side by side.

What is measured
    One bulk flow runs from inside the emulated path (the uplink) to a receiver on the far side,
    through our emulator (pantheon-emu, in each --timing asked for, with each --stalls) and through
    Mahimahi 0.98 (run by ../shared/tools/mahimahi-anchor, `mm-delay D mm-link UP DOWN ...`), with
    the same parameters, run after run alternating, in one invocation. Schemes: kernel TCP (iperf3
    -C cubic|bbr|reno) and pantheon-udp's userspace controllers (copa, vegas, ...: `pantheon-udp
    send --cc NAME`).
Same vantage point
    Both emulators write the bottleneck's uplink log in Mahimahi's mm-link form (`--uplink-log` of
    mm-link, `--uplink-mm-log` of ours): whole milliseconds, each departure with its queueing delay.
    From that log alone, by the same code for both: throughput = IP bytes that left the bottleneck
    between OMIT_S s after the flow's first packet and the end of the run, over that time; one-way
    delay of a packet = its queueing delay + the propagation delay D (both emulators hold every packet
    exactly D on the ms clock of this log), and the p95 over the same packets. Mahimahi's TUN devices
    carry a 4-byte packet-information header that its log counts; it is taken off here.
Paths (the parity set; each way unless said)
    bdp    12 Mbit/s, 30 ms, DropTail 90 000 bytes (1 BDP), the path of issue 15 §1
    inf    12 Mbit/s, 30 ms, infinite queue
    lte    TMobile-LTE-short (Mahimahi's recorded traces: .up carries the data), 30 ms,
           DropTail 150 000 bytes
    fast   100 Mbit/s, 10 ms, DropTail 250 000 bytes (1 BDP)
    codel  the bdp path with CoDel (RFC 8289) instead of DropTail: target 5 ms, interval 100 ms,
           a limit of 1000 packets (issue 34 §4: Mahimahi's own CoDel against ours)
    pie    the bdp path with PIE (RFC 8033): qdelay_ref 15 ms, max_burst 150 ms, 1000 packets
    The AQMs are given to both emulators in Mahimahi's words (`--uplink-queue=codel
    --uplink-queue-args=...`); kernel TCP here is not ECN-capable, so both drop.
    A constant rate is, for Mahimahi, the trace bench/support.py writes (opportunities on
    whole milliseconds); ours takes --uplink-rate.
Write lateness (--lateness)
    How late each emulator writes what its log says left when: a packet socket in the receiver's
    namespace (bench/packet_times.py) takes the kernel's receive time and size of each of the
    flow's uplink packets, each matched with the next of the log's departures of its size (a
    departure with none, such as the last few still in flight at the end, is skipped); lateness =
    receive time - the time the packet was due out: the log's init timestamp + departure ms, + D
    for Mahimahi (its link is the inner shell, mm-delay comes after it; ours delays before the
    link). Mahimahi's log keeps
    model times (each departure at its opportunity's ms), so this is its event loops' lateness:
    under 1 ms while they keep up (the phase of their poll(2) wake-ups), more when a shell was
    descheduled. Both emulators start their clocks on a whole ms of the wall clock. Printed per
    emulator: quantiles, the share of departures over 1, 2 and 5 ms late, and the episodes of
    consecutive departures over 1 ms late (a stall each): how many a second, their mean worst.
Goal (issue 15 §1)
    With --timing mahimahi, every cell within 3 % throughput and 10 % p95 delay of Mahimahi.
Run as root (needs the anchor installed and ./setup.sh --no-run), under the bench lock:
    flock /work/bench.lock python3 bench/mahimahi_parity.py --paths bdp --schemes bbr,cubic --runs 3 --runtime 15
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import support
from pantheon.analysis.metrics import nearest_rank
from support import POLL_S, REPO
from support.iperf import IPERF_PORT, wait_until_listening
from support.mahimahi import (
    ANCHOR,
    anchor_with_tcp_buffers,
    double_quoted,
    missing_prerequisite,
    write_constant_rate_trace,
)
from support.processes import BenchError, raise_keyboard_interrupt, stop, tail
from support.tcp_buffers import tcp_netns

OMIT_S = 2
"""Seconds after the flow's first packet left out of both figures (slow start)."""
UDP_PORT = 9500
TUN_HEADER_BYTES = 4
"""Mahimahi opens its TUN devices without IFF_NO_PI, so each packet it logs is 4 bytes longer."""
TRACES = Path("/usr/share/mahimahi/traces")
KERNEL_SCHEMES = ("cubic", "bbr", "reno")
EMU = support.BIN / "pantheon-emu"
UDP = support.BIN / "pantheon-udp"
TIMINGS = ("us", "mahimahi")
MATCH_AHEAD = 20
"""How many departures past the last matched one a received packet may match (--lateness)."""


@dataclass(frozen=True)
class ParityPath:
    name: str
    delay_ms: int
    uplink: str
    """A rate in Mbit/s, or a file name under TRACES."""
    downlink: str
    queue_bytes: int | None
    """Uplink and downlink DropTail limit; None: infinite."""
    aqm: str = ""
    """An AQM instead of DropTail, as Mahimahi names it, and its arguments (the limit included)."""
    aqm_args: str = ""

    def describe(self) -> str:
        queue = f"DropTail {self.queue_bytes} B" if self.queue_bytes else "infinite queue"
        if self.aqm:
            queue = f"{self.aqm} [{self.aqm_args}]"
        rate = f"{self.uplink} Mbit/s" if self.uplink.isdigit() else f"trace {self.uplink}"
        return f"{rate}, {self.delay_ms} ms, {queue}"


PATHS = {
    "bdp": ParityPath("bdp", 30, "12", "12", 90_000),
    "inf": ParityPath("inf", 30, "12", "12", None),
    "lte": ParityPath("lte", 30, "TMobile-LTE-short.up", "TMobile-LTE-short.down", 150_000),
    "fast": ParityPath("fast", 10, "100", "100", 250_000),
    "codel": ParityPath("codel", 30, "12", "12", None, "codel", "packets=1000,target=5,interval=100"),
    "pie": ParityPath("pie", 30, "12", "12", None, "pie", "packets=1000,qdelay_ref=15,max_burst=150"),
}


@dataclass(frozen=True)
class Result:
    throughput_mbps: float
    p95_delay_ms: float
    lateness_us: tuple[int, ...] = ()
    """With --lateness: each departure's write lateness, in departure order (module docstring)."""


def main() -> int:
    args = parse_args()
    problem = missing_prerequisite(EMU) or (None if UDP.is_file() else f"no {UDP}: cargo build --release")
    if problem:
        print(f"mahimahi_parity: {problem}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, raise_keyboard_interrupt)
    try:
        results = run_all(args)
    except KeyboardInterrupt:
        print("mahimahi_parity: interrupted; namespaces and processes cleaned up", file=sys.stderr)
        return 130
    print_table(args, results)
    if args.lateness:
        print_lateness(args, results)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="Paths: " + "; ".join(f"{p.name}: {p.describe()}" for p in PATHS.values()))
    parser.add_argument("--runs", type=int, default=3, help="runs per emulator and cell (default 3)")
    parser.add_argument("--runtime", type=int, default=15, help="seconds each flow runs (default 15)")
    parser.add_argument("--paths", default="bdp,inf,lte,fast", help="comma-separated (default bdp,inf,lte,fast)")
    parser.add_argument("--schemes", default="cubic,bbr,reno,copa,vegas",
                        help="kernel cubic|bbr|reno or pantheon-udp --cc names, comma-separated")
    parser.add_argument("--timing", default="mahimahi",
                        help="our emulator's --timing, one or both of us,mahimahi (default mahimahi)")
    parser.add_argument("--stalls", metavar="N,MS|none", action="append",
                        help="our emulator's --stalls (a stalling host); repeat to compare several, 'none' for "
                        "without (default none)")
    parser.add_argument("--lateness", action="store_true",
                        help="also measure each emulator's write lateness (module docstring)")
    args = parser.parse_args()
    args.paths = [PATHS[name] for name in args.paths.split(",")]
    args.schemes = args.schemes.split(",")
    args.timing = args.timing.split(",")
    if any(t not in TIMINGS for t in args.timing):
        parser.error(f"--timing: choose from {','.join(TIMINGS)}")
    # Our emulator's configurations: label ('ours-<timing>', '+<N,MS>' when it stalls) -> its options.
    args.ours = {}
    for timing in args.timing:
        for stalls in args.stalls or ["none"]:
            stalling = stalls != "none"
            args.ours[f"ours-{timing}" + (f"+{stalls}" if stalling else "")] = [
                "--timing", timing, *(["--stalls", stalls] if stalling else [])]
    return args


Cell = tuple[str, str, str]
"""(path name, scheme, emulator: 'mahimahi' or a label of args.ours)."""


def run_all(args: argparse.Namespace) -> dict[Cell, list[Result]]:
    netns = f"pparity-{os.getpid()}"
    results: dict[Cell, list[Result]] = {}
    with tcp_netns(netns), anchor_with_tcp_buffers(), tempfile.TemporaryDirectory(prefix="pparity-") as scratch:
        tmp = Path(scratch)
        tmp.chmod(0o777)  # Mahimahi's shells run as user mmanchor and write their log here
        for path in args.paths:
            for scheme in args.schemes:
                for run in range(1, args.runs + 1):
                    emulators = ["mahimahi", *args.ours]
                    for emulator in emulators if run % 2 else reversed(emulators):
                        label = f"{path.name} {scheme} {emulator} run {run}"
                        try:
                            result = run_one(netns, path, scheme, emulator, args, tmp)
                        except BenchError as error:
                            print(f"{label}: FAILED: {error}", file=sys.stderr)
                            continue
                        print(f"{label}: {result.throughput_mbps:.2f} Mbit/s, p95 {result.p95_delay_ms:.0f} ms",
                              file=sys.stderr, flush=True)
                        results.setdefault((path.name, scheme, emulator), []).append(result)
    return results


def run_one(netns: str, path: ParityPath, scheme: str, emulator: str, args: argparse.Namespace, tmp: Path) -> Result:
    runtime_s, lateness = args.runtime, args.lateness
    log, received = tmp / "uplink.log", tmp / "received.txt"
    log.unlink(missing_ok=True)
    if emulator == "mahimahi":
        server_prefix = [str(ANCHOR), "exec"]
        command = [str(ANCHOR), "run", mahimahi_chain(path, log, tmp) + "sh -c " + double_quoted(client(scheme, runtime_s))]
    else:
        server_prefix = ["ip", "netns", "exec", netns]
        command = [*server_prefix, str(EMU), *args.ours[emulator], *our_path_options(path),
                   "--uplink-mm-log", str(log), "--", "sh", "-c", client(scheme, runtime_s)]
    server = start_server(server_prefix, scheme)
    emulated = capture = None
    try:
        if lateness:
            capture = start_capture(server_prefix, scheme, received)
        errors = tmp / "emulator.err"
        with open(errors, "wb") as stderr:
            emulated = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
        try:
            status = emulated.wait(timeout=runtime_s + 30)
        except subprocess.TimeoutExpired:
            raise BenchError("the run did not finish in time") from None
        if status != 0:
            raise BenchError(f"exit status {status}; {tail(errors)}")
    finally:
        stop(emulated)
        stop(server)
        stop(capture)
    header_bytes = TUN_HEADER_BYTES if emulator == "mahimahi" else 0
    result = read_uplink_log(log, path.delay_ms, runtime_s, header_bytes)
    if not lateness:
        return result
    after_link_ms = path.delay_ms if emulator == "mahimahi" else 0
    return replace(result, lateness_us=write_lateness(log, after_link_ms, header_bytes, runtime_s, received))


def start_server(prefix: list[str], scheme: str) -> subprocess.Popen:
    if scheme in KERNEL_SCHEMES:
        server = subprocess.Popen([*prefix, "iperf3", "-s", "-1", "-p", str(IPERF_PORT)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until_listening(prefix, server)
        return server
    server = subprocess.Popen([*prefix, str(UDP), "recv", str(UDP_PORT)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(10 * POLL_S)  # a UDP socket has no listening state to wait for; binding takes microseconds
    return server


def start_capture(prefix: list[str], scheme: str, out: Path) -> subprocess.Popen:
    """bench/packet_times.py in the receiver's namespace, listening once this returns."""
    out.unlink(missing_ok=True)
    port = ("tcp", IPERF_PORT) if scheme in KERNEL_SCHEMES else ("udp", UDP_PORT)
    capture = subprocess.Popen([*prefix, sys.executable, str(REPO / "bench" / "packet_times.py"), port[0], str(port[1]),
                                str(out)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    assert capture.stdout is not None
    if capture.stdout.readline().strip() != b"ready":
        stop(capture)
        raise BenchError("bench/packet_times.py did not start")
    return capture


def client(scheme: str, runtime_s: int) -> str:
    """The flow's sender, inside the emulated path (no quote characters: it passes the anchor's sh -c)."""
    if scheme in KERNEL_SCHEMES:
        return f"iperf3 -c $MAHIMAHI_BASE -p {IPERF_PORT} -t {runtime_s} -C {scheme} > /dev/null"
    return f"timeout -s INT {runtime_s} {UDP} send --cc {scheme} $MAHIMAHI_BASE {UDP_PORT}; true"


def trace_file(spec: str, tmp: Path) -> Path:
    if spec.isdigit():
        trace = tmp / f"{spec}mbps.trace"
        write_constant_rate_trace(trace, int(spec))
        return trace
    return TRACES / spec


def queue_options(path: ParityPath) -> tuple[str, str] | None:
    """The queue's kind and arguments in Mahimahi's words, or None for an infinite queue."""
    if path.aqm:
        return path.aqm, path.aqm_args
    if path.queue_bytes:
        return "droptail", f"bytes={path.queue_bytes}"
    return None


def mahimahi_chain(path: ParityPath, log: Path, tmp: Path) -> str:
    queues = ""
    if queue := queue_options(path):
        queues = "".join(f" --{d}-queue={queue[0]} --{d}-queue-args={queue[1]}" for d in ("uplink", "downlink"))
    return (f"mm-delay {path.delay_ms} mm-link {trace_file(path.uplink, tmp)} {trace_file(path.downlink, tmp)}"
            f"{queues} --uplink-log={log} -- ")


def our_path_options(path: ParityPath) -> list[str]:
    options = ["--delay", str(path.delay_ms)]
    for direction, spec in (("uplink", path.uplink), ("downlink", path.downlink)):
        options += [f"--{direction}-rate", spec] if spec.isdigit() else [f"--{direction}-trace", str(TRACES / spec)]
        if queue := queue_options(path):
            options += [f"--{direction}-queue", queue[0], f"--{direction}-queue-args", queue[1]]
    return options


def read_uplink_log(log: Path, delay_ms: int, runtime_s: int, header_bytes: int) -> Result:
    """Throughput and p95 one-way delay from an mm-link-form uplink log (see the module's docstring)."""
    departures: list[tuple[int, int, int]] = []  # (t_ms, IP bytes, queueing ms)
    try:
        lines = log.read_text().splitlines()
    except OSError as error:
        raise BenchError(f"no uplink log: {error}") from None
    for line in lines:
        fields = line.split()
        if len(fields) == 4 and fields[1] == "-":
            departures.append((int(fields[0]), int(fields[2]) - header_bytes, int(fields[3])))
    if not departures:
        raise BenchError(f"no departures in {log}")
    start_ms = departures[0][0] + OMIT_S * 1000
    end_ms = departures[0][0] + runtime_s * 1000
    window = [d for d in departures if start_ms <= d[0] < end_ms]
    if not window:
        raise BenchError(f"no departures between {start_ms} and {end_ms} ms in {log}")
    delays_ms = sorted(queueing_ms + delay_ms for _, _, queueing_ms in window)
    return Result(sum(size for _, size, _ in window) * 8 / ((end_ms - start_ms) * 1000),
                  nearest_rank(delays_ms, 95))


def write_lateness(log: Path, after_link_ms: int, header_bytes: int, runtime_s: int, received: Path) -> tuple[int, ...]:
    """Each departure's write lateness, µs, over the same window as the log's figures."""
    init_ms, departures = None, []  # (t_ms, IP bytes)
    for line in log.read_text().splitlines():
        fields = line.split()
        if line.startswith("# init timestamp:"):
            init_ms = int(fields[-1])
        elif len(fields) == 4 and fields[1] == "-":
            departures.append((int(fields[0]), int(fields[2]) - header_bytes))
    try:
        packets = [tuple(map(int, line.split())) for line in received.read_text().splitlines()]
    except OSError as error:
        raise BenchError(f"no receive times: {error}") from None
    if init_ms is None or not departures:
        raise BenchError(f"no init timestamp or no departures in {log}")
    start_ms, end_ms = departures[0][0] + OMIT_S * 1000, departures[0][0] + runtime_s * 1000
    lateness_us, next_departure, unmatched = [], 0, 0
    for at_us, size in packets:
        match = next((i for i in range(next_departure, min(next_departure + MATCH_AHEAD, len(departures)))
                      if departures[i][1] == size), None)
        if match is None:
            unmatched += 1
            continue
        t_ms = departures[match][0]
        if start_ms <= t_ms < end_ms:
            lateness_us.append(at_us - (init_ms + t_ms + after_link_ms) * 1000)
        next_departure = match + 1
    if unmatched > len(packets) // 100:
        raise BenchError(f"{unmatched} of {len(packets)} packets received match no departure in {log}")
    return tuple(lateness_us)


def print_lateness(args: argparse.Namespace, results: dict[Cell, list[Result]]) -> None:
    print("\nwrite lateness, µs; stalls = runs of consecutive departures over 1 ms late")
    print(f"{'path':<5} {'scheme':<7} {'emulator':<18} {'p50':>5} {'p95':>5} {'p99':>6} {'p99.9':>6} {'max':>6} "
          f"{'>1ms':>6} {'>2ms':>6} {'>5ms':>6} {'stalls/s':>8} {'worst':>6}")
    for (path, scheme, emulator), runs in results.items():
        late = sorted(t for r in runs for t in r.lateness_us)
        if not late:
            continue
        stalls, worst = 0, []
        for r in runs:
            previous_late = False
            for t in r.lateness_us:
                if t > 1000 and not previous_late:
                    stalls += 1
                    worst.append(t)
                elif t > 1000:
                    worst[-1] = max(worst[-1], t)
                previous_late = t > 1000
        seconds = len(runs) * (args.runtime - OMIT_S)
        over = [sum(t > limit for t in late) / len(late) for limit in (1000, 2000, 5000)]
        quantiles = [int(nearest_rank(late, q)) for q in (50, 95, 99, 99.9)]
        print(f"{path:<5} {scheme:<7} {emulator:<18} " + " ".join(f"{q:>5}" if i < 2 else f"{q:>6}" for i, q in enumerate(quantiles))
              + f" {late[-1]:>6} " + " ".join(f"{o:6.2%}" for o in over)
              + f" {stalls / seconds:8.2f} {statistics.mean(worst) if worst else 0:6.0f}")


def print_table(args: argparse.Namespace, results: dict[Cell, list[Result]]) -> None:
    ours = args.ours
    print(f"\n{args.runs} runs x {args.runtime} s per cell (first {OMIT_S} s left out); mean of the runs; "
          "diff = ours / Mahimahi - 1; * = beyond 3 % throughput or 10 % p95")
    header = f"{'path':<5} {'scheme':<7} {'mm Mbit/s':>9} {'mm p95':>6}"
    for name in ours:
        header += f" | {name:<18} {'Mbit/s':>6} {'diff':>6} {'p95':>5} {'diff':>6}"
    print(header)
    for path in args.paths:
        for scheme in args.schemes:
            mm = results.get((path.name, scheme, "mahimahi"))
            if not mm:
                print(f"{path.name:<5} {scheme:<7} {'failed':>9}")
                continue
            mm_mbps = statistics.mean(r.throughput_mbps for r in mm)
            mm_p95 = statistics.mean(r.p95_delay_ms for r in mm)
            line = f"{path.name:<5} {scheme:<7} {mm_mbps:9.2f} {mm_p95:6.1f}"
            for name in ours:
                runs = results.get((path.name, scheme, name))
                if not runs:
                    line += f" | {name:<18} {'failed':>6}"
                    continue
                mbps = statistics.mean(r.throughput_mbps for r in runs)
                p95 = statistics.mean(r.p95_delay_ms for r in runs)
                d_mbps, d_p95 = mbps / mm_mbps - 1, p95 / mm_p95 - 1
                flag = "*" if abs(d_mbps) > 0.03 or abs(d_p95) > 0.10 else " "
                line += f" | {name:<18} {mbps:6.2f} {d_mbps:+6.1%} {p95:5.1f} {d_p95:+6.1%}{flag}"
            print(line)


if __name__ == "__main__":
    sys.exit(main())
