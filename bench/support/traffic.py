#!/usr/bin/env python3
"""Small traffic generators for the emulator tests (stdlib only).

Each receiver prints `ready` on a line of its own once its socket is bound, so a test can start
the sender only after that, and a JSON summary as its last line. Sizes and rates count IP bytes
(UDP payload + 28), the bytes the emulated link carries.

  udp-send HOST PORT --rate-mbps R --size B[,B...] --seconds S
      paced UDP at R Mbit/s of IP packets of B bytes (a list is cycled through)
  udp-recv PORT --seconds S
      counts datagrams and their IP bytes, with kernel receive times (SO_TIMESTAMPNS)
  stamp-send HOST PORT --count N --interval-ms I --size B
      N datagrams, each carrying its sequence number and time.time_ns() taken just before sendto;
      reports the kernel's transmit time of each (SO_TIMESTAMPING), when it entered the emulator
  stamp-recv PORT --count N --seconds S
      records (seq, send_ns, kernel receive ns) for each stamped datagram, both CLOCK_REALTIME
  tcp-send HOST PORT --seconds S
      bulk TCP for S seconds; reports the bytes handed to the socket
  tcp-recv PORT --seconds S
      accepts one connection and counts bytes until EOF or S seconds

A receiver stops, and still prints its summary, on SIGTERM: the far end of an emulated path
vanishes with the emulator, so a test ends its receivers once the emulator is done.
"""
from __future__ import annotations

import argparse
import json
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

UDP_IP_OVERHEAD_BYTES = 28
STAMP = struct.Struct("!IQ")  # sequence number, send time in ns since the epoch
RECEIVE_BUFFER_BYTES = 8 << 20
# Linux socket options Python's socket module does not name (asm-generic/socket.h):
# SO_RCVBUFFORCE sets a buffer beyond net.core.rmem_max (needs CAP_NET_ADMIN); SO_TIMESTAMPNS asks
# for each datagram's receive time in ns, delivered as a control message of the same number.
SO_RCVBUFFORCE = 33
SO_TIMESTAMPNS = 35
# struct timespec as the kernel hands it over with SO_TIMESTAMPNS (64-bit Linux).
TIMESPEC = struct.Struct("@qq")
# SO_TIMESTAMPING with TX_SOFTWARE|SOFTWARE|OPT_TSONLY (Documentation/networking/timestamping.rst):
# the kernel reports, on the socket's error queue, the instant each datagram was handed to the
# device driver; a TUN device stamps it in its transmit routine, i.e. the instant the datagram
# entered the emulator. The report is a control message of the same number holding three
# timespecs, of which the first is the software time (CLOCK_REALTIME).
SO_TIMESTAMPING = 37
SOF_TIMESTAMPING_TX_SOFTWARE = 1 << 1
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
SOF_TIMESTAMPING_OPT_TSONLY = 1 << 11


def payload_sizes(text: str) -> list[int]:
    sizes = [int(s) - UDP_IP_OVERHEAD_BYTES for s in text.split(",")]
    if any(s < STAMP.size for s in sizes):
        raise SystemExit(f"--size: IP sizes must be at least {STAMP.size + UDP_IP_OVERHEAD_BYTES} bytes")
    return sizes


class Stopped(Exception):
    """SIGTERM arrived: stop receiving and report."""


def _raise_stopped(signum: int, frame: object) -> None:
    raise Stopped


def ready() -> None:
    print("ready", flush=True)


@contextmanager
def until_sigterm() -> Iterator[None]:
    """Runs a receive loop until it ends or SIGTERM arrives; either way SIGTERM is ignored
    afterwards, so that it cannot cut the summary short (which may exceed a pipe's buffer)."""
    try:
        yield
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except Stopped:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def report(summary: dict) -> None:
    print(json.dumps(summary), flush=True)


def receiving_udp_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER_BYTES)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("0.0.0.0", port))
    return sock


def receive_stamped(sock: socket.socket, timeout_s: float) -> tuple[bytes, int] | None:
    """One datagram and its kernel receive time in ns (CLOCK_REALTIME), or None on timeout."""
    sock.settimeout(max(timeout_s, 1e-3))
    try:
        data, ancillary, _, _ = sock.recvmsg(65536, socket.CMSG_SPACE(TIMESPEC.size))
    except TimeoutError:
        return None
    for level, kind, raw in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = TIMESPEC.unpack(raw[: TIMESPEC.size])
            return data, sec * 1_000_000_000 + nsec
    raise RuntimeError("the kernel gave no SO_TIMESTAMPNS receive time")


def udp_send(args: argparse.Namespace) -> None:
    bytes_per_s = args.rate_mbps * 1e6 / 8
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payloads = [bytes(s) for s in payload_sizes(args.size)]
    start = time.monotonic()
    end = start + args.seconds
    offered = offered_bytes = sent_packets = sent_bytes = 0
    while (now := time.monotonic()) < end:
        # Send what is due by now, then nap: pacing at a grain of about a millisecond is enough
        # for a link that is meant to be saturated.
        while offered_bytes < (now - start) * bytes_per_s:
            payload = payloads[offered % len(payloads)]
            offered += 1
            offered_bytes += len(payload) + UDP_IP_OVERHEAD_BYTES
            try:
                sock.sendto(payload, (args.host, args.port))
            except OSError:
                continue  # ENOBUFS and the like: the local stack is full; this one is not sent
            sent_packets += 1
            sent_bytes += len(payload) + UDP_IP_OVERHEAD_BYTES
        time.sleep(0.0005)
    report({"packets": sent_packets, "bytes": sent_bytes})


