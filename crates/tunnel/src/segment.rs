//! Cutting a TCP/IPv4 super-packet into the segments a NIC's TCP segmentation offload would put
//! on the wire, and completing partial checksums: what the tunnel does for its TUN device, which
//! offers these offloads so that the command's kernel hands over one 64 KiB packet instead of
//! forty-odd (one read instead of forty-odd, and no segmentation in the sender's kernel).
//!
//! Segment i of a super-packet with `segment_bytes` S of payload per segment carries payload bytes
//! [i·S, (i+1)·S) behind a copy of the headers, with, as Linux's own software segmentation
//! (tcp_gso_segment, inet_gso_segment) does: IPv4 total length set, IPv4 id = first id + i, TCP
//! sequence number = first + i·S, FIN and PSH only on the last segment, CWR only on the first, and
//! both checksums computed in full. So every datagram in the tunnel is exactly the datagram a
//! sender without the offload would have sent, and is logged with its own UID and size.

use crate::checksum::{add, checksum, fold, pseudo_header};
use crate::virtio::PartialChecksum;

const TCP: u8 = 6;
const FIN: u8 = 0x01;
const PSH: u8 = 0x08;
const CWR: u8 = 0x80;

/// A packet the kernel should never have handed over (it is dropped and counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// Completes a partial checksum in place: sums everything from `start` (the field holds the
/// pseudo-header's sum already) and stores the complement. A result of zero is stored as 0xffff,
/// which verifies the same and which UDP requires (RFC 768: zero means "no checksum").
pub fn complete_checksum(packet: &mut [u8], partial: PartialChecksum) -> Result<(), Malformed> {
    let start = usize::from(partial.start);
    let field = start + usize::from(partial.offset);
    if field + 2 > packet.len() {
        return Err(Malformed);
    }
    let sum = match !fold(add(0, &packet[start..])) {
        0 => 0xffff,
        sum => sum,
    };
    packet[field..field + 2].copy_from_slice(&sum.to_be_bytes());
    Ok(())
}

/// A checked TCP/IPv4 super-packet and how to cut it.
#[derive(Debug)]
pub struct Segmenter<'a> {
    packet: &'a [u8],
    ip_header_bytes: usize,
    header_bytes: usize,
    segment_bytes: usize,
}

