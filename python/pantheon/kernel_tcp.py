"""Kernel TCP as a Pantheon scheme: a bulk sender and a receiver, each a full-throttle flow that
runs until it is killed, using the kernel's congestion control chosen per socket with
TCP_CONGESTION (tcp(7)). Cubic (RFC 8312), BBR (Cardwell et al., ACM Queue 2016) and Reno
(RFC 5681) are built into this kernel; Vegas needs the tcp_vegas module, which it lacks.

    python -m pantheon.kernel_tcp receiver PORT [--bind ADDR]
    python -m pantheon.kernel_tcp sender HOST PORT --cc cubic [--log FILE]

The receiver listens (it runs first) and drains one connection; the sender connects and writes as
fast as the socket accepts. SIGTERM or SIGINT end either quietly with status 0.

`--log FILE` reads the socket's state every 10 ms (TCP_INFO, and TCP_CC_INFO for BBR's model;
tcp(7), linux/tcp.h, linux/inet_diag.h) and writes a line of it, in the columns of pantheon-udp's
`--log` first, so that a userspace twin's log and its kernel scheme's compare column for column:

    t_us cwnd_bytes pacing_rate_bps srtt_us rtt_us inflight_bytes delivery_rate_bps min_rtt_us
    ca_state retransmitted_packets btlbw_bps

t_us counts from the connection's start; rtt_us (the latest sample, which TCP_INFO does not
give) is `-`; inflight is Linux's tcp_packets_in_flight (unacknowledged, less SACKed and lost,
plus retransmitted) in MSS-sized bytes; ca_state is the loss-recovery state (open, disorder, cwr,
recovery, loss); retransmitted_packets counts the connection's retransmissions so far; btlbw_bps
is BBR's bandwidth estimate (`-` for other algorithms).
"""
from __future__ import annotations

import argparse
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

from pantheon.errors import PantheonError

CHUNK_BYTES = 1 << 16
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
LOG_INTERVAL_S = 0.01
LOG_HEADER = ("# t_us cwnd_bytes pacing_rate_bps srtt_us rtt_us inflight_bytes delivery_rate_bps min_rtt_us "
              "ca_state retransmitted_packets btlbw_bps\n")
TCP_INFO = struct.Struct("=8B24I4Q2I4IQ")
"""struct tcp_info (linux/tcp.h) up to tcpi_delivery_rate: 8 one-byte fields, 24 u32 from tcpi_rto
to tcpi_total_retrans, then tcpi_pacing_rate, max_pacing_rate, bytes_acked, bytes_received (u64),
segs_out, segs_in, notsent_bytes, min_rtt, data_segs_in, data_segs_out (u32), delivery_rate."""
TCP_CC_INFO = 26
"""getsockopt of the algorithm's own state (linux/tcp.h); BBR's is struct tcp_bbr_info."""
TCP_BBR_INFO = struct.Struct("=5I")
"""bbr_bw_lo, bbr_bw_hi (the bandwidth estimate in bytes per second), bbr_min_rtt (µs),
bbr_pacing_gain, bbr_cwnd_gain (<< 8) (linux/inet_diag.h)."""
CA_STATES = ("open", "disorder", "cwr", "recovery", "loss")


class Stop(Exception):
    """Raised by the signal handler to end the flow."""


def _stop(signum: int, frame: object) -> None:
    raise Stop


def available_congestion_controls() -> list[str]:
    return AVAILABLE.read_text().split()


def check_congestion_control(cc: str) -> None:
    """A PantheonError saying what to do when the kernel cannot run `cc`."""
    available = available_congestion_controls()
    if cc not in available:
        raise PantheonError(
            f"kernel congestion control '{cc}' is not available on this machine "
            f"(available: {' '.join(available)}); load its module (modprobe tcp_{cc}) or pick another"
        )


def state_line(sock: socket.socket, t_us: int, bbr: bool) -> str:
    """One line of `--log` for the socket's state now (the module's docstring has the columns);
    `bbr`: the socket runs BBR, whose model TCP_CC_INFO gives."""
    info = TCP_INFO.unpack(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO.size))
    ca_state = info[1]
    mss, unacked, sacked, lost, retrans = info[10], info[12], info[13], info[14], info[15]
    srtt_us, cwnd_packets, total_retrans = info[23], info[26], info[31]
    pacing_rate_bytes, min_rtt_us, delivery_rate_bytes = info[32], info[39], info[42]
    inflight_packets = unacked - sacked - lost + retrans
    btlbw = "-"
    if bbr:
        bw_lo, bw_hi, *_ = TCP_BBR_INFO.unpack(sock.getsockopt(socket.IPPROTO_TCP, TCP_CC_INFO, TCP_BBR_INFO.size))
        btlbw = str(((bw_hi << 32) | bw_lo) * 8)
    state = CA_STATES[ca_state] if ca_state < len(CA_STATES) else str(ca_state)
    return (f"{t_us} {cwnd_packets * mss} {pacing_rate_bytes * 8} {srtt_us} - {inflight_packets * mss} "
            f"{delivery_rate_bytes * 8} {min_rtt_us} {state} {total_retrans} {btlbw}\n")


def log_state(sock: socket.socket, bbr: bool, out: TextIO, start_s: float, stop: threading.Event) -> None:
    """Writes `state_line` every LOG_INTERVAL_S until `stop` is set or the socket is gone."""
    next_s = start_s
    while not stop.wait(max(0.0, next_s - time.monotonic())):
        try:
            out.write(state_line(sock, int((time.monotonic() - start_s) * 1e6), bbr))
        except OSError:
            return
        next_s = max(next_s + LOG_INTERVAL_S, time.monotonic())  # late: the next line 10 ms on, not a burst


def send(host: str, port: int, cc: str, log: Path | None = None) -> None:
    check_congestion_control(cc)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    out = open(log, "w") if log else None  # noqa: SIM115 - closed below, after its writer stops
    stop = threading.Event()
    writer = None
    try:
        sock.connect((host, port))
        if out:
            out.write(LOG_HEADER)
            writer = threading.Thread(target=log_state, args=(sock, cc == "bbr", out, time.monotonic(), stop), daemon=True)
            writer.start()
        chunk = bytes(CHUNK_BYTES)
        while True:
            sock.sendall(chunk)
    finally:
        stop.set()
        if writer:
            writer.join()
        if out:
            out.close()


def receive(port: int, bind: str) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((bind, port))
    listener.listen(1)
    conn, _ = listener.accept()
    buffer = bytearray(CHUNK_BYTES)
    while conn.recv_into(buffer):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pantheon.kernel_tcp", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="role", required=True)
    rx = sub.add_parser("receiver", help="listen on PORT and drain one connection")
    rx.add_argument("port", type=int)
    rx.add_argument("--bind", default="0.0.0.0", help="address to listen on (default all)")
    tx = sub.add_parser("sender", help="connect to HOST:PORT and send at full throttle")
    tx.add_argument("host")
    tx.add_argument("port", type=int)
    tx.add_argument("--cc", required=True, help="kernel congestion control, e.g. cubic, bbr, reno")
    tx.add_argument("--log", type=Path, metavar="FILE",
                    help="write the socket's state (cwnd, pacing rate, RTT, BBR's model) every 10 ms to FILE")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        if args.role == "sender":
            send(args.host, args.port, args.cc, args.log)
        else:
            receive(args.port, args.bind)
    except Stop:
        return 0
    except PantheonError as e:
        print(f"kernel_tcp: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"kernel_tcp {args.role}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
