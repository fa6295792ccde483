//! What crosses the path between the two endpoints of pantheon-tunnel: every datagram is one UDP
//! datagram whose payload starts with an 8-byte header: a 32-bit word in network byte order and a
//! 32-bit authentication tag. (The simulator sizes its datagrams on the path with the same overhead.)
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-------------------------------------------------------------+
//! |C|  C = 0: the UID's low 31 bits; C = 1: the control type      |
//! +-+-------------------------------------------------------------+
//! |                 tag: a MAC of the whole datagram              |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  C = 0: the inner IP datagram, as the command sent it         |
//! |  C = 1: a 64-bit counter, then the message's fields           |
//! ```
//!
//! With C = 0 the datagram carries data: endpoints number the datagrams they send 0, 1, 2, ...
//! (the UID, unique per direction of one tunnel), and only the low 31 bits travel. The receiver
//! infers the rest from the highest UID it has accepted, as IPsec does with its extended sequence
//! numbers (RFC 4303 §2.2.1, Appendix A): the tag covers the full 64-bit UID, so a wrong guess
//! fails the check rather than delivering a datagram under another UID. With C = 1 it is a
//! control message, numbered by a counter of its own that travels in full:
//!
//! - `hello` (client to server): connect, and keep a NAT's mapping open;
//! - `welcome` (server to client): the answer to a hello;
//! - `probe` t1 and `answer` t1 t2 t3: a clock exchange (RFC 5905 §8), each endpoint's times in
//!   microseconds since the Unix epoch, on its own clock.
//!
//! The tag (the crate `pantheon-tunnel` computes and checks it) is a MAC keyed per session and
//! per direction over the 64-bit UID or counter, the first word, and everything after the tag.
//! It is 32 bits so that the header stays the original's 8 bytes: SRTP's 32-bit tags
//! (RFC 3711 §9.5) are the precedent, and every forged datagram that fails is counted.
//!
//! Overhead: an inner datagram of n bytes travels as an outer IPv4 datagram of n + 36 bytes
//! (IPv4 header 20 + UDP header 8 + tunnel header 8), as in the original pantheon-tunnel, whose
//! header was the UID alone. So on a path with a 1500-byte MTU the inner MTU is 1464 bytes.
//!
//! ECN crosses the tunnel as RFC 6040 has IP-in-IP tunnels carry it, in normal mode: the outer
//! IPv4 header's ECN field is a copy of the inner datagram's (§4.1), so a queue on the path sees
//! the command's codepoint, marks ECN-capable datagrams CE and drops the others; at the far end
//! the inner datagram leaves with the outer and inner fields combined by §4.2's table
//! ([`decapsulated_ecn`]): a mark on the outer header reaches the inner one. Control messages
//! travel Not-ECT.

use pantheon_link::Ecn;

/// Bytes of the tunnel header in front of every inner datagram.
pub const HEADER_BYTES: usize = 8;
/// IPv4 header (no options) + UDP header.
pub const IPV4_UDP_HEADER_BYTES: usize = 20 + 8;
/// How much bigger an inner datagram is on the path.
pub const OVERHEAD_BYTES: usize = IPV4_UDP_HEADER_BYTES + HEADER_BYTES;
/// Where the tag lies in every datagram.
pub const TAG_RANGE: std::ops::Range<usize> = 4..8;
/// Bytes of a control message's counter, after the header.
pub const COUNTER_BYTES: usize = 8;

const CONTROL_BIT: u32 = 1 << 31;
/// The UID bits that travel.
pub const UID_WIRE_MASK: u64 = (1 << 31) - 1;

/// The control messages, by their type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Control {
    Hello = 1,
    Welcome = 2,
    Probe = 3,
    Answer = 4,
}

/// The inner MTU for a path MTU: what a command in the tunnel may send in one datagram.
pub fn inner_mtu_bytes(path_mtu_bytes: usize) -> usize {
    path_mtu_bytes - OVERHEAD_BYTES
}

/// Hands out the UIDs of one direction, in order, from 0. 2^64 of them is forever at any rate.
#[derive(Debug, Default)]
pub struct Uids {
    next: u64,
}

impl Uids {
    pub fn assign(&mut self) -> u64 {
        let uid = self.next;
        self.next += 1;
        uid
    }
}

