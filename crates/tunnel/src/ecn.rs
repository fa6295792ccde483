//! ECN through the tunnel (RFC 6040, normal mode; the rules themselves are
//! `pantheon_format::tunnel_wire`'s, which the simulator follows too). At the entrance the outer
//! header's ECN field is a copy of the inner datagram's (§4.1): the outbound thread gives each
//! outer datagram the inner codepoint as its TOS (`pantheon_sys::udp`), so a queue on the path sees
//! what the command sent, marks an ECN-capable datagram CE where it would have dropped it, and
//! drops a Not-ECT one. At the exit the inbound thread reads the outer codepoint of each datagram
//! (IP_RECVTOS) and rewrites the inner header as §4.2's table says, before the datagram is logged
//! and written to the TUN device: a CE mark on the outer header becomes a CE mark on the inner one,
//! which is what the command's transport reads; a CE mark over a Not-ECT datagram is a drop.
//!
//! The field is read and rewritten as the emulator does it (`pantheon_format::ip_ecn`: the IPv4
//! checksum updated incrementally, RFC 1624). The inner datagram is always IPv4: the admission
//! delivers nothing else (`session`).

use pantheon_format::ip_ecn::{ecn, set_ecn};
use pantheon_format::tunnel_wire::{decapsulated_ecn, EcnExit};
use pantheon_link::Ecn;

/// The tunnel's exit for one inner IPv4 datagram that arrived in an outer header marked `outer`:
/// its ECN field rewritten in place as RFC 6040 §4.2 says, and what became of it.
pub fn decapsulate(ipv4: &mut [u8], outer: Ecn) -> EcnExit {
    let inner = ecn(ipv4);
    let exit = decapsulated_ecn(inner, outer);
    if let EcnExit::Forward { ecn, .. } = exit {
        if ecn != inner {
            set_ecn(ipv4, ecn);
        }
    }
    exit
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::checksum;

    const CODEPOINTS: [Ecn; 4] = [Ecn::NotEct, Ecn::Ect1, Ecn::Ect0, Ecn::Ce];
    /// Where an IPv4 header's checksum lies.
    const CHECKSUM: std::ops::Range<usize> = 10..12;

    /// An IPv4/UDP datagram from 10.100.0.2 to 10.100.0.1 with the TOS byte `tos`, its header
    /// checksum computed in full (RFC 791).
    fn ipv4(tos: u8, id: u16) -> Vec<u8> {
        let mut d = vec![0x45, tos, 0x00, 0x1d, 0, 0, 0x40, 0x00, 0x40, 0x11, 0, 0, 10, 100, 0, 2, 10, 100, 0, 1];
        d[4..6].copy_from_slice(&id.to_be_bytes());
        d.extend_from_slice(&[0x9c, 0x40, 0x23, 0x28, 0x00, 0x09, 0x00, 0x00, 0x2a]);
        let sum = checksum(&d[..20]);
        d[CHECKSUM].copy_from_slice(&sum.to_be_bytes());
        d
    }

    /// The header's checksum as a full recomputation gives it.
    fn recomputed(header: &[u8]) -> [u8; 2] {
        let mut zeroed = header[..20].to_vec();
        zeroed[CHECKSUM].fill(0);
        checksum(&zeroed).to_be_bytes()
    }

    #[test]
    fn the_incremental_checksum_is_the_full_one_for_every_change_of_codepoint() {
        // Every DSCP, every change of codepoint, and ids that sweep the checksum through its range
        // (0x0000 and 0xffff among its values, RFC 1624 §4's corner).
        let mut checksums = std::collections::HashSet::new();
        for dscp in 0..64u8 {
            for id in (0..=u16::MAX).step_by(257) {
                for from in CODEPOINTS {
                    for to in CODEPOINTS {
                        let mut d = ipv4(dscp << 2 | from.bits(), id);
                        checksums.insert(u16::from_be_bytes([d[10], d[11]]));
                        set_ecn(&mut d, to);
                        assert_eq!(ecn(&d), to);
                        assert_eq!(d[1] >> 2, dscp, "the DSCP is kept");
                        assert_eq!(d[CHECKSUM], recomputed(&d), "dscp {dscp}, id {id:#x}, {from:?} -> {to:?}");
                        assert_eq!(checksum(&d[..20]), 0, "the header verifies");
                    }
                }
            }
        }
        assert!(checksums.len() > 10_000, "{} distinct checksums tried", checksums.len());
    }

    #[test]
    fn ect0_marked_ce_by_hand() {
        // The header's words 4502 001d 1234 4000 4011 (checksum) 0a64 0002 0a64 0001 sum to
        // 0xec2f, so HC = 0x13d0; with CE the first word is 0x4503, one more, so HC' = 0x13cf.
        let mut d = ipv4(0b10, 0x1234);
        assert_eq!(d[CHECKSUM], [0x13, 0xd0]);
        assert_eq!(decapsulate(&mut d, Ecn::Ce), EcnExit::Forward { ecn: Ecn::Ce, alarm: false });
        assert_eq!((d[1], &d[CHECKSUM]), (0x03, &[0x13, 0xcf][..]));
    }

    #[test]
    fn the_exit_rewrites_the_inner_header_as_rfc_6040s_table_says() {
        // The table itself is tunnel_wire's (tested there, cell by cell); here, that each of its
        // 16 cells reaches the bytes: the ECN field and the checksum change, nothing else does,
        // and a dropped datagram is left as it came.
        for inner in CODEPOINTS {
            for outer in CODEPOINTS {
                let arrived = ipv4(0xb8 | inner.bits(), 0x1234);
                let mut d = arrived.clone();
                let exit = decapsulate(&mut d, outer);
                assert_eq!(exit, decapsulated_ecn(inner, outer), "inner {inner:?}, outer {outer:?}");
                let mut expected_bytes = arrived.clone();
                if let EcnExit::Forward { ecn, .. } = exit {
                    expected_bytes[1] = 0xb8 | ecn.bits();
                    let checksum = recomputed(&expected_bytes);
                    expected_bytes[CHECKSUM].copy_from_slice(&checksum);
                }
                assert_eq!(d, expected_bytes, "inner {inner:?}, outer {outer:?}");
            }
        }
    }

    #[test]
    fn a_runt_is_left_alone() {
        let mut runt = vec![0x45, 0x02, 0, 0];
        set_ecn(&mut runt, Ecn::Ce);
        assert_eq!(runt, [0x45, 0x02, 0, 0]);
    }
}
