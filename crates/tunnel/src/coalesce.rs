//! Merging consecutive segments of one TCP connection into one packet before writing them to the
//! TUN device, as a NIC's receive offload (GRO) would: the receiving kernel then runs its TCP/IP
//! stack once for the whole run of segments instead of once per segment, and acknowledges it the
//! way it acknowledges a GRO packet from a real NIC.
//!
//! Only segments that arrive in the same batch (one `recvmmsg`) are merged, so a slow flow, whose
//! datagrams arrive one per wake-up, is written segment by segment exactly as it was sent. The
//! rules are those of Linux's GRO (inet_gro_receive, tcp_gro_receive), so that the merged packet
//! is what GRO would have made, and segmenting it again gives back the original segments:
//!
//! - IPv4 without options or fragmentation, TCP, a non-empty payload, and none of SYN, FIN, RST,
//!   URG, CWR;
//! - the same addresses, TOS, TTL and DF; each segment's IPv4 id one more than the one before;
//! - the same ports, acknowledgement number, flags, window and options (timestamps included), and
//!   the next sequence number;
//! - every segment as long as the first; a shorter one, or one with PSH, ends the run;
//! - at most 64 KiB in all.
//!
//! The merged packet keeps the first segment's headers with the total length and IPv4 checksum
//! made right, PSH if the last segment had it, and a partial TCP checksum (the pseudo-header's
//! sum); its virtio header asks the kernel to treat it as `segment_bytes`-sized TCP segments
//! whose checksum needs no check (the outer UDP checksum covered every byte on the path).

use crate::checksum::{checksum, fold, pseudo_header};
use crate::virtio::{Offload, PartialChecksum, Segmentation, HEADER_BYTES};

const TCP: u8 = 6;
const PSH: u8 = 0x08;
/// Flags that a GRO packet never carries: FIN, SYN, RST, URG, CWR.
const UNMERGEABLE: u8 = 0x01 | 0x02 | 0x04 | 0x20 | 0x80;
const MAX_PACKET_BYTES: usize = 65_535;
const IP_HEADER_BYTES: usize = 20;

/// The facts about a segment that decide whether it continues a run.
#[derive(Debug, Clone, Copy)]
struct Segment {
    header_bytes: usize,
    payload_bytes: usize,
    id: u16,
    seq: u32,
    push: bool,
}

/// A TCP/IPv4 segment that could be part of a run, or `None`.
fn candidate(packet: &[u8]) -> Option<Segment> {
    if packet.len() < IP_HEADER_BYTES + 20 || packet[0] != 0x45 || packet[9] != TCP {
        return None;
    }
    let fragmented = u16::from_be_bytes([packet[6], packet[7]]) & 0x3fff != 0;
    let total = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
    let header_bytes = IP_HEADER_BYTES + usize::from(packet[IP_HEADER_BYTES + 12] >> 4) * 4;
    let flags = packet[IP_HEADER_BYTES + 13];
    if fragmented
        || total != packet.len()
        || header_bytes < 40
        || header_bytes >= packet.len()
        || flags & UNMERGEABLE != 0
    {
        return None;
    }
    let tcp = &packet[IP_HEADER_BYTES..];
    Some(Segment {
        header_bytes,
        payload_bytes: packet.len() - header_bytes,
        id: u16::from_be_bytes([packet[4], packet[5]]),
        seq: u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]),
        push: flags & PSH != 0,
    })
}

/// The run being built.
#[derive(Debug)]
struct Run {
    first: Segment,
    segments: usize,
    next_seq: u32,
    /// A short or PSH segment ended it.
    closed: bool,
}

/// Builds runs of segments and hands out what to write.
#[derive(Debug)]
pub struct Coalescer {
    buffer: Vec<u8>,
    /// `None` with a packet in `buffer`: an ordinary packet, written as it came.
    run: Option<Run>,
}

impl Default for Coalescer {
    fn default() -> Coalescer {
        Coalescer { buffer: Vec::with_capacity(MAX_PACKET_BYTES), run: None }
    }
}