impl<'a> Segmenter<'a> {
    pub fn new(packet: &'a [u8], segment_bytes: u16) -> Result<Segmenter<'a>, Malformed> {
        if packet.len() < 20 || packet[0] >> 4 != 4 || packet[9] != TCP || segment_bytes == 0 {
            return Err(Malformed);
        }
        let ip_header_bytes = usize::from(packet[0] & 0x0f) * 4;
        if ip_header_bytes < 20 || packet.len() < ip_header_bytes + 20 {
            return Err(Malformed);
        }
        let header_bytes = ip_header_bytes + usize::from(packet[ip_header_bytes + 12] >> 4) * 4;
        if header_bytes < ip_header_bytes + 20 || packet.len() <= header_bytes {
            return Err(Malformed);
        }
        Ok(Segmenter { packet, ip_header_bytes, header_bytes, segment_bytes: usize::from(segment_bytes) })
    }

    pub fn count(&self) -> usize {
        (self.packet.len() - self.header_bytes).div_ceil(self.segment_bytes)
    }

    /// Bytes of the largest segment.
    pub fn max_segment_bytes(&self) -> usize {
        self.header_bytes + self.segment_bytes.min(self.packet.len() - self.header_bytes)
    }

    /// Writes segment `i` into `out` (at least `max_segment_bytes` long); returns its length.
    pub fn write(&self, i: usize, out: &mut [u8]) -> usize {
        let (ip, tcp, header) = (0, self.ip_header_bytes, self.header_bytes);
        let payload = &self.packet[header..];
        let chunk = &payload[i * self.segment_bytes..((i + 1) * self.segment_bytes).min(payload.len())];
        let len = header + chunk.len();
        out[..header].copy_from_slice(&self.packet[..header]);
        out[header..len].copy_from_slice(chunk);

        out[ip + 2..ip + 4].copy_from_slice(&(len as u16).to_be_bytes());
        let id = u16::from_be_bytes([out[4], out[5]]).wrapping_add(i as u16);
        out[ip + 4..ip + 6].copy_from_slice(&id.to_be_bytes());
        out[ip + 10..ip + 12].fill(0);
        let ip_sum = checksum(&out[ip..tcp]);
        out[ip + 10..ip + 12].copy_from_slice(&ip_sum.to_be_bytes());

        let seq = u32::from_be_bytes([out[tcp + 4], out[tcp + 5], out[tcp + 6], out[tcp + 7]]);
        let seq = seq.wrapping_add((i * self.segment_bytes) as u32);
        out[tcp + 4..tcp + 8].copy_from_slice(&seq.to_be_bytes());
        if i + 1 < self.count() {
            out[tcp + 13] &= !(FIN | PSH);
        }
        if i > 0 {
            out[tcp + 13] &= !CWR;
        }
        out[tcp + 16..tcp + 18].fill(0);
        let addresses = |at: usize| [out[at], out[at + 1], out[at + 2], out[at + 3]];
        let sum = pseudo_header(addresses(12), addresses(16), TCP, len - tcp);
        let tcp_sum = !fold(add(sum, &out[tcp..len]));
        out[tcp + 16..tcp + 18].copy_from_slice(&tcp_sum.to_be_bytes());
        len
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A TCP/IPv4 packet 10.100.0.2:5000 -> 10.100.0.1:80 with a 12-byte option block
    /// (NOP NOP timestamps), `payload` behind it, correct checksums.
    pub(crate) fn tcp_packet(id: u16, seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, TCP, 0, 0, 10, 100, 0, 2, 10, 100, 0, 1];
        p[4..6].copy_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&5000u16.to_be_bytes());
        p.extend_from_slice(&80u16.to_be_bytes());
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&7u32.to_be_bytes());
        p.extend_from_slice(&[0x80, flags, 0x01, 0xf5, 0, 0, 0, 0]);
        p.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 3]);
        p.extend_from_slice(payload);
        let len = p.len();
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        let ip_sum = checksum(&p[..20]);
        p[10..12].copy_from_slice(&ip_sum.to_be_bytes());
        let tcp_sum = !fold(add(pseudo_header([10, 100, 0, 2], [10, 100, 0, 1], TCP, len - 20), &p[20..]));
        p[36..38].copy_from_slice(&tcp_sum.to_be_bytes());
        p
    }

    #[test]
    fn a_super_packet_becomes_the_segments_a_sender_without_offload_sends() {
        let payload: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
        let super_packet = tcp_packet(100, 1_000, 0x18 | CWR, &payload);
        let segmenter = Segmenter::new(&super_packet, 1000).unwrap();
        assert_eq!(segmenter.count(), 3);
        assert_eq!(segmenter.max_segment_bytes(), 1052);
        let expected = [
            tcp_packet(100, 1_000, 0x10 | CWR, &payload[..1000]),
            tcp_packet(101, 2_000, 0x10, &payload[1000..2000]),
            tcp_packet(102, 3_000, 0x18, &payload[2000..]),
        ];
        for (i, want) in expected.iter().enumerate() {
            let mut out = vec![0u8; 1052];
            let len = segmenter.write(i, &mut out);
            assert_eq!(&out[..len], &want[..], "segment {i}");
        }
    }

    #[test]
    fn sequence_numbers_and_ids_wrap() {
        let super_packet = tcp_packet(u16::MAX, u32::MAX - 9, 0x10, &[0; 20]);
        let segmenter = Segmenter::new(&super_packet, 10).unwrap();
        let mut out = [0u8; 64];
        let len = segmenter.write(1, &mut out);
        assert_eq!(&out[..len], &tcp_packet(0, 0, 0x10, &[0; 10])[..]);
    }

    #[test]
    fn partial_checksums_are_completed() {
        let mut packet = tcp_packet(1, 1, 0x10, b"hello");
        let full = [packet[36], packet[37]];
        let pseudo = fold(pseudo_header([10, 100, 0, 2], [10, 100, 0, 1], TCP, packet.len() - 20));
        packet[36..38].copy_from_slice(&pseudo.to_be_bytes());
        complete_checksum(&mut packet, PartialChecksum { start: 20, offset: 16 }).unwrap();
        assert_eq!([packet[36], packet[37]], full);
        assert_eq!(complete_checksum(&mut packet, PartialChecksum { start: 40, offset: 16 }), Err(Malformed));
    }

    #[test]
    fn non_tcp_or_truncated_packets_are_refused() {
        let mut udp = tcp_packet(1, 1, 0x10, b"x");
        udp[9] = 17;
        assert_eq!(Segmenter::new(&udp, 100).unwrap_err(), Malformed);
        assert_eq!(Segmenter::new(&tcp_packet(1, 1, 0x10, b"")[..], 100).unwrap_err(), Malformed);
        assert_eq!(Segmenter::new(&tcp_packet(1, 1, 0x10, b"x")[..30], 100).unwrap_err(), Malformed);
    }
}
