#!/usr/bin/env python3
"""The kernel's receive times of the packets arriving for one port, in the namespace it runs in.

    python3 bench/packet_times.py tcp|udp PORT OUT

Listens on every interface of the namespace with a packet socket (AF_PACKET), keeps the packets
that arrive (not those sent from here) carrying IPv4 TCP or UDP to PORT, and writes the kernel's
receive timestamp of each (SO_TIMESTAMPNS, CLOCK_REALTIME), µs since the Unix epoch, and its IP
length in bytes, one packet a line, to OUT when stopped by SIGTERM or SIGINT. A packet written
into a TUN device by an emulator is received at that write, so these are the emulator's write
times (mahimahi_parity.py --lateness).
Writes a line "ready" to stdout once listening. It wakes every DRAIN_S and reads what arrived
meanwhile, so that it takes little CPU from the emulator it watches (the times are the kernel's).
"""

from __future__ import annotations

import signal
import socket
import struct
import sys
import time

ETH_P_IP = 0x0800
SO_TIMESTAMPNS = 35
PACKET_OUTGOING = 4
PROTOCOLS = {"tcp": 6, "udp": 17}
RECEIVE_BUFFER_BYTES = 16 << 20
DRAIN_S = 0.02


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[1] not in PROTOCOLS or not argv[2].isdigit():
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    protocol, port, out = PROTOCOLS[argv[1]], int(argv[2]), argv[3]
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stops it as SIGINT does
    packets: list[tuple[int, int]] = []  # (µs, IP bytes)
    with socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
        sock.setblocking(False)
        print("ready", flush=True)
        try:
            while True:
                try:
                    data, ancillary, _, address = sock.recvmsg(128, socket.CMSG_SPACE(16))
                except BlockingIOError:
                    time.sleep(DRAIN_S)
                    continue
                if address[2] == PACKET_OUTGOING or len(data) < 24 or data[9] != protocol:
                    continue
                header_bytes = (data[0] & 0x0F) * 4
                if struct.unpack_from("!H", data, header_bytes + 2)[0] != port:
                    continue
                for level, kind, value in ancillary:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                        seconds, nanoseconds = struct.unpack("qq", value[:16])
                        packets.append((seconds * 1_000_000 + nanoseconds // 1000, struct.unpack_from("!H", data, 2)[0]))
        except KeyboardInterrupt:
            pass
    with open(out, "w") as file:
        file.writelines(f"{t} {size}\n" for t, size in packets)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