impl Coalescer {
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// Appends `packet` to the pending run if it continues it; false if it does not (then `take`
    /// what is pending and `start` with this packet).
    pub fn append(&mut self, packet: &[u8]) -> bool {
        let (Some(run), Some(next)) = (self.run.as_mut(), candidate(packet)) else { return false };
        let pending = &self.buffer;
        let continues = !run.closed
            && next.header_bytes == run.first.header_bytes
            && next.payload_bytes <= run.first.payload_bytes
            && pending.len() + next.payload_bytes <= MAX_PACKET_BYTES
            && next.seq == run.next_seq
            && next.id == run.first.id.wrapping_add(run.segments as u16)
            // version, IHL, TOS; flags and fragment offset; TTL, protocol; addresses
            && pending[..2] == packet[..2]
            && pending[6..10] == packet[6..10]
            && pending[12..20] == packet[12..20]
            // ports; (sequence checked above) acknowledgement; offset, flags but PSH, window
            && pending[20..24] == packet[20..24]
            && pending[28..33] == packet[28..33]
            && pending[33] & !PSH == packet[33] & !PSH
            && pending[34..36] == packet[34..36]
            // options
            && pending[40..run.first.header_bytes] == packet[40..next.header_bytes];
        if !continues {
            return false;
        }
        self.buffer.extend_from_slice(&packet[next.header_bytes..]);
        run.segments += 1;
        run.next_seq = next.seq.wrapping_add(next.payload_bytes as u32);
        if next.push {
            self.buffer[IP_HEADER_BYTES + 13] |= PSH;
        }
        run.closed = next.push || next.payload_bytes < run.first.payload_bytes;
        true
    }

    /// Makes `packet` the pending one (after `take`).
    pub fn start(&mut self, packet: &[u8]) {
        debug_assert!(self.is_empty());
        self.buffer.extend_from_slice(packet);
        self.run = candidate(packet).map(|first| Run {
            first,
            segments: 1,
            next_seq: first.seq.wrapping_add(first.payload_bytes as u32),
            closed: first.push,
        });
    }

    /// The pending packet, its virtio header, and how many datagrams it holds, ready to write;
    /// `clear` forgets it afterwards.
    pub fn take(&mut self) -> Option<([u8; HEADER_BYTES], &[u8], usize)> {
        if self.buffer.is_empty() {
            return None;
        }
        let segments = self.run.as_ref().map_or(1, |run| run.segments);
        let header = match self.run.take() {
            Some(run) if run.segments > 1 => {
                let len = self.buffer.len();
                let packet = &mut self.buffer;
                packet[2..4].copy_from_slice(&(len as u16).to_be_bytes());
                packet[10..12].fill(0);
                let ip_sum = checksum(&packet[..IP_HEADER_BYTES]);
                packet[10..12].copy_from_slice(&ip_sum.to_be_bytes());
                let addresses = |at: usize| [packet[at], packet[at + 1], packet[at + 2], packet[at + 3]];
                let partial = fold(pseudo_header(addresses(12), addresses(16), TCP, len - IP_HEADER_BYTES));
                packet[IP_HEADER_BYTES + 16..IP_HEADER_BYTES + 18].copy_from_slice(&partial.to_be_bytes());
                Offload {
                    partial_checksum: Some(PartialChecksum { start: IP_HEADER_BYTES as u16, offset: 16 }),
                    segmentation: Segmentation::TcpV4 { segment_bytes: run.first.payload_bytes as u16 },
                }
                .encode(run.first.header_bytes as u16)
            }
            _ => Offload::NONE.encode(0),
        };
        Some((header, &self.buffer, segments))
    }

