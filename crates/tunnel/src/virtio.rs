//! The offload metadata a TUN device with IFF_VNET_HDR puts in front of every packet it hands
//! over, and expects in front of every packet written to it: a `struct virtio_net_hdr` (virtio
//! 1.x §5.1.6, Linux include/uapi/linux/virtio_net.h), 10 bytes in the host's byte order (the
//! legacy layout, which the kernel uses unless told otherwise).
//!
//! With checksum and TCP segmentation offload switched on, the kernel's TCP hands the device
//! "super-packets" of up to 64 KiB with one TCP/IP header and `gso_size` bytes of payload per
//! segment, and leaves checksums partial (`NEEDS_CSUM`: the sum of the pseudo-header is in the
//! checksum field; the rest, from `csum_start`, is for the device to add). The same kinds of
//! packets can be written back, and then reach the receiving socket as one packet, as after a
//! NIC's receive offload (GRO).

/// Bytes of the header.
pub const HEADER_BYTES: usize = 10;

const NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_ECN: u8 = 0x80;

/// What the header says about the packet behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offload {
    /// The checksum at `csum_start + csum_offset` covers only the pseudo-header yet.
    pub partial_checksum: Option<PartialChecksum>,
    pub segmentation: Segmentation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartialChecksum {
    /// Where the checksummed bytes start (the transport header).
    pub start: u16,
    /// Where the checksum field is, from `start`.
    pub offset: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segmentation {
    /// An ordinary packet.
    None,
    /// A TCP/IPv4 super-packet to cut into segments of `segment_bytes` of payload. (The ECN
    /// variant only says that the first segment keeps a CWR flag, which segmenting always does.)
    TcpV4 { segment_bytes: u16 },
    /// Something this tunnel never switches on (UDP, IPv6 segmentation).
    Unsupported(u8),
}

impl Offload {
    /// An ordinary packet with a complete checksum.
    pub const NONE: Offload = Offload { partial_checksum: None, segmentation: Segmentation::None };

    pub fn parse(header: &[u8; HEADER_BYTES]) -> Offload {
        let field = |i: usize| u16::from_ne_bytes([header[i], header[i + 1]]);
        let partial_checksum =
            (header[0] & NEEDS_CSUM != 0).then(|| PartialChecksum { start: field(6), offset: field(8) });
        let segmentation = match header[1] & !GSO_ECN {
            GSO_NONE => Segmentation::None,
            GSO_TCPV4 => Segmentation::TcpV4 { segment_bytes: field(4) },
            other => Segmentation::Unsupported(other),
        };
        Offload { partial_checksum, segmentation }
    }

    /// The header for a packet of `header_bytes` of IP and transport headers.
    pub fn encode(&self, header_bytes: u16) -> [u8; HEADER_BYTES] {
        let mut out = [0u8; HEADER_BYTES];
        if let Some(partial) = self.partial_checksum {
            out[0] = NEEDS_CSUM;
            out[6..8].copy_from_slice(&partial.start.to_ne_bytes());
            out[8..10].copy_from_slice(&partial.offset.to_ne_bytes());
        }
        if let Segmentation::TcpV4 { segment_bytes } = self.segmentation {
            out[1] = GSO_TCPV4;
            out[2..4].copy_from_slice(&header_bytes.to_ne_bytes());
            out[4..6].copy_from_slice(&segment_bytes.to_ne_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_all_zero_header_is_an_ordinary_packet() {
        assert_eq!(Offload::parse(&[0; HEADER_BYTES]), Offload::NONE);
        assert_eq!(Offload::NONE.encode(40), [0; HEADER_BYTES]);
    }

    #[test]
    fn a_tso_header_round_trips() {
        let offload = Offload {
            partial_checksum: Some(PartialChecksum { start: 20, offset: 16 }),
            segmentation: Segmentation::TcpV4 { segment_bytes: 1412 },
        };
        let bytes = offload.encode(52);
        assert_eq!(bytes[..2], [1, 1]);
        assert_eq!(u16::from_ne_bytes([bytes[2], bytes[3]]), 52);
        assert_eq!(Offload::parse(&bytes), offload);
    }

    #[test]
    fn the_ecn_variant_is_plain_tcp_segmentation() {
        let mut bytes = [0u8; HEADER_BYTES];
        bytes[1] = 0x81;
        bytes[4..6].copy_from_slice(&1412u16.to_ne_bytes());
        assert_eq!(Offload::parse(&bytes).segmentation, Segmentation::TcpV4 { segment_bytes: 1412 });
    }

    #[test]
    fn udp_segmentation_is_reported_unsupported() {
        let mut bytes = [0u8; HEADER_BYTES];
        bytes[1] = 5;
        assert_eq!(Offload::parse(&bytes).segmentation, Segmentation::Unsupported(5));
    }
}
