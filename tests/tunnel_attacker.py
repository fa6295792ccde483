#!/usr/bin/env python3
"""Someone on the tunnel's path, for tests/test_tunnel.py (stdlib only; root, inside the test's
namespace, where both endpoints talk over loopback).

    tunnel_attacker.py SERVER_PORT KEY_FILE

Prints `ready` once it listens on loopback (AF_PACKET), waits for the client's first hello and
first data datagram to the server, then sends the server one datagram for each way in:

  stranger  the data datagram's bytes from another socket (not the client's address)
  forged    the client's IP:port spoofed (raw socket), a fresh UID, the old tag: no key
  replayed  the captured data datagram, resent from the client's IP:port
  moved     the captured hello, replayed from another port (would move the server's peer)
  foreign   made WITH the key, from the client's IP:port, a fresh UID, but an inner datagram
            from 1.2.3.4: what a peer's command spoofing its source would send

and prints a JSON summary. The key is read only for `foreign`, whose tag it computes with its own
SipHash-1-3 (Aumasson and Bernstein, INDOCRYPT 2012, whose SipHash-c-d it implements; checked
against the paper's test vector for SipHash-2-4).
"""
from __future__ import annotations

import json
import socket
import struct
import sys
from pathlib import Path

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
HELLO_WORD = 0x8000_0001
CONTROL_BIT = 0x8000_0000
LOCALHOST = "127.0.0.1"
MASK64 = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & MASK64


def siphash(key: bytes, data: bytes, c: int = 1, d: int = 3) -> int:
    """SipHash-c-d (the paper's §2); the tunnel's tag is SipHash-1-3's."""
    k0, k1 = struct.unpack("<QQ", key)
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rounds(n: int) -> None:
        for _ in range(n):
            v[0] = (v[0] + v[1]) & MASK64; v[1] = _rotl(v[1], 13) ^ v[0]; v[0] = _rotl(v[0], 32)  # noqa: E702
            v[2] = (v[2] + v[3]) & MASK64; v[3] = _rotl(v[3], 16) ^ v[2]  # noqa: E702
            v[0] = (v[0] + v[3]) & MASK64; v[3] = _rotl(v[3], 21) ^ v[0]  # noqa: E702
            v[2] = (v[2] + v[1]) & MASK64; v[1] = _rotl(v[1], 17) ^ v[2]; v[2] = _rotl(v[2], 32)  # noqa: E702

    tail = len(data) % 8
    padded = data + bytes(7 - tail) + bytes([len(data) & 0xFF])
    for (m,) in struct.iter_unpack("<Q", padded):
        v[3] ^= m
        rounds(c)
        v[0] ^= m
    v[2] ^= 0xFF
    rounds(d)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


# The paper's test vector (Appendix A), for SipHash-2-4.
assert siphash(bytes(range(16)), bytes(range(15)), c=2, d=4) == 0xA129CA6149BE45E5


def checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4_udp(src: str, sport: int, dst: str, dport: int, payload: bytes) -> bytes:
    """An IPv4 datagram carrying UDP (no UDP checksum, which IPv4 allows)."""
    length = 20 + 8 + len(payload)
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, length, 0, 0, 64, socket.IPPROTO_UDP, 0,
                         socket.inet_aton(src), socket.inet_aton(dst))
    header = header[:10] + struct.pack("!H", checksum(header)) + header[12:]
    return header + struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def capture(sniffer: socket.socket, port: int) -> tuple[int, bytes, bytes]:
    """(the client's port, its first hello's payload, its first data datagram as an IP packet)."""
    hello = data = None
    while hello is None or data is None:
        frame, address = sniffer.recvfrom(65_535)
        ip = frame[14:]
        if address[2] == PACKET_OUTGOING or ip[0] >> 4 != 4 or ip[9] != socket.IPPROTO_UDP:
            continue
        ihl = (ip[0] & 0xF) * 4
        sport, dport = struct.unpack("!HH", ip[ihl:ihl + 4])
        payload = ip[ihl + 8:]
        if dport != port or len(payload) < 8:
            continue
        word = int.from_bytes(payload[:4], "big")
        if word == HELLO_WORD and hello is None:
            hello = (sport, payload)
        elif word & CONTROL_BIT == 0 and data is None:
            data = (sport, ip)
    return data[0], hello[1], data[1]


def main(port: int, key: bytes) -> None:
    sniffer = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sniffer.bind(("lo", 0))
    sniffer.settimeout(15)
    print("ready", flush=True)
    client_port, hello, data_ip = capture(sniffer, port)
    ihl = (data_ip[0] & 0xF) * 4
    data = data_ip[ihl + 8:]
    uid_low = int.from_bytes(data[:4], "big")

    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)

    def spoof(sport: int, payload: bytes) -> None:
        raw.sendto(ipv4_udp(LOCALHOST, sport, LOCALHOST, port, payload), (LOCALHOST, 0))

    stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stranger.sendto(data, (LOCALHOST, port))
    spoof(client_port, (uid_low + 2000).to_bytes(4, "big") + data[4:])
    # As it was, but for its UDP checksum: loopback leaves it to be offloaded, unfilled.
    spoof(client_port, data)
    spoof(client_port ^ 1, hello)
    # Far enough ahead that the client never reaches it, near enough to stay in its window.
    uid = uid_low + 3000
    inner = ipv4_udp("1.2.3.4", 9999, "10.100.0.1", 9000, b"forged")
    tag = siphash(key[:16], uid.to_bytes(8, "big") + uid.to_bytes(4, "big") + inner) & 0xFFFF_FFFF
    spoof(client_port, uid.to_bytes(4, "big") + tag.to_bytes(4, "little") + inner)
    print(json.dumps({"client_port": client_port, "uid_low": uid_low, "sent": 5}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), bytes.fromhex(Path(sys.argv[2]).read_text().strip()))
