//! What the emulator and the tunnel read from, and write into, a real IP datagram: its ECN field
//! (RFC 3168 §5: the low two bits of IPv4's TOS byte, of IPv6's traffic class) and a key for its
//! flow. The emulator's queues mark CE (`set_ecn(.., Ecn::Ce)`); the tunnel's exit rewrites the
//! inner header as RFC 6040's table says.
//!
//! Rewriting the ECN field of an IPv4 header changes one 16-bit word of it, so the header checksum
//! is updated incrementally, HC' = ~(~HC + ~m + m'), RFC 1624 §3 (eqn. 3), which holds for every
//! header, including the corner RFC 1624 §4 fixes in RFC 1141's form. IPv6 has no header checksum.
//!
//! The flow key hashes the 5-tuple (addresses, protocol, ports) with FNV-1a (Fowler, Noll, Vo;
//! draft-eastlake-fnv), so every datagram of a flow — a tunnel's outer UDP flow, in the emulator —
//! gets the same key and different flows almost surely different ones; FQ-CoDel (RFC 8290 §4.1.1)
//! buckets flows by it.

use pantheon_link::Ecn;

/// The datagram's ECN codepoint; Not-ECT for anything that is not an IPv4 or IPv6 header.
pub fn ecn(datagram: &[u8]) -> Ecn {
    match version(datagram) {
        Some(4) => Ecn::from_tos(datagram[1]),
        Some(6) => Ecn::from_tos(((datagram[0] & 0x0f) << 4) | (datagram[1] >> 4)),
        _ => Ecn::NotEct,
    }
}

fn version(datagram: &[u8]) -> Option<u8> {
    let v = datagram.first()? >> 4;
    let header_bytes = match v {
        4 => 20,
        6 => 40,
        _ => return None,
    };
    (datagram.len() >= header_bytes).then_some(v)
}

/// Sets the ECN field to `ecn`, keeping the DSCP and an IPv4 header's checksum right; anything
/// that is not an IPv4 or IPv6 header is left as it is.
pub fn set_ecn(datagram: &mut [u8], ecn: Ecn) {
    match version(datagram) {
        Some(4) => {
            let old_word = u16::from_be_bytes([datagram[0], datagram[1]]);
            datagram[1] = (datagram[1] & !0b11) | ecn.bits();
            let new_word = u16::from_be_bytes([datagram[0], datagram[1]]);
            let old_checksum = u16::from_be_bytes([datagram[10], datagram[11]]);
            let sum = u32::from(!old_checksum) + u32::from(!old_word) + u32::from(new_word);
            let folded = (sum & 0xffff) + (sum >> 16);
            let folded = (folded & 0xffff) + (folded >> 16);
            datagram[10..12].copy_from_slice(&(!(folded as u16)).to_be_bytes());
        }
        Some(6) => datagram[1] = (datagram[1] & !0b11_0000) | (ecn.bits() << 4),
        _ => {}
    }
}

/// A key for the datagram's flow: a hash of its 5-tuple (the ports only for TCP and UDP, the
/// ports being at the start of an unfragmented transport header).
pub fn flow_key(datagram: &[u8]) -> u64 {
    let (addresses, protocol, transport) = match version(datagram) {
        Some(4) => {
            let header_bytes = usize::from(datagram[0] & 0x0f) * 4;
            (&datagram[12..20], datagram[9], datagram.get(header_bytes..).unwrap_or(&[]))
        }
        Some(6) => (&datagram[8..40], datagram[6], &datagram[40..]),
        _ => return 0,
    };
    let ports = match protocol {
        6 | 17 => transport.get(..4).unwrap_or(&[]),
        _ => &[],
    };
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    addresses
        .iter()
        .chain(std::iter::once(&protocol))
        .chain(ports)
        .fold(FNV_OFFSET, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4/UDP header with a valid checksum (RFC 1071's sum over the header), ECN `tos`.
    fn ipv4_udp(tos: u8, source_port: u16) -> Vec<u8> {
        let mut d =
            vec![0x45, tos, 0x00, 0x1c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 0, 0, 1, 10, 0, 0, 2];
        d.extend_from_slice(&source_port.to_be_bytes());
        d.extend_from_slice(&[0x1f, 0x90, 0x00, 0x08, 0x00, 0x00]);
        let checksum = full_checksum(&d[..20]);
        d[10..12].copy_from_slice(&checksum.to_be_bytes());
        d
    }

    fn full_checksum(header: &[u8]) -> u16 {
        let mut sum: u32 = header.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    #[test]
    fn setting_ce_keeps_the_ipv4_checksum_valid() {
        for tos in [0b10, 0b01, 0b1011_1010, 0b11] {
            let mut d = ipv4_udp(tos, 5000);
            assert_eq!(full_checksum(&d[..20]), 0);
            set_ecn(&mut d, Ecn::Ce);
            assert_eq!(ecn(&d), Ecn::Ce);
            assert_eq!(d[1] >> 2, tos >> 2, "the DSCP is kept");
            assert_eq!(full_checksum(&d[..20]), 0, "tos {tos:#b}");
        }
    }

    #[test]
    fn ipv6_keeps_ecn_in_the_traffic_class() {
        let mut d = vec![0u8; 48];
        d[0] = 0x60 | 0x0b; // version 6, traffic class 0xb2: DSCP 0x2c, ECT(0)
        d[1] = 0x20;
        assert_eq!(ecn(&d), Ecn::Ect0);
        set_ecn(&mut d, Ecn::Ce);
        assert_eq!(ecn(&d), Ecn::Ce);
        set_ecn(&mut d, Ecn::Ect1);
        assert_eq!(ecn(&d), Ecn::Ect1);
        assert_eq!(d[0], 0x6b, "version and DSCP untouched");
    }

    #[test]
    fn flows_are_told_apart_by_their_ports_and_a_flow_keeps_its_key() {
        assert_eq!(flow_key(&ipv4_udp(0, 5000)), flow_key(&ipv4_udp(0b10, 5000)));
        assert_ne!(flow_key(&ipv4_udp(0, 5000)), flow_key(&ipv4_udp(0, 5001)));
        assert_eq!(ecn(&[0x45]), Ecn::NotEct, "too short for a header");
        assert_eq!(flow_key(&[]), 0);
    }
}
