#!/usr/bin/env python3
"""How fast pantheon-tunnel carries a bulk TCP flow over a 1 Gbit/s path (issue 16 §3), and what its
authentication costs (§4).

What is measured
    Two network namespaces ("hosts") joined by a veth pair, each end shaped to RATE by a token
    bucket (tc tbf) inside its namespace: a 1 Gbit/s path with no emulator. One iperf3 flow (kernel
    TCP, Cubic) runs from the first to the second for --seconds after OMIT_S of warm-up; the figure
    is iperf3's receiver-side throughput. Each run measures, back to back:

      bare      iperf3 straight over the veth pair: the anchor every ratio is taken against
      tunnel    iperf3 inside pantheon-tunnel (this checkout's build): server endpoint in the second
                namespace, client in the first, with every log the harness keeps (ingress, egress,
                their text forms, the clock exchanges), the session key from a 0600 file
      baseline  (with --baseline BIN) the same through another pantheon-tunnel build, e.g. the one
                before the datagrams were authenticated (it takes --token, prints its token, and
                has no --clock-log): the cost of the tag and the anti-replay window is
                tunnel / baseline

    CPU: for the tunnels, the user + system CPU seconds of both endpoints' process trees (each
    reaped with wait4: the endpoint, its shell and iperf3) per Gbit delivered; iperf3's share is the
    same in both tunnels, so the difference between them is what the endpoints themselves spend.
    On a busy machine this is steadier than the throughput, which falls as the endpoints get less
    CPU.

    A tunnelled TCP segment carries 1412 bytes of payload per 1500-byte packet on the path (36
    bytes of tunnel overhead), a bare one 1448, so tunnel/bare is at most 1412/1448 = 0.975.
    Goals: tunnel >= 900 Mbit/s; tunnel/baseline >= 0.98.

How to run (root; iperf3 installed; a timing measurement, so under the shared lock)
    flock /work/bench.lock python3 bench/tunnel_speed.py [--runs 3] [--seconds 10] [--baseline BIN]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import support
from pantheon.harness.tunnel import EndpointLogs, write_session_key

REPO = support.REPO

TUNNEL = REPO / "target" / "release" / "pantheon-tunnel"
RATE = "1gbit"
# 1 ms of the rate: the bucket lets a 64 KiB TSO burst through whole.
BURST = "125kb"
LATENCY = "20ms"
OMIT_S = 1
IPERF_PORT = 5401
ADDRS = ("10.77.0.1", "10.77.0.2")
INNER_SERVER = "10.100.0.1"
CONNECT_LINE = re.compile(r"^pantheon-tunnel client \S+:(?P<port>\d+)(?: --token (?P<token>\S+))?$")
GOAL_MBPS = 900
GOAL_MAC_RATIO = 0.98


def sh(argv: list[str]) -> None:
    subprocess.run(argv, check=True, capture_output=True)


@contextmanager
def two_hosts() -> Iterator[tuple[str, str]]:
    tag = f"ptspeed-{os.getpid()}"
    names = (f"{tag}-a", f"{tag}-b")
    try:
        for name in names:
            sh(["ip", "netns", "add", name])
            sh(["ip", "-n", name, "link", "set", "lo", "up"])
        sh(["ip", "link", "add", "pts0", "netns", names[0], "type", "veth", "peer", "name", "pts1", "netns", names[1]])
        for name, dev, addr in zip(names, ("pts0", "pts1"), ADDRS):
            sh(["ip", "-n", name, "addr", "add", f"{addr}/24", "dev", dev])
            sh(["ip", "-n", name, "link", "set", dev, "up"])
            sh(["ip", "netns", "exec", name, "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
                "rate", RATE, "burst", BURST, "latency", LATENCY])
        yield names
    finally:
        for name in names:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


def in_ns(name: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", name, *argv]


def iperf_client(host: str, seconds: int, report: Path) -> list[str]:
    return ["iperf3", "-c", host, "-p", str(IPERF_PORT), "-t", str(seconds), "-O", str(OMIT_S), "-J", "--logfile", str(report)]


def received_mbps(report: Path) -> float:
    end = json.loads(report.read_text())
    if "error" in end:
        raise RuntimeError(f"iperf3: {end['error']}")
    return end["end"]["sum_received"]["bits_per_second"] / 1e6


def run_bare(hosts: tuple[str, str], seconds: int, tmp: Path) -> float:
    report = tmp / "bare.json"
    report.unlink(missing_ok=True)
    server = subprocess.Popen(in_ns(hosts[1], ["iperf3", "-s", "-1", "-p", str(IPERF_PORT)]), stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        sh(in_ns(hosts[0], iperf_client(ADDRS[1], seconds, report)))
        server.wait(timeout=10)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return received_mbps(report)


def reap_cpu_s(process: subprocess.Popen, timeout_s: float) -> float:
    """Waits for `process` (killing it after `timeout_s`); the CPU seconds of it and of every
    descendant it reaped."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pid, _, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = 0
            return usage.ru_utime + usage.ru_stime
        time.sleep(0.05)
    process.kill()
    _, _, usage = os.wait4(process.pid, 0)
    process.returncode = -9
    raise RuntimeError(f"{process.args[3]} {process.args[4]} did not end within {timeout_s:g} s")


