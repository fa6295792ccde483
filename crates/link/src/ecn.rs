//! The IP header's ECN field (RFC 3168 §5): two bits, the low two of IPv4's TOS byte and of
//! IPv6's traffic class. A sender marks its packets ECN-capable with ECT(0) (classic ECN,
//! RFC 3168) or ECT(1) (L4S, RFC 9331 §8); a queue that would drop an ECN-capable packet to signal
//! congestion may set CE instead. Not-ECT packets can only be dropped.

/// One packet's ECN codepoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    /// 00: not ECN-capable.
    #[default]
    NotEct,
    /// 01: ECN-capable, L4S (RFC 9331).
    Ect1,
    /// 10: ECN-capable, classic (RFC 3168).
    Ect0,
    /// 11: congestion experienced.
    Ce,
}

impl Ecn {
    /// The codepoint in the low two bits of `tos` (IPv4's TOS byte, IPv6's traffic class).
    pub fn from_tos(tos: u8) -> Ecn {
        match tos & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The codepoint's two bits.
    pub fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0b00,
            Ecn::Ect1 => 0b01,
            Ecn::Ect0 => 0b10,
            Ecn::Ce => 0b11,
        }
    }

    /// A queue may mark this packet CE instead of dropping it (CE itself included: a packet
    /// already marked stays marked, RFC 3168 §5).
    pub fn is_capable(self) -> bool {
        self != Ecn::NotEct
    }

    /// RFC 9332 §2.3's classifier: ECT(1) and CE go to the L4S queue.
    pub fn is_l4s(self) -> bool {
        matches!(self, Ecn::Ect1 | Ecn::Ce)
    }

    /// The name in logs and on command lines: `not-ect`, `ect1`, `ect0`, `ce`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ecn::NotEct => "not-ect",
            Ecn::Ect1 => "ect1",
            Ecn::Ect0 => "ect0",
            Ecn::Ce => "ce",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_bits_round_trip_and_ignore_the_dscp() {
        for ecn in [Ecn::NotEct, Ecn::Ect1, Ecn::Ect0, Ecn::Ce] {
            assert_eq!(Ecn::from_tos(0b1011_1000 | ecn.bits()), ecn);
        }
        assert!(Ecn::Ce.is_l4s() && Ecn::Ect1.is_l4s() && !Ecn::Ect0.is_l4s());
    }
}
