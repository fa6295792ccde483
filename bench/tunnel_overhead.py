#!/usr/bin/env python3
"""What the instrumented tunnel costs a fast flow: iperf3 through an emulated path, with and without
pantheon-tunnel, in the same run.

What is measured
    One iperf3 flow (kernel TCP, Cubic and BBR) from inside pantheon-emu's emulated path (the uplink)
    to an iperf3 server on the far side, over case b of bench/emulator_throughput.py: 20 ms each way,
    1000 Mbit/s each way, DropTail queues of 2 500 000 bytes. Each congestion control runs twice:
      without  iperf3 -c in the emulated namespace, iperf3 -s in this script's namespace;
      with     the same, with a pantheon-tunnel endpoint around each: the server endpoint in this
               script's namespace (iperf3 -s is its command), the client endpoint inside the emulated
               namespace, connecting out through the path (iperf3 -c is its command). Every datagram
               is logged at both ends (native and text logs, ingress and egress, to a temporary
               directory), as in an experiment.
    Throughput is iperf3's receiver-side figure after OMIT_S seconds of warm-up. Through the tunnel
    each 1500-byte packet on the path carries 36 bytes of encapsulation, so TCP goodput tops out at
    1000 * 1424/1500 = 949 Mbit/s instead of 1000 * 1448/1500 = 965 Mbit/s: 1.7 % of the cost is
    the encapsulation itself. Target: the tunnel costs at most 10 % (with/without >= 0.90).

CPU seconds per Gbit
    As in emulator_throughput.py: wait4() rusage of the emulator (whose command tree now holds the
    client endpoint) minus the iperf3 client's own CPU (the shell builtin `times` of the shell that
    runs it), plus the server endpoint's own CPU (its threads, from /proc/PID/stat, read when the
    emulator has finished), per Gbit the sender moved. So "without" is the emulator alone, and
    "with" is the emulator plus both tunnel endpoints.

TCP buffers
    tcp_rmem/tcp_wmem as in emulator_throughput.py, in every namespace iperf3 runs in: this
    script's, the emulator's inner one and the tunnel endpoints' (the tunnel server's command sets
    its own; the client's are set through nsenter while it waits for the go-ahead).

Run as root, from anywhere (after cargo build --release):
    python3 bench/tunnel_overhead.py [--seconds 10] [--cc cubic,bbr]
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import support
from pantheon.harness.tunnel import parse_connect_line, write_session_key
from support import figures, iperf, link, processes, tcp_buffers, tunnel

EMU = support.BIN / "pantheon-emu"
TUNNEL = support.BIN / "pantheon-tunnel"
LINK = link.GIGABIT
TARGET_RATIO = 0.90


@dataclass(frozen=True)
class Row:
    cc: str
    without: iperf.Measurement | None
    with_tunnel: iperf.Measurement | None


def main() -> int:
    args = parse_args()
    problem = missing_prerequisite()
    if problem:
        print(f"tunnel_overhead: {problem}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, processes.raise_keyboard_interrupt)
    try:
        rows = run_all(args)
    except processes.BenchError as error:
        print(f"tunnel_overhead: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tunnel_overhead: interrupted; namespaces and processes cleaned up", file=sys.stderr)
        return 130
    print_table(rows, args.seconds)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="iperf3 through pantheon-emu (case b: 20 ms, 1000 Mbit/s) with and without pantheon-tunnel.")
    parser.add_argument("--seconds", type=int, default=10,
                        help=f"measured seconds per run, after {iperf.OMIT_S} s of warm-up (default 10)")
    parser.add_argument("--cc", type=figures.comma_list(("cubic", "bbr", "reno")), default=["cubic", "bbr"],
                        help="kernel congestion controls, comma-separated (default cubic,bbr)")
    return parser.parse_args()


def missing_prerequisite() -> str | None:
    if os.geteuid() != 0:
        return "run as root (it creates network namespaces)"
    for binary in (EMU, TUNNEL):
        if not binary.is_file():
            return f"no {binary.name} at {binary}: run 'cargo build --release' in {support.REPO}"
    for tool in ("iperf3", "nsenter", "ip", "ss", "sysctl"):
        if shutil.which(tool) is None:
            return f"{tool} not found on PATH"
    return None


def run_all(args: argparse.Namespace) -> list[Row]:
    netns = f"ptbench-{os.getpid()}"
    rows = []
    with tcp_buffers.tcp_netns(netns), tempfile.TemporaryDirectory(prefix="ptbench-") as tmp:
        for index, cc in enumerate(args.cc, 1):
            label = f"[{index}/{len(args.cc)}] {cc}"
            without = iperf.attempt(f"{label} without the tunnel", partial(run_without, netns, cc, args.seconds, Path(tmp)))
            with_tunnel = iperf.attempt(f"{label} with the tunnel", partial(run_with, netns, cc, args.seconds, Path(tmp)))
            rows.append(Row(cc, without, with_tunnel))
    return rows


def run_without(netns: str, cc: str, seconds: int, tmp: Path) -> iperf.Measurement:
    prefix = ["ip", "netns", "exec", netns]
    client = iperf.client_script(cc, seconds, tmp)
    return iperf.measure(prefix, [*prefix, str(EMU), *LINK.emulator_options(), "--", "sh", "-c", client], seconds, tmp)


def run_with(netns: str, cc: str, seconds: int, tmp: Path) -> iperf.Measurement:
    """The server endpoint (running iperf3 -s) here, the client endpoint (running iperf3 -c) behind the emulator."""
    for stale in ("client.pid", "go", "iperf3.json", "server.pid", "session.key"):
        (tmp / stale).unlink(missing_ok=True)
    logs = tmp / "logs"
    logs.mkdir(exist_ok=True)
    buffers = " ".join(f"{key}='{value}'" for key, value in tcp_buffers.TCP_BUFFER_SYSCTLS.items())
    server_script = f"sysctl -qw {buffers} && echo $(readlink /proc/self/ns/pid) $$ > {tmp}/server.pid && exec iperf3 -s -1 -p {iperf.IPERF_PORT} > /dev/null 2>&1"
    deadline = time.monotonic() + seconds + iperf.OMIT_S + iperf.SETUP_GRACE_S
    server = emulator = None
    key = write_session_key(tmp / "session.key")
    try:
        with open(tmp / "tunnel-server.err", "wb") as stderr:
            server = subprocess.Popen(
                ["ip", "netns", "exec", netns, str(TUNNEL), "server", "--key-file", str(key), *tunnel.log_options(logs, "server"), "--", "sh", "-c", server_script],
                stdout=subprocess.PIPE, stderr=stderr, start_new_session=True)
        port = read_connect_line(server, tmp / "tunnel-server.err")
        server_pid = iperf.wait_for_client(tmp / "server.pid", server, deadline, tmp / "tunnel-server.err")
        iperf.wait_until_listening(["nsenter", "-t", str(server_pid), "-n"], server)

        inner = shlex_quote_free(iperf.client_script(cc, seconds, tmp))
        client = (f"exec {TUNNEL} client $MAHIMAHI_BASE:{port} --key-file {key} {' '.join(tunnel.log_options(logs, 'client'))} "
                  f"-- sh -c '{inner}'")
        stdout_path, stderr_path = tmp / "emulator.out", tmp / "emulator.err"
        with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
            emulator = subprocess.Popen(["ip", "netns", "exec", netns, str(EMU), *LINK.emulator_options(), "--", "sh", "-c", client],
                                        stdout=stdout, stderr=stderr, start_new_session=True)
        client_pid = iperf.wait_for_client(tmp / "client.pid", emulator, deadline, stderr_path)
        tcp_buffers.write_sysctls(["nsenter", "-t", str(client_pid), "-n"], tcp_buffers.TCP_BUFFER_SYSCTLS)
        (tmp / "go").touch()
        exit_code, emulator_cpu_s = iperf.wait_with_cpu(emulator, deadline)
        if exit_code != 0:
            raise processes.BenchError(f"exit status {exit_code}; {processes.tail(stderr_path)}{iperf.iperf_error(tmp / 'iperf3.json')}")
        server_cpu_s = own_cpu_s(server.pid)
        throughput_mbps, moved_gbit = iperf.read_iperf_report(tmp / "iperf3.json")
        cpu_s = emulator_cpu_s - iperf.shell_times_s(stdout_path.read_text()) + server_cpu_s
        return iperf.Measurement(throughput_mbps, moved_gbit, cpu_s)
    finally:
        for process in (emulator, server):
            processes.stop(process)
        if "warning" in processes.tail(tmp / "tunnel-server.err") + processes.tail(tmp / "emulator.err"):
            print(f"\n  tunnel warnings: {processes.tail(tmp / 'tunnel-server.err')} | {processes.tail(tmp / 'emulator.err')}", file=sys.stderr)


def own_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process's own threads (not its children), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def shlex_quote_free(script: str) -> str:
    if "'" in script:
        raise processes.BenchError("the client script must not contain single quotes")
    return script


def read_connect_line(server: subprocess.Popen, stderr_path: Path, timeout_s: float = 10.0) -> int:
    """The port from the tunnel server's first line of output."""
    ready, _, _ = select.select([server.stdout], [], [], timeout_s)
    line = server.stdout.readline().decode(errors="replace") if ready else ""
    try:
        return parse_connect_line(line)[1]
    except ValueError as e:
        raise processes.BenchError(f"{e}; {processes.tail(stderr_path)}") from None


