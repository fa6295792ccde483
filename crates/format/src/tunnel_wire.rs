//! What crosses the path between the two endpoints of pantheon-tunnel: every datagram is one UDP
//! datagram whose payload starts with an 8-byte header, a 64-bit number in network byte order.
//! (The simulator sizes its datagrams on the path with the same overhead.)
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-------------------------------------------------------------+
//! |C|                  uid, or the control message type           |
//! +-+                                                             +
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  C = 0: the inner IP datagram, as the command sent it         |
//! |  C = 1: the server's token (hello, welcome)                   |
//! ```
//!
//! With C = 0 the number is the datagram's UID: endpoints number the datagrams they send
//! 0, 1, 2, ... (unique per direction of one tunnel; 2^63 of them is centuries at any rate).
//! With C = 1 it is a control message: the client's `hello` (to connect, and as a keepalive
//! that keeps a NAT's mapping open) and the server's `welcome` answer, each carrying the token.
//!
//! Overhead: an inner datagram of n bytes travels as an outer IPv4 datagram of n + 36 bytes
//! (IPv4 header 20 + UDP header 8 + tunnel header 8), as in the original pantheon-tunnel, whose
//! header was the UID alone too. So on a path with a 1500-byte MTU the inner MTU is 1464 bytes.

/// Bytes of the tunnel header in front of every inner datagram.
pub const HEADER_BYTES: usize = 8;
/// IPv4 header (no options) + UDP header.
pub const IPV4_UDP_HEADER_BYTES: usize = 20 + 8;
/// How much bigger an inner datagram is on the path.
pub const OVERHEAD_BYTES: usize = IPV4_UDP_HEADER_BYTES + HEADER_BYTES;

const CONTROL_BIT: u64 = 1 << 63;
const HELLO: u64 = CONTROL_BIT | 1;
const WELCOME: u64 = CONTROL_BIT | 2;

/// The inner MTU for a path MTU: what a command in the tunnel may send in one datagram.
pub fn inner_mtu_bytes(path_mtu_bytes: usize) -> usize {
    path_mtu_bytes - OVERHEAD_BYTES
}

/// Hands out the UIDs of one direction, in order, never entering the control range.
#[derive(Debug, Default)]
pub struct Uids {
    next: u64,
}

impl Uids {
    pub fn assign(&mut self) -> u64 {
        let uid = self.next;
        self.next = (self.next + 1) & !CONTROL_BIT;
        uid
    }
}

/// The header of a data datagram carrying `uid`.
pub fn data_header(uid: u64) -> [u8; HEADER_BYTES] {
    debug_assert!(uid & CONTROL_BIT == 0);
    uid.to_be_bytes()
}

/// A control datagram: its header and its payload (the token).
pub fn hello(token: &[u8]) -> Vec<u8> {
    control(HELLO, token)
}

pub fn welcome(token: &[u8]) -> Vec<u8> {
    control(WELCOME, token)
}

fn control(kind: u64, token: &[u8]) -> Vec<u8> {
    let mut datagram = kind.to_be_bytes().to_vec();
    datagram.extend_from_slice(token);
    datagram
}

/// A datagram received from the path, taken apart.
#[derive(Debug, PartialEq, Eq)]
pub enum Message<'a> {
    Data { uid: u64, inner: &'a [u8] },
    Hello { token: &'a [u8] },
    Welcome { token: &'a [u8] },
}

/// Why a received datagram is not a tunnel message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Shorter than the header.
    Truncated,
    /// A data header with nothing behind it.
    Empty,
    /// A control type this version does not know.
    UnknownControl,
}

pub fn decapsulate(datagram: &[u8]) -> Result<Message<'_>, Malformed> {
    let Some((header, rest)) = datagram.split_first_chunk::<HEADER_BYTES>() else {
        return Err(Malformed::Truncated);
    };
    match u64::from_be_bytes(*header) {
        HELLO => Ok(Message::Hello { token: rest }),
        WELCOME => Ok(Message::Welcome { token: rest }),
        n if n & CONTROL_BIT != 0 => Err(Malformed::UnknownControl),
        _ if rest.is_empty() => Err(Malformed::Empty),
        uid => Ok(Message::Data { uid, inner: rest }),
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
    fn data_round_trips_with_its_uid_in_network_order() {
        let mut datagram = data_header(0x0102_0304_0506_0708).to_vec();
        assert_eq!(datagram, [1, 2, 3, 4, 5, 6, 7, 8]);
        datagram.extend_from_slice(&[0x45, 0, 0, 20]);
        assert_eq!(decapsulate(&datagram), Ok(Message::Data { uid: 0x0102_0304_0506_0708, inner: &[0x45, 0, 0, 20] }));
    }

    #[test]
    fn control_messages_carry_the_token() {
        assert_eq!(decapsulate(&hello(b"abc")), Ok(Message::Hello { token: b"abc" }));
        assert_eq!(decapsulate(&welcome(b"abc")), Ok(Message::Welcome { token: b"abc" }));
        assert_eq!(hello(b"t")[..8], [0x80, 0, 0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn malformed_datagrams_are_named() {
        assert_eq!(decapsulate(&[0; 7]), Err(Malformed::Truncated));
        assert_eq!(decapsulate(&[0; 8]), Err(Malformed::Empty));
        assert_eq!(decapsulate(&[0x80, 0, 0, 0, 0, 0, 0, 9, 1]), Err(Malformed::UnknownControl));
    }

    #[test]
    fn uids_count_from_zero_and_stay_out_of_the_control_range() {
        let mut uids = Uids::default();
        assert_eq!([uids.assign(), uids.assign(), uids.assign()], [0, 1, 2]);
        let mut last = Uids { next: CONTROL_BIT - 1 };
        assert_eq!(last.assign(), CONTROL_BIT - 1);
        assert_eq!(last.assign(), 0);
    }
}