def udp_recv(args: argparse.Namespace) -> None:
    sock = receiving_udp_socket(args.port)
    ready()
    deadline = time.monotonic() + args.seconds
    packets = ip_bytes = first_bytes = 0
    first_ns = last_ns = None
    with until_sigterm():
        while (left := deadline - time.monotonic()) > 0:
            got = receive_stamped(sock, left)
            if got is None:
                break
            data, t_ns = got
            size = len(data) + UDP_IP_OVERHEAD_BYTES
            if first_ns is None:
                first_ns, first_bytes = t_ns, size
            last_ns = t_ns
            packets += 1
            ip_bytes += size
    report({"packets": packets, "bytes": ip_bytes, "first_bytes": first_bytes, "first_ns": first_ns, "last_ns": last_ns})


def stamp_send(args: argparse.Namespace) -> None:
    (payload_bytes,) = payload_sizes(str(args.size))
    padding = bytes(payload_bytes - STAMP.size)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(
        socket.SOL_SOCKET,
        SO_TIMESTAMPING,
        SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_TSONLY,
    )
    sock.connect((args.host, args.port))
    start = time.monotonic()
    kernel_send_ns = []
    for seq in range(args.count):
        wait_s = start + seq * args.interval_ms / 1000 - time.monotonic()
        if wait_s > 0:
            time.sleep(wait_s)
        sock.send(STAMP.pack(seq, time.time_ns()) + padding)
        kernel_send_ns.append(transmit_time_ns(sock))
    report({"packets": args.count, "kernel_send_ns": kernel_send_ns})


def transmit_time_ns(sock: socket.socket) -> int | None:
    """The driver's transmit time of the datagram just sent (SO_TIMESTAMPING), or None."""
    deadline = time.monotonic() + 0.01
    while time.monotonic() < deadline:
        try:
            _, ancillary, _, _ = sock.recvmsg(0, 1024, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        except BlockingIOError:
            continue
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING:
                sec, nsec = TIMESPEC.unpack(raw[: TIMESPEC.size])
                return sec * 1_000_000_000 + nsec
    return None


def stamp_recv(args: argparse.Namespace) -> None:
    sock = receiving_udp_socket(args.port)
    ready()
    deadline = time.monotonic() + args.seconds
    records = []
    with until_sigterm():
        while len(records) < args.count and (left := deadline - time.monotonic()) > 0:
            got = receive_stamped(sock, left)
            if got is None:
                break
            data, recv_ns = got
            seq, send_ns = STAMP.unpack_from(data)
            records.append((seq, send_ns, recv_ns))
    report({"records": records})


def tcp_send(args: argparse.Namespace) -> None:
    chunk = bytes(64 * 1024)
    sock = socket.create_connection((args.host, args.port), timeout=args.seconds + 5)
    end = time.monotonic() + args.seconds
    sent_bytes = 0
    while time.monotonic() < end:
        sock.settimeout(max(end - time.monotonic(), 1e-3))
        try:
            sent_bytes += sock.send(chunk)
        except TimeoutError:
            break
    report({"bytes": sent_bytes})
    # Close without waiting for the backlog: the emulator ends with this command, and a test
    # counts what the receiver got, not what was sent.
    sock.close()


def tcp_recv(args: argparse.Namespace) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", args.port))
    listener.listen(1)
    ready()
    deadline = time.monotonic() + args.seconds
    received_bytes = 0
    with until_sigterm():
        try:
            listener.settimeout(args.seconds)
            conn, _ = listener.accept()
            with conn:
                while (left := deadline - time.monotonic()) > 0:
                    conn.settimeout(left)
                    data = conn.recv(1 << 20)
                    if not data:
                        break
                    received_bytes += len(data)
        except (TimeoutError, ConnectionResetError):
            pass
    report({"bytes": received_bytes})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("udp-send", help="paced UDP blaster")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--rate-mbps", type=float, required=True, help="offered rate of IP bytes, Mbit/s")
    p.add_argument("--size", required=True, help="IP packet size(s) in bytes, comma-separated to cycle")
    p.add_argument("--seconds", type=float, required=True)
    p.set_defaults(run=udp_send)

    p = sub.add_parser("udp-recv", help="UDP byte counter")
    p.add_argument("port", type=int)
    p.add_argument("--seconds", type=float, required=True, help="give up after this long")
    p.set_defaults(run=udp_recv)

    p = sub.add_parser("stamp-send", help="UDP datagrams carrying their send time")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--interval-ms", type=float, required=True)
    p.add_argument("--size", type=int, default=100, help="IP packet size in bytes")
    p.set_defaults(run=stamp_send)

    p = sub.add_parser("stamp-recv", help="one-way delay receiver (kernel receive times)")
    p.add_argument("port", type=int)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.set_defaults(run=stamp_recv)

    p = sub.add_parser("tcp-send", help="bulk TCP sender")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--seconds", type=float, required=True)
    p.set_defaults(run=tcp_send)

    p = sub.add_parser("tcp-recv", help="bulk TCP receiver")
    p.add_argument("port", type=int)
    p.add_argument("--seconds", type=float, required=True)
    p.set_defaults(run=tcp_recv)

    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_stopped)
    args.run(args)


if __name__ == "__main__":
    sys.exit(main())