def print_table(rows: list[Row], seconds: int) -> None:
    header = ("cc", "without Mbit/s", "with Mbit/s", "with/without", "tunnel cost",
              "CPU s/Gbit without", "CPU s/Gbit with", f"target >= {TARGET_RATIO:.2f}")
    lines = [header]
    for row in rows:
        without = row.without.throughput_mbps if row.without else None
        with_tunnel = row.with_tunnel.throughput_mbps if row.with_tunnel else None
        ratio = with_tunnel / without if without and with_tunnel else None
        lines.append((
            row.cc, figures.number(without, 1), figures.number(with_tunnel, 1), figures.number(ratio, 3),
            "-" if ratio is None else f"{1 - ratio:.1%}",
            figures.number(row.without.cpu_s_per_gbit if row.without else None, 3),
            figures.number(row.with_tunnel.cpu_s_per_gbit if row.with_tunnel else None, 3),
            {True: "yes", False: "NO", None: "?"}[None if ratio is None else ratio >= TARGET_RATIO],
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    print(f"\nPath: {LINK.describe()} each way (case b of emulator_throughput.py). Throughput: iperf3 receiver side, "
          f"{seconds} s after {iperf.OMIT_S} s warm-up, one flow, uplink. Encapsulation alone caps the tunnel at "
          f"1424/1448 = 0.983 of the flow without it.")
    print("CPU s/Gbit: without = the emulator; with = the emulator and both tunnel endpoints (wait4 rusage minus "
          "the iperf3 client's `times`, plus the server endpoint's own CPU), per Gbit sent, warm-up included.")


if __name__ == "__main__":
    sys.exit(main())