def run_tunnel(hosts: tuple[str, str], seconds: int, tmp: Path, binary: Path, baseline: bool) -> tuple[float, float]:
    """iperf3 through a tunnel built by `binary` (`baseline`: one with the older --token interface):
    (Mbit/s, CPU seconds of both endpoints' trees)."""
    report, key = tmp / "tunnel.json", tmp / "session.key"
    for stale in (report, key):
        stale.unlink(missing_ok=True)
    write_session_key(key)
    server_logs, client_logs = EndpointLogs.under(tmp, "server", clock=True), EndpointLogs.under(tmp, "client", clock=True)

    def options(logs: EndpointLogs) -> list[str]:
        everything = logs.options()
        return everything[:-2] if baseline else ["--key-file", str(key), *everything]

    server_argv = [str(binary), "server", "--listen", f"{ADDRS[1]}:0", *options(server_logs), "--",
                   "iperf3", "-s", "-1", "-p", str(IPERF_PORT)]
    server = subprocess.Popen(in_ns(hosts[1], server_argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = None
    try:
        match = CONNECT_LINE.match(server.stdout.readline().strip())
        if not match:
            raise RuntimeError(f"the tunnel server did not start: {server.stderr.read()}")
        token = ["--token", match["token"]] if baseline else []
        # The linger lets the connection close through the tunnel before the client's end goes.
        inner = f"sleep 0.5 && {shlex.join(iperf_client(INNER_SERVER, seconds, report))} && sleep 1"
        client_argv = [str(binary), "client", f"{ADDRS[1]}:{match['port']}", *token, *options(client_logs), "--", "sh", "-c", inner]
        client = subprocess.Popen(in_ns(hosts[0], client_argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cpu_s = reap_cpu_s(client, seconds + 60) + reap_cpu_s(server, 10)
    finally:
        for process in (server, client):
            if process is not None and process.returncode is None:
                process.kill()
                os.waitpid(process.pid, 0)
                process.returncode = -9
    return received_mbps(report), cpu_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--baseline", type=Path, help="another pantheon-tunnel build (the --token interface)")
    args = parser.parse_args()
    if os.geteuid() != 0 or not TUNNEL.exists():
        print(f"tunnel_speed: needs root and {TUNNEL}", file=sys.stderr)
        return 2
    figures: dict[str, list[float]] = {"bare": [], "tunnel": []}
    cpu_s_per_gbit: dict[str, list[float]] = {"tunnel": []}
    if args.baseline:
        figures["baseline"], cpu_s_per_gbit["baseline"] = [], []
    with two_hosts() as hosts, tempfile.TemporaryDirectory(prefix="tunnel-speed-") as scratch:
        tmp = Path(scratch)
        for run in range(args.runs):
            figures["bare"].append(run_bare(hosts, args.seconds, tmp))
            for name, binary in (("tunnel", TUNNEL), ("baseline", args.baseline)):
                if binary:
                    mbps, cpu_s = run_tunnel(hosts, args.seconds, tmp, binary, baseline=name == "baseline")
                    figures[name].append(mbps)
                    cpu_s_per_gbit[name].append(cpu_s / (mbps / 1000 * (args.seconds + OMIT_S)))
            print(f"run {run + 1}: " + ", ".join(f"{name} {values[-1]:.0f}" for name, values in figures.items()) + " Mbit/s; "
                  + ", ".join(f"{name} {values[-1]:.2f}" for name, values in cpu_s_per_gbit.items()) + " CPU s/Gbit", flush=True)
    medians = {name: statistics.median(values) for name, values in figures.items()}
    print(f"\n{args.runs} runs of {args.seconds} s (+{OMIT_S} s warm-up), veth shaped to {RATE} each way; median Mbit/s:")
    for name, median in medians.items():
        print(f"  {name:9s} {median:7.1f}   /bare {median / medians['bare']:.3f}   (runs: {', '.join(f'{v:.0f}' for v in figures[name])})")
    for name, values in cpu_s_per_gbit.items():
        print(f"  {name:9s} {statistics.median(values):.2f} CPU s/Gbit (both endpoints' trees)")
    print(f"  tunnel >= {GOAL_MBPS} Mbit/s: {'yes' if medians['tunnel'] >= GOAL_MBPS else 'NO'}")
    if "baseline" in medians:
        ratio = medians["tunnel"] / medians["baseline"]
        print(f"  tunnel/baseline {ratio:.3f} (authentication's cost {100 * (1 - ratio):+.1f} %): "
              f"{'within' if ratio >= GOAL_MAC_RATIO else 'OVER'} the {100 * (1 - GOAL_MAC_RATIO):.0f} % goal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
