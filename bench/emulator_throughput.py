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
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "python"))
from pantheon.processes import pid_outside  # noqa: E402

DEFAULT_EMU = REPO_ROOT / "target" / "release" / "pantheon-emu"
ANCHOR = REPO_ROOT.parent / "shared" / "tools" / "mahimahi-anchor"  # shared/ sits beside the repository
ANCHOR_INSTALLED_MARK = Path("/var/lib/mahimahi-anchor/shim")

# Max 64 MiB: enough for 2+ Gbit/s at 40 ms RTT plus queueing, with the kernel's buffer overhead.
TCP_BUFFER_SYSCTLS = {
    "net.ipv4.tcp_rmem": "4096 131072 67108864",
    "net.ipv4.tcp_wmem": "4096 16384 67108864",
}
IPERF_PORT = 5399
OMIT_S = 2
# Mahimahi traces are in 1500-byte delivery opportunities; 1 Mbit/s = 1/12 opportunity per ms.
MTU_BYTES = 1500
SETUP_GRACE_S = 30.0
POLL_S = 0.05


@dataclass(frozen=True)
class Case:
    name: str
    delay_ms: int
    rate_mbps: int | None  # None: no rate limit, delay only
    queue_bytes: int | None  # DropTail capacity; None with rate_mbps None
    min_ours_mbps: float | None = None
    max_deviation_from_mahimahi: float | None = None  # fraction, 0.01 = 1 %

    def describe(self) -> str:
        if self.rate_mbps is None:
            return f"{self.delay_ms} ms, unlimited"
        return f"{self.delay_ms} ms, {self.rate_mbps} Mbit/s, {self.queue_bytes} B"

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
    "a": Case("a", delay_ms=20, rate_mbps=None, queue_bytes=None, min_ours_mbps=2000),
    "b": Case("b", delay_ms=20, rate_mbps=1000, queue_bytes=2_500_000, min_ours_mbps=950),
    "c": Case("c", delay_ms=30, rate_mbps=12, queue_bytes=90_000, max_deviation_from_mahimahi=0.01),
}


@dataclass(frozen=True)
class Measurement:
    throughput_mbps: float  # receiver side, after the warm-up
    moved_gbit: float  # everything the sender sent, warm-up included
    emulator_cpu_s: float  # user + system

    @property
    def cpu_s_per_gbit(self) -> float:
        return self.emulator_cpu_s / self.moved_gbit


@dataclass(frozen=True)
class Row:
    case: Case
    cc: str
    ours: Measurement | None  # None: the run failed (the reason went to stderr)
    mahimahi: Measurement | None


class BenchError(Exception):
    """A run failed; the message says what happened."""