/// The first word of a data datagram carrying `uid` (the tag follows, zero until computed).
pub fn data_header(uid: u64) -> [u8; HEADER_BYTES] {
    let mut header = [0; HEADER_BYTES];
    header[..4].copy_from_slice(&((uid & UID_WIRE_MASK) as u32).to_be_bytes());
    header
}

/// A control datagram with its tag zero: header, counter, then the fields (each a big-endian u64).
pub fn control(kind: Control, counter: u64, fields: &[u64]) -> Vec<u8> {
    let mut datagram = Vec::with_capacity(HEADER_BYTES + COUNTER_BYTES + 8 * fields.len());
    datagram.extend_from_slice(&(CONTROL_BIT | kind as u32).to_be_bytes());
    datagram.extend_from_slice(&[0; 4]);
    datagram.extend_from_slice(&counter.to_be_bytes());
    for field in fields {
        datagram.extend_from_slice(&field.to_be_bytes());
    }
    datagram
}

/// A datagram received from the path, taken apart (its tag not yet checked).
#[derive(Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// `uid_low`: the UID's low 31 bits.
    Data {
        uid_low: u64,
        inner: &'a [u8],
    },
    Hello {
        counter: u64,
    },
    Welcome {
        counter: u64,
    },
    Probe {
        counter: u64,
        t1_us: u64,
    },
    Answer {
        counter: u64,
        t1_us: u64,
        t2_us: u64,
        t3_us: u64,
    },
}

/// Why a received datagram is not a tunnel message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Shorter than the header, or than its control message.
    Truncated,
    /// A data header with nothing behind it.
    Empty,
    /// A control type this version does not know.
    UnknownControl,
}

/// What the decapsulator does with a data datagram's inner datagram (RFC 6040 §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EcnExit {
    /// Deliver it with this codepoint. `alarm`: a combination §4.2 marks "(!!!)", which a
    /// compliant path and encapsulator never produce (the decapsulator SHOULD log it).
    Forward { ecn: Ecn, alarm: bool },
    /// The path marked CE a datagram whose sender cannot understand ECN: dropping it is the
    /// congestion signal that sender understands (also "(!!!)").
    Drop,
}

/// RFC 6040 §4.2, Figure 4, normal mode: the inner datagram's codepoint at the tunnel's exit,
/// from the codepoints of its arriving `inner` and `outer` headers.
///
/// ```text
///  inner \ outer   Not-ECT   ECT(0)        ECT(1)        CE
///  Not-ECT         Not-ECT   Not-ECT(!!!)  Not-ECT(!!!)  drop(!!!)
///  ECT(0)          ECT(0)    ECT(0)        ECT(1)        CE
///  ECT(1)          ECT(1)    ECT(1) (!)    ECT(1)        CE
///  CE              CE        CE            CE(!!!)       CE
/// ```
///
/// "(!)" (ECT(0) over ECT(1): a path that lowered the codepoint) is a combination the RFC says
/// a decapsulator MAY log; it is not counted here.
pub fn decapsulated_ecn(inner: Ecn, outer: Ecn) -> EcnExit {
    use Ecn::*;
    let (ecn, alarm) = match (inner, outer) {
        (NotEct, Ce) => return EcnExit::Drop,
        (NotEct, Ect0 | Ect1) => (NotEct, true),
        (Ce, Ect1) => (Ce, true),
        (inner, NotEct) => (inner, false),
        (Ect0, Ect1) | (Ect1, Ect0 | Ect1) => (Ect1, false),
        (_, Ce) | (Ce, _) => (Ce, false),
        (Ect0, Ect0) => (Ect0, false),
    };
    EcnExit::Forward { ecn, alarm }
}

/// The datagram's tag.
pub fn tag(datagram: &[u8]) -> [u8; 4] {
    datagram[TAG_RANGE].try_into().expect("a 4-byte range")
}