    /// Forgets the packet `take` handed out.
    pub fn clear(&mut self) {
        self.buffer.clear();
        self.run = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::tests::tcp_packet;
    use crate::segment::Segmenter;

    const ACK: u8 = 0x10;

    fn payload(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7) as u8).collect()
    }

    #[test]
    fn consecutive_segments_merge_into_what_segmentation_splits_again() {
        let data = payload(2500);
        let segments = [
            tcp_packet(100, 1_000, ACK, &data[..1000]),
            tcp_packet(101, 2_000, ACK, &data[1000..2000]),
            tcp_packet(102, 3_000, ACK | PSH, &data[2000..]),
        ];
        let mut coalescer = Coalescer::default();
        coalescer.start(&segments[0]);
        assert!(coalescer.append(&segments[1]));
        assert!(coalescer.append(&segments[2]));
        let (header, merged, datagrams) = coalescer.take().unwrap();
        assert_eq!(datagrams, 3);
        let offload = Offload::parse(&header);
        assert_eq!(offload.segmentation, Segmentation::TcpV4 { segment_bytes: 1000 });
        assert_eq!(offload.partial_checksum, Some(PartialChecksum { start: 20, offset: 16 }));
        assert_eq!(u16::from_ne_bytes([header[2], header[3]]), 52);
        assert_eq!(merged.len(), 52 + 2500);
        assert_eq!(checksum(&merged[..20]), 0, "IPv4 checksum");
        // Completing the partial checksum and cutting again gives back the three segments.
        let mut complete = merged.to_vec();
        crate::segment::complete_checksum(&mut complete, PartialChecksum { start: 20, offset: 16 }).unwrap();
        let segmenter = Segmenter::new(&complete, 1000).unwrap();
        for (i, want) in segments.iter().enumerate() {
            let mut out = [0u8; 1100];
            let len = segmenter.write(i, &mut out);
            assert_eq!(&out[..len], &want[..], "segment {i}");
        }
    }

    #[test]
    fn a_lone_segment_is_written_as_it_came() {
        let segment = tcp_packet(1, 1, ACK, &payload(100));
        let mut coalescer = Coalescer::default();
        coalescer.start(&segment);
        let (header, packet, segments) = coalescer.take().unwrap();
        assert_eq!((header, segments), ([0; HEADER_BYTES], 1));
        assert_eq!(packet, &segment[..]);
        coalescer.clear();
        assert!(coalescer.is_empty() && coalescer.take().is_none());
    }

    #[test]
    fn runs_end_where_gro_would_end_them() {
        let data = payload(1000);
        let first = tcp_packet(100, 1_000, ACK, &data);
        let refuses = |second: Vec<u8>, why: &str| {
            let mut coalescer = Coalescer::default();
            coalescer.start(&first);
            assert!(!coalescer.append(&second), "{why}");
        };
        refuses(tcp_packet(101, 2_500, ACK, &data), "a gap in the sequence");
        refuses(tcp_packet(105, 2_000, ACK, &data), "an id out of order");
        refuses(tcp_packet(101, 2_000, ACK, &payload(1001)), "a longer segment");
        refuses(tcp_packet(101, 2_000, ACK | 0x01, &data), "FIN");
        let mut other_ack = tcp_packet(101, 2_000, ACK, &data);
        other_ack[28] ^= 1;
        refuses(other_ack, "another acknowledgement number");
        let mut other_timestamp = tcp_packet(101, 2_000, ACK, &data);
        other_timestamp[47] ^= 1;
        refuses(other_timestamp, "other options");
        let mut ce = tcp_packet(101, 2_000, ACK, &data);
        ce[1] = 3;
        refuses(ce, "another TOS (a CE mark)");

        let mut coalescer = Coalescer::default();
        coalescer.start(&first);
        assert!(coalescer.append(&tcp_packet(101, 2_000, ACK, &data[..500])));
        assert!(!coalescer.append(&tcp_packet(102, 2_500, ACK, &data)), "a short segment ends the run");
        let mut pushed = Coalescer::default();
        pushed.start(&tcp_packet(1, 1_000, ACK | PSH, &data));
        assert!(!pushed.append(&tcp_packet(2, 2_000, ACK, &data)), "PSH ends the run");
    }

    #[test]
    fn udp_and_syn_are_never_merged() {
        let mut udp = tcp_packet(1, 1, ACK, &payload(10));
        udp[9] = 17;
        let mut coalescer = Coalescer::default();
        coalescer.start(&udp);
        assert!(!coalescer.append(&udp));
        let syn = tcp_packet(1, 1, 0x02, &payload(10));
        let mut coalescer = Coalescer::default();
        coalescer.start(&syn);
        assert!(!coalescer.append(&tcp_packet(2, 11, ACK, &payload(10))));
    }
}