def main() -> int:
    args = parse_args()
    problem = missing_prerequisite(args.emu)
    if problem:
        print(f"emulator_throughput: {problem}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, raise_keyboard_interrupt)
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


def comma_list(allowed: tuple[str, ...]):
    def parse(text: str) -> list[str]:
        items = [item.strip() for item in text.split(",") if item.strip()]
        unknown = [item for item in items if item not in allowed]
        if unknown or not items:
            raise argparse.ArgumentTypeError(f"choose from {','.join(allowed)}; got {text!r}")
        return items
    return parse


def missing_prerequisite(emu: Path) -> str | None:
    if os.geteuid() != 0:
        return "run as root (it creates network namespaces)"
    if not emu.is_file():
        return f"no emulator at {emu}: run 'cargo build --release' in {REPO_ROOT}, or pass --emu PATH"
    if not ANCHOR_INSTALLED_MARK.exists():
        return f"Mahimahi is not installed: run '{ANCHOR} install'"
    for tool in ("iperf3", "nsenter", "ip", "ss"):
        if shutil.which(tool) is None:
            return f"{tool} not found on PATH"
    return None


def raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt


def run_all(args: argparse.Namespace) -> list[Row]:
    netns = f"pbench-{os.getpid()}"
    old_anchor_sysctls = read_sysctls([str(ANCHOR), "exec"])
    rows = []
    try:
        run_checked(["ip", "netns", "add", netns])
        run_checked(["ip", "netns", "exec", netns, "ip", "link", "set", "lo", "up"])
        write_sysctls(["ip", "netns", "exec", netns], TCP_BUFFER_SYSCTLS)
        write_sysctls([str(ANCHOR), "exec"], TCP_BUFFER_SYSCTLS)
        with tempfile.TemporaryDirectory(prefix="pbench-") as tmp:
            Path(tmp).chmod(0o777)  # Mahimahi's client runs as user mmanchor and writes here
            total = len(args.cases) * len(args.cc)
            for index, (case_name, cc) in enumerate(((c, cc) for c in args.cases for cc in args.cc), 1):
                case = CASES[case_name]
                ours = attempt(f"[{index}/{total}] {case.name} {cc} ours",
                               partial(run_ours, args.emu, netns, case, cc, args.seconds, Path(tmp)))
                mahimahi = attempt(f"[{index}/{total}] {case.name} {cc} mahimahi",
                                   partial(run_mahimahi, case, cc, args.seconds, Path(tmp)))
                rows.append(Row(case, cc, ours, mahimahi))
    finally:
        subprocess.run(["ip", "netns", "del", netns], stderr=subprocess.DEVNULL)
        write_sysctls([str(ANCHOR), "exec"], old_anchor_sysctls)
    return rows


def attempt(label: str, run) -> Measurement | None:
    print(f"{label} ...", end=" ", file=sys.stderr, flush=True)
    try:
        result = run()
    except BenchError as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return None
    print(f"{result.throughput_mbps:.1f} Mbit/s, {result.cpu_s_per_gbit:.3f} CPU s/Gbit", file=sys.stderr)
    return result


def run_ours(emu: Path, netns: str, case: Case, cc: str, seconds: int, tmp: Path) -> Measurement:
    server_prefix = ["ip", "netns", "exec", netns]
    link_args = ["--delay", str(case.delay_ms)]
    for direction in ("uplink", "downlink"):
        if case.rate_mbps is None:
            link_args += [f"--{direction}-rate", "unlimited"]
        else:
            link_args += [f"--{direction}-rate", str(case.rate_mbps),
                          f"--{direction}-queue", "droptail", f"--{direction}-queue-bytes", str(case.queue_bytes)]
    client = client_script(cc, seconds, tmp)
    return measure(server_prefix, [*server_prefix, str(emu), *link_args, "--", "sh", "-c", client], seconds, tmp)


def run_mahimahi(case: Case, cc: str, seconds: int, tmp: Path) -> Measurement:
    client = "sh -c " + double_quoted(client_script(cc, seconds, tmp))
    chain = f"mm-delay {case.delay_ms} "
    if case.rate_mbps is not None:
        trace = tmp / f"{case.rate_mbps}mbps.trace"
        write_constant_rate_trace(trace, case.rate_mbps)
        chain += (f"mm-link {trace} {trace} --uplink-queue=droptail --uplink-queue-args=bytes={case.queue_bytes}"
                  f" --downlink-queue=droptail --downlink-queue-args=bytes={case.queue_bytes} -- ")
    return measure([str(ANCHOR), "exec"], [str(ANCHOR), "run", chain + client], seconds, tmp)


def client_script(cc: str, seconds: int, tmp: Path) -> str:
    """The client command: announce its pid, wait for its TCP buffers to be set, run iperf3, report CPU.

    No quote characters, so that it survives the anchor's nested sh -c quoting.
    """
    return (f"echo $(readlink /proc/self/ns/pid) $$ > {tmp}/client.pid; while [ ! -e {tmp}/go ]; do sleep {POLL_S}; done; "
            f"iperf3 -c $MAHIMAHI_BASE -p {IPERF_PORT} -t {seconds} -O {OMIT_S} -C {cc} -J "
            f"--logfile {tmp}/iperf3.json; status=$?; times; exit $status")


def double_quoted(script: str) -> str:
    return '"' + re.sub(r'([\\"$`])', r"\\\1", script) + '"'


def write_constant_rate_trace(path: Path, rate_mbps: int) -> None:
    """A Mahimahi trace: one line per 1500-byte opportunity, its ms timestamp; the file repeats.

    R Mbit/s is R/12 opportunities per ms; the period is the smallest whole number of ms holding a
    whole number of opportunities (1000 Mbit/s: 250 in 3 ms), spread evenly over it.
    """
    per_ms = Fraction(rate_mbps * 1_000_000, 8 * MTU_BYTES * 1000)
    period_ms, count = per_ms.denominator, per_ms.numerator
    path.write_text("".join(f"{k * period_ms // count + 1}\n" for k in range(count)))
    path.chmod(0o644)


def measure(server_prefix: list[str], emulator_argv: list[str], seconds: int, tmp: Path) -> Measurement:
    """Start the iperf3 server, run the emulator with the client inside, and read the results."""
    for stale in ("client.pid", "go", "iperf3.json"):
        (tmp / stale).unlink(missing_ok=True)
    server = subprocess.Popen([*server_prefix, "iperf3", "-s", "-1", "-p", str(IPERF_PORT)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    emulator = None
    try:
        wait_until_listening(server_prefix, server)
        stdout_path, stderr_path = tmp / "emulator.out", tmp / "emulator.err"
        with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
            emulator = subprocess.Popen(emulator_argv, stdout=stdout, stderr=stderr, start_new_session=True)
        deadline = time.monotonic() + seconds + OMIT_S + SETUP_GRACE_S
        client_pid = wait_for_client(tmp / "client.pid", emulator, deadline, stderr_path)
        write_sysctls(["nsenter", "-t", str(client_pid), "-n"], TCP_BUFFER_SYSCTLS)
        (tmp / "go").touch()
        exit_code, cpu_s = wait_with_cpu(emulator, deadline)
        if exit_code != 0:
            raise BenchError(f"exit status {exit_code}; {tail(stderr_path)}{iperf_error(tmp / 'iperf3.json')}")
        throughput_mbps, moved_gbit = read_iperf_report(tmp / "iperf3.json")
        return Measurement(throughput_mbps, moved_gbit, cpu_s - shell_times_s(stdout_path.read_text()))
    finally:
        for process in (emulator, server):
            stop(process)


def wait_until_listening(prefix: list[str], server: subprocess.Popen, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise BenchError(f"iperf3 server exited with status {server.returncode}")
        listening = subprocess.run([*prefix, "ss", "-Hltn", "sport", "=", f":{IPERF_PORT}"],
                                   capture_output=True, text=True).stdout
        if listening.strip():
            return
        time.sleep(POLL_S)
    raise BenchError(f"iperf3 server not listening on port {IPERF_PORT} after {timeout_s} s")


def wait_for_client(pid_path: Path, emulator: subprocess.Popen, deadline: float, stderr_path: Path) -> int:
    """This script's pid for the process that wrote its PID namespace and its pid there to pid_path
    (under pantheon-emu and pantheon-tunnel, a namespace of its own)."""
    while time.monotonic() < deadline:
        fields = pid_path.read_text().split() if pid_path.exists() else []
        if len(fields) == 2 and fields[1].isdigit():
            return pid_outside(fields[0], int(fields[1]))
        if emulator.poll() is not None:
            raise BenchError(f"emulator exited with status {emulator.returncode} before the client started; "
                             f"{tail(stderr_path)}")
        time.sleep(POLL_S)
    raise BenchError("client did not start in time")


def wait_with_cpu(process: subprocess.Popen, deadline: float) -> tuple[int, float]:
    """Reap process with wait4(): exit code, and user + system CPU s of it and the descendants it reaped."""
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode, usage.ru_utime + usage.ru_stime
        time.sleep(POLL_S)
    raise BenchError("run did not finish in time")


def read_iperf_report(path: Path) -> tuple[float, float]:
    """Receiver-side Mbit/s after the warm-up, and Gbit sent over the whole test (warm-up included)."""
    try:
        report = json.loads(path.read_text())
        return (report["end"]["sum_received"]["bits_per_second"] / 1e6,
                sum(interval["sum"]["bytes"] for interval in report["intervals"]) * 8 / 1e9)
    except (OSError, ValueError, KeyError) as error:
        raise BenchError(f"unreadable iperf3 report {path}: {error!r}") from None


def shell_times_s(text: str) -> float:
    """Sum of the four figures the shell builtin `times` prints ('0m1.230000s 0m0.450000s' x2)."""
    figures = re.findall(r"(\d+)m([\d.]+)s", text)
    if len(figures) != 4:
        raise BenchError(f"cannot read the client's CPU times from {text!r}")
    return sum(int(minutes) * 60 + float(seconds) for minutes, seconds in figures)


def stop(process: subprocess.Popen | None, grace_s: float = 5.0) -> None:
    """End a process this script started, and its descendants: SIGTERM, then SIGKILL after grace_s.

    Descendants are found by pid rather than by process group, because su puts Mahimahi's shells in a
    session of their own.
    """
    if process is None or process.poll() is not None:
        return
    tree = process_tree(process.pid)
    send_signal(tree, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and (process.poll() is None or any(alive(pid) for pid in tree[1:])):
        time.sleep(POLL_S)
    send_signal([pid for pid in tree if alive(pid)], signal.SIGKILL)
    process.wait()


def process_tree(root_pid: int) -> list[int]:
    """root_pid and its descendants, from the parent pid field of /proc/<pid>/stat."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent_pid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent_pid, []).append(int(stat.parent.name))
    tree, pending = [], [root_pid]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending += children.get(pid, [])
    return tree


def alive(pid: int) -> bool:
    """True while pid exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def send_signal(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def read_sysctls(prefix: list[str]) -> dict[str, str]:
    return {key: run_checked([*prefix, "sysctl", "-n", key]).strip().replace("\t", " ")
            for key in TCP_BUFFER_SYSCTLS}


def write_sysctls(prefix: list[str], values: dict[str, str]) -> None:
    run_checked([*prefix, "sysctl", "-qw", *(f"{key}={value}" for key, value in values.items())])


def run_checked(argv: list[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise BenchError(f"{shlex.join(argv)} failed: {result.stderr.strip()}")
    return result.stdout


def tail(path: Path, lines: int = 5) -> str:
    text = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return " | ".join(text[-lines:]) or "no stderr"


def iperf_error(report_path: Path) -> str:
    try:
        return "; iperf3: " + json.loads(report_path.read_text())["error"]
    except (OSError, ValueError, KeyError):
        return ""


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


def number(value: float | None, decimals: int) -> str:
    return "-" if value is None else f"{value:.{decimals}f}"


if __name__ == "__main__":
    sys.exit(main())