pub fn decapsulate(datagram: &[u8]) -> Result<Message<'_>, Malformed> {
    let Some((header, rest)) = datagram.split_first_chunk::<HEADER_BYTES>() else {
        return Err(Malformed::Truncated);
    };
    let word = u32::from_be_bytes(header[..4].try_into().expect("4 bytes"));
    if word & CONTROL_BIT == 0 {
        return if rest.is_empty() {
            Err(Malformed::Empty)
        } else {
            Ok(Message::Data { uid_low: u64::from(word), inner: rest })
        };
    }
    let fields = |n: usize| -> Result<Vec<u64>, Malformed> {
        let body = rest.get(..8 * (n + 1)).ok_or(Malformed::Truncated)?;
        Ok(body.chunks_exact(8).map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes"))).collect())
    };
    match word & !CONTROL_BIT {
        1 => Ok(Message::Hello { counter: fields(0)?[0] }),
        2 => Ok(Message::Welcome { counter: fields(0)?[0] }),
        3 => fields(1).map(|f| Message::Probe { counter: f[0], t1_us: f[1] }),
        4 => fields(3).map(|f| Message::Answer { counter: f[0], t1_us: f[1], t2_us: f[2], t3_us: f[3] }),
        _ => Err(Malformed::UnknownControl),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_is_the_originals_36_bytes() {
        assert_eq!(OVERHEAD_BYTES, 36);
        assert_eq!(inner_mtu_bytes(1500), 1464);
    }

    #[test]
    fn data_carries_the_uids_low_31_bits_in_network_order() {
        let mut datagram = data_header(0x0102_0304_8506_0708).to_vec();
        assert_eq!(datagram, [5, 6, 7, 8, 0, 0, 0, 0]);
        datagram.extend_from_slice(&[0x45, 0, 0, 20]);
        assert_eq!(decapsulate(&datagram), Ok(Message::Data { uid_low: 0x0506_0708, inner: &[0x45, 0, 0, 20] }));
    }

    #[test]
    fn control_messages_carry_their_counter_and_fields() {
        assert_eq!(decapsulate(&control(Control::Hello, 7, &[])), Ok(Message::Hello { counter: 7 }));
        assert_eq!(decapsulate(&control(Control::Welcome, 8, &[])), Ok(Message::Welcome { counter: 8 }));
        assert_eq!(decapsulate(&control(Control::Probe, 9, &[10])), Ok(Message::Probe { counter: 9, t1_us: 10 }));
        assert_eq!(
            decapsulate(&control(Control::Answer, 1, &[2, 3, 4])),
            Ok(Message::Answer { counter: 1, t1_us: 2, t2_us: 3, t3_us: 4 })
        );
        assert_eq!(control(Control::Hello, 1, &[])[..8], [0x80, 0, 0, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn malformed_datagrams_are_named() {
        assert_eq!(decapsulate(&[0; 7]), Err(Malformed::Truncated));
        assert_eq!(decapsulate(&[0; 8]), Err(Malformed::Empty));
        assert_eq!(decapsulate(&[0x80, 0, 0, 9, 0, 0, 0, 0, 1]), Err(Malformed::UnknownControl));
        assert_eq!(decapsulate(&control(Control::Probe, 9, &[])), Err(Malformed::Truncated));
    }

    #[test]
    fn ecn_at_the_exit_is_rfc_6040s_table() {
        use Ecn::*;
        let forward = |ecn| EcnExit::Forward { ecn, alarm: false };
        let alarm = |ecn| EcnExit::Forward { ecn, alarm: true };
        // RFC 6040 Figure 4, row by row (inner), its columns (outer) Not-ECT, ECT(0), ECT(1), CE.
        let table = [
            (NotEct, [forward(NotEct), alarm(NotEct), alarm(NotEct), EcnExit::Drop]),
            (Ect0, [forward(Ect0), forward(Ect0), forward(Ect1), forward(Ce)]),
            (Ect1, [forward(Ect1), forward(Ect1), forward(Ect1), forward(Ce)]),
            (Ce, [forward(Ce), forward(Ce), alarm(Ce), forward(Ce)]),
        ];
        for (inner, row) in table {
            for (outer, exit) in [NotEct, Ect0, Ect1, Ce].into_iter().zip(row) {
                assert_eq!(decapsulated_ecn(inner, outer), exit, "inner {inner:?}, outer {outer:?}");
            }
        }
        // What this tunnel's encapsulator sends (the outer a copy of the inner) leaves as it came,
        // and a CE mark on the way reaches every ECN-capable inner datagram.
        for ecn in [NotEct, Ect0, Ect1, Ce] {
            assert_eq!(decapsulated_ecn(ecn, ecn), forward(ecn));
        }
    }

    #[test]
    fn uids_count_from_zero() {
        let mut uids = Uids::default();
        assert_eq!([uids.assign(), uids.assign(), uids.assign()], [0, 1, 2]);
    }
}
