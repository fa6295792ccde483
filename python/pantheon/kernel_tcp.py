"""Kernel TCP as a Pantheon scheme: a bulk sender and a receiver, each a full-throttle flow that
runs until it is killed, or finite transfers, using the kernel's congestion control chosen per
socket with TCP_CONGESTION (tcp(7)). Cubic (RFC 8312), BBR (Cardwell et al., ACM Queue 2016) and
Reno (RFC 5681) are built into this kernel; Vegas needs the tcp_vegas module, which it lacks.

    python -m pantheon.kernel_tcp receiver PORT [--bind ADDR] [--transfers-log FILE]
    python -m pantheon.kernel_tcp sender HOST PORT --cc cubic [--log FILE]
    python -m pantheon.kernel_tcp sender HOST PORT --cc cubic --bytes N [--transfer-id K]

The receiver listens (it runs first) and drains one connection; the sender connects and writes as
fast as the socket accepts. SIGTERM or SIGINT end either quietly with status 0.

A finite transfer (`--bytes N`, `transfer`) connects, sends a 12-byte header (the transfer's id,
u32, and N, u64, big-endian) then N bytes, shuts its side down and waits for the receiver to
close, then exits 0. A receiver with `--transfers-log FILE` serves any number of connections at
once (one thread, epoll(7) through `selectors`: a thread per connection would cost more than the
transfers at hundreds of arrivals a second) and, for each that brought a header and its N bytes,
writes the line `transfer_id end_epoch_us` (CLOCK_REALTIME µs when the last byte was read),
flushed at once, and closes the connection. The transfer driver (`pantheon.transfers`) runs many
finite transfers in one process with `transfer`.

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
import selectors
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
TRANSFER_HEADER = struct.Struct(">IQ")
"""A finite transfer's header: its id (u32) and its size in bytes (u64), big-endian."""
ZEROS = memoryview(bytes(CHUNK_BYTES))
"""What finite transfers send, shared by every transfer of a process."""
LISTEN_BACKLOG = 1024
"""Connections the kernel queues before the receiver accepts them: a burst of arrivals waits
there, not refused (capped by net.core.somaxconn)."""
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


def transfer(host: str, port: int, cc: str, transfer_id: int, n_bytes: int) -> None:
    """One finite transfer (the module's docstring): returns once the receiver has closed the
    connection, having had every byte; OSError if the connection fails."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
        sock.connect((host, port))
        first_bytes = min(n_bytes, CHUNK_BYTES - TRANSFER_HEADER.size)
        # The header rides in the first segment with the data, as an application's request would.
        sock.sendall(TRANSFER_HEADER.pack(transfer_id, n_bytes) + ZEROS[:first_bytes])
        rest_bytes = n_bytes - first_bytes
        while rest_bytes > 0:
            rest_bytes -= sock.send(ZEROS[: min(rest_bytes, CHUNK_BYTES)])
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(CHUNK_BYTES):
            pass


def listen(port: int, bind: str, backlog: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((bind, port))
    listener.listen(backlog)
    return listener


def receive(port: int, bind: str) -> None:
    listener = listen(port, bind, 1)
    conn, _ = listener.accept()
    buffer = bytearray(CHUNK_BYTES)
    while conn.recv_into(buffer):
        pass


class Incoming:
    """A finite transfer being received: its header, then a count of the bytes still to come."""

    def __init__(self) -> None:
        self.header = bytearray()
        self.transfer_id = 0
        self.remaining_bytes = -1
        """-1 until the header is whole."""

    def take(self, data: memoryview) -> bool:
        """Counts `data` in; True once the header and all its bytes have come."""
        if self.remaining_bytes < 0:
            need = TRANSFER_HEADER.size - len(self.header)
            self.header += data[:need]
            data = data[need:]
            if len(self.header) < TRANSFER_HEADER.size:
                return False
            self.transfer_id, self.remaining_bytes = TRANSFER_HEADER.unpack(self.header)
        self.remaining_bytes = max(0, self.remaining_bytes - len(data))
        return self.remaining_bytes == 0


def receive_transfers(port: int, bind: str, log: TextIO) -> None:
    """Serves finite transfers until stopped, logging each one's end (the module's docstring)."""
    listener = listen(port, bind, LISTEN_BACKLOG)
    listener.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, None)
    buffer = bytearray(CHUNK_BYTES)
    view = memoryview(buffer)

    def close(conn: socket.socket) -> None:
        selector.unregister(conn)
        conn.close()

    while True:
        for key, _ in selector.select():
            if key.data is None:
                while True:
                    try:
                        accepted, _ = listener.accept()
                    except BlockingIOError:
                        break
                    accepted.setblocking(False)
                    selector.register(accepted, selectors.EVENT_READ, Incoming())
                continue
            conn = key.fileobj
            assert isinstance(conn, socket.socket)
            incoming: Incoming = key.data
            try:
                n = conn.recv_into(buffer)
            except BlockingIOError:
                continue
            except OSError:
                close(conn)
                continue
            if n == 0:
                close(conn)  # ended before its last byte (or never sent a header): nothing to log
            elif incoming.take(view[:n]):
                log.write(f"{incoming.transfer_id} {time.time_ns() // 1000}\n")
                log.flush()
                close(conn)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pantheon.kernel_tcp", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="role", required=True)
    rx = sub.add_parser("receiver", help="listen on PORT and drain one connection (or serve finite transfers)")
    rx.add_argument("port", type=int)
    rx.add_argument("--bind", default="0.0.0.0", help="address to listen on (default all)")
    rx.add_argument("--transfers-log", type=Path, metavar="FILE",
                    help="serve any number of finite transfers at once and write 'transfer_id end_epoch_us' "
                         "(µs since the epoch at the last byte) to FILE for each one completed")
    tx = sub.add_parser("sender", help="connect to HOST:PORT and send at full throttle (or N bytes)")
    tx.add_argument("host")
    tx.add_argument("port", type=int)
    tx.add_argument("--cc", required=True, help="kernel congestion control, e.g. cubic, bbr, reno")
    tx.add_argument("--log", type=Path, metavar="FILE",
                    help="write the socket's state (cwnd, pacing rate, RTT, BBR's model) every 10 ms to FILE")
    tx.add_argument("--bytes", type=int, metavar="N",
                    help="send one finite transfer of N bytes behind a 12-byte header, wait for the receiver "
                         "to close, and exit 0 (default: bulk, until stopped)")
    tx.add_argument("--transfer-id", type=int, default=0, metavar="K", help="the finite transfer's id (default 0)")
    args = parser.parse_args(argv)
    if args.role == "sender" and args.bytes is not None:
        if not 0 <= args.bytes < 1 << 64:
            parser.error("--bytes must be from 0 to 2^64 - 1")
        if not 0 <= args.transfer_id < 1 << 32:
            parser.error("--transfer-id must be from 0 to 2^32 - 1")
        if args.log:
            parser.error("--log is for a bulk flow, not with --bytes")
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        if args.role == "sender" and args.bytes is not None:
            check_congestion_control(args.cc)
            transfer(args.host, args.port, args.cc, args.transfer_id, args.bytes)
        elif args.role == "sender":
            send(args.host, args.port, args.cc, args.log)
        elif args.transfers_log:
            with open(args.transfers_log, "w") as log:
                receive_transfers(args.port, args.bind, log)
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
