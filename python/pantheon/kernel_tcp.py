"""Kernel TCP as a Pantheon scheme: a bulk sender and a receiver, each a full-throttle flow that
runs until it is killed, using the kernel's congestion control chosen per socket with
TCP_CONGESTION (tcp(7)). Cubic (RFC 8312), BBR (Cardwell et al., ACM Queue 2016) and Reno
(RFC 5681) are built into this kernel; Vegas needs the tcp_vegas module, which it lacks.

    python -m pantheon.kernel_tcp receiver PORT [--bind ADDR]
    python -m pantheon.kernel_tcp sender HOST PORT --cc cubic

The receiver listens (it runs first) and drains one connection; the sender connects and writes as
fast as the socket accepts. SIGTERM or SIGINT end either quietly with status 0.
"""
from __future__ import annotations

import argparse
import signal
import socket
import sys
from pathlib import Path

from pantheon.errors import PantheonError

CHUNK_BYTES = 1 << 16
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


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


def send(host: str, port: int, cc: str) -> None:
    check_congestion_control(cc)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    sock.connect((host, port))
    chunk = bytes(CHUNK_BYTES)
    while True:
        sock.sendall(chunk)


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
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        if args.role == "sender":
            send(args.host, args.port, args.cc)
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
