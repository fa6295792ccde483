//! The two datagrams of `pantheon-udp`: data (sender → receiver) and its acknowledgement
//! (receiver → sender), one acknowledgement per data datagram.
//!
//! Every data datagram is the same size: an IP packet of 1464 bytes, the tunnel's inner MTU
//! (docs/tunnel.md), so a UDP payload of 1464 − 20 (IPv4 header, RFC 791) − 8 (UDP header,
//! RFC 768) = 1436 bytes. The sizes are the flow's (`pantheon_cc::flow::datagram`, which the
//! simulator counts without building datagrams); this file is their byte layout.
//!
//! Byte layout, integers big-endian (network order):
//!
//! ```text
//! data, 1436 bytes                         acknowledgement, 32 bytes
//!  0..4   magic "PUDP"                      0..4   magic "PUDP"
//!  4      version = 3                       4      version = 3
//!  5      kind = 1 (data)                   5      kind = 2 (acknowledgement)
//!  6..8   zero                              6..8   ce_count: u16, CE-marked data datagrams
//!                                                  from this sender so far, wrapping
//!  8..16  seq: u64, from 0, +1 per datagram 8..16  seq of the data datagram
//! 16..24  send_us: u64, sender's clock µs  16..24  its send_us, echoed
//! 24..28  transfer_id: u32                 24..32  recv_us: u64, when the receiver's kernel
//! 28..32  budget_packets: u32, 0 = bulk            received it, receiver's clock (µs)
//! 32..    zero padding
//! ```
//!
//! Transfers (version 3): a sender with a byte budget (`send --bytes N`) names its transfer and
//! the budget in datagrams in every data datagram, so that the receiver, which keeps no other
//! state, knows when the transfer is complete: when it has received `budget_packets` distinct
//! sequence numbers from that sender (receiver.rs). A bulk flow sends budget 0 (and transfer 0).
//! Nothing is retransmitted, so the budget counts datagrams delivered, and a sender's sequence
//! numbers may run past it (a datagram declared lost is replaced by a new one,
//! `pantheon_cc::flow::Flow::with_budget_packets`).
//!
//! The two clocks are unrelated: the sender's counts from its flow's start, the receiver's is its
//! CLOCK_MONOTONIC. Only differences of `recv_us`, or `recv_us − send_us` up to a constant, mean
//! anything — which is what one-way-delay controllers (LEDBAT, RFC 6817 §2.4.1) use.
//!
//! ECN: data datagrams carry the flow's codepoint in their IP header (Not-ECT unless the flow
//! uses ECN), acknowledgements are Not-ECT. The receiver counts the data datagrams that arrive
//! marked CE, per sender, and every acknowledgement echoes the count so far, as QUIC's ECN counts
//! do (RFC 9000 §13.4.1) and TCP's Accurate ECN: a lost acknowledgement loses no mark, the next
//! one carries it. Only the low 16 bits travel; the sender restores the
//! rest from the largest count it has seen ([`unwrap_ce_count`]), which is exact as long as fewer
//! than 32 768 marks separate two acknowledgements it receives. Version 1 had zero there, and
//! version 2 no transfer fields; a datagram of either is not read.

/// "PUDP": Pantheon UDP.
pub const MAGIC: [u8; 4] = *b"PUDP";
pub const VERSION: u8 = 3;
const KIND_DATA: u8 = 1;
const KIND_ACK: u8 = 2;

pub use pantheon_cc::flow::datagram::{ACK_BYTES, IP_UDP_HEADER_BYTES, PACKET_BYTES};

/// The UDP payload of a data datagram.
pub const DATA_BYTES: usize = PACKET_BYTES as usize - IP_UDP_HEADER_BYTES;
/// The header every datagram starts with: magic, version, kind, seq and send_us.
pub const HEADER_BYTES: usize = 24;
/// All a data datagram carries besides padding: the header, the transfer id and the budget.
pub const DATA_HEADER_BYTES: usize = HEADER_BYTES + 8;
/// An acknowledgement is the header and the receive time, nothing more.
const _: () = assert!(ACK_BYTES == HEADER_BYTES + 8);

/// A data datagram's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Data {
    pub seq: u64,
    pub send_us: u64,
    /// The transfer this datagram belongs to (the sender's `--transfer-id`); 0 for a bulk flow.
    pub transfer_id: u32,
    /// Distinct datagrams that complete the transfer; 0 for a bulk flow.
    pub budget_packets: u32,
}

/// An acknowledgement: which datagram, when it was sent (echoed), when it arrived, and how many
/// of the sender's data datagrams had arrived marked CE by then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    pub seq: u64,
    pub send_us: u64,
    pub recv_us: u64,
    /// The receiver's count of CE-marked data datagrams from this sender, modulo 2^16.
    pub ce_count: u16,
}

/// Counts that travel as their low 16 bits.
const CE_COUNT_WRAP: u64 = 1 << 16;

/// The full CE count an acknowledgement's `ce_count` stands for, given the largest count seen so
/// far: the value with those low 16 bits nearest to it, as QUIC decodes a truncated packet number
/// (RFC 9000 §A.3). An acknowledgement overtaken by a later one has a count a little smaller than
/// the largest; a later one, at most 32 767 more.
pub fn unwrap_ce_count(largest: u64, ce_count: u16) -> u64 {
    let candidate = (largest & !(CE_COUNT_WRAP - 1)) | u64::from(ce_count);
    if candidate + CE_COUNT_WRAP / 2 <= largest {
        candidate + CE_COUNT_WRAP
    } else if candidate > largest + CE_COUNT_WRAP / 2 && candidate >= CE_COUNT_WRAP {
        candidate - CE_COUNT_WRAP
    } else {
        candidate
    }
}

fn write_header(buffer: &mut [u8], kind: u8, seq: u64, send_us: u64) {
    buffer[0..4].copy_from_slice(&MAGIC);
    buffer[4] = VERSION;
    buffer[5] = kind;
    buffer[6..8].fill(0);
    buffer[8..16].copy_from_slice(&seq.to_be_bytes());
    buffer[16..24].copy_from_slice(&send_us.to_be_bytes());
}

/// `(seq, send_us)` of a datagram of `kind` at least `len` bytes long, or `None`.
fn read_header(bytes: &[u8], kind: u8, len: usize) -> Option<(u64, u64)> {
    if bytes.len() < len || bytes[0..4] != MAGIC || bytes[4] != VERSION || bytes[5] != kind {
        return None;
    }
    let word = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    Some((word(8), word(16)))
}

impl Data {
    /// Writes the header into a datagram buffer; the padding after it is left as it is (the
    /// sender zeroes its one buffer once).
    pub fn encode(&self, datagram: &mut [u8; DATA_BYTES]) {
        write_header(datagram, KIND_DATA, self.seq, self.send_us);
        datagram[24..28].copy_from_slice(&self.transfer_id.to_be_bytes());
        datagram[28..32].copy_from_slice(&self.budget_packets.to_be_bytes());
    }

    /// Any datagram that starts with a data header counts, whatever its length, so that a sender
    /// with another datagram size is still acknowledged.
    pub fn decode(bytes: &[u8]) -> Option<Data> {
        let (seq, send_us) = read_header(bytes, KIND_DATA, DATA_HEADER_BYTES)?;
        let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        Some(Data { seq, send_us, transfer_id: word(24), budget_packets: word(28) })
    }
}

impl Ack {
    pub fn encode(&self, datagram: &mut [u8; ACK_BYTES]) {
        write_header(datagram, KIND_ACK, self.seq, self.send_us);
        datagram[6..8].copy_from_slice(&self.ce_count.to_be_bytes());
        datagram[24..32].copy_from_slice(&self.recv_us.to_be_bytes());
    }

    pub fn decode(bytes: &[u8]) -> Option<Ack> {
        let (seq, send_us) = read_header(bytes, KIND_ACK, ACK_BYTES)?;
        let recv_us = u64::from_be_bytes(bytes[24..32].try_into().expect("8 bytes"));
        let ce_count = u16::from_be_bytes([bytes[6], bytes[7]]);
        Some(Ack { seq, send_us, recv_us, ce_count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_datagram_fills_the_tunnels_inner_mtu() {
        assert_eq!(DATA_BYTES, 1436);
        assert_eq!(DATA_BYTES + IP_UDP_HEADER_BYTES, 1464);
    }

    #[test]
    fn data_layout_is_the_documented_one() {
        let mut datagram = [0u8; DATA_BYTES];
        let data = Data { seq: 0x0102_0304_0506_0708, send_us: 1_000_000, transfer_id: 7, budget_packets: 100 };
        data.encode(&mut datagram);
        assert_eq!(&datagram[0..8], b"PUDP\x03\x01\x00\x00");
        assert_eq!(datagram[8..16], [1, 2, 3, 4, 5, 6, 7, 8]);
        // 1 000 000 = 0x0F4240
        assert_eq!(datagram[16..24], [0, 0, 0, 0, 0, 0x0f, 0x42, 0x40]);
        assert_eq!(datagram[24..28], [0, 0, 0, 7]);
        assert_eq!(datagram[28..32], [0, 0, 0, 100]);
        assert!(datagram[32..].iter().all(|&b| b == 0));
        assert_eq!(Data::decode(&datagram), Some(data));
    }

    #[test]
    fn a_version_2_data_datagram_is_not_read() {
        let mut datagram = [0u8; DATA_BYTES];
        Data { seq: 1, send_us: 2, transfer_id: 0, budget_packets: 0 }.encode(&mut datagram);
        datagram[4] = 2;
        assert_eq!(Data::decode(&datagram), None);
    }

    #[test]
    fn ack_round_trips_with_the_ce_count_in_bytes_6_to_8_and_the_receive_time_last() {
        let ack = Ack { seq: 7, send_us: 123, recv_us: u64::MAX - 1, ce_count: 0x0102 };
        let mut datagram = [0u8; ACK_BYTES];
        ack.encode(&mut datagram);
        assert_eq!(&datagram[0..8], b"PUDP\x03\x02\x01\x02");
        assert_eq!(datagram[8..16], 7u64.to_be_bytes());
        assert_eq!(datagram[24..32], (u64::MAX - 1).to_be_bytes());
        assert_eq!(Ack::decode(&datagram), Some(ack));
    }

    #[test]
    fn ce_counts_unwrap_across_the_16_bit_wrap() {
        // Counting up from 0, one acknowledgement every 1000 marks: each restores the full count.
        let mut largest = 0;
        for count in (0..300_000u64).step_by(1000) {
            let unwrapped = unwrap_ce_count(largest, count as u16);
            assert_eq!(unwrapped, count);
            largest = largest.max(unwrapped);
        }
        // Just past the wrap: 65 535 seen, 2 arrives meaning 65 538.
        assert_eq!(unwrap_ce_count(65_535, 2), 65_538);
        // A reordered acknowledgement from before the wrap: 65 538 seen, 65 534 arrives.
        assert_eq!(unwrap_ce_count(65_538, 65_534), 65_534);
        // The largest step forward that is still read as one: 32 767.
        assert_eq!(unwrap_ce_count(100_000, (100_000u64 + 32_767) as u16), 132_767);
        // Early in the flow there is nothing to wrap below 0.
        assert_eq!(unwrap_ce_count(0, 0), 0);
        assert_eq!(unwrap_ce_count(3, 1), 1);
        assert_eq!(unwrap_ce_count(0, u16::MAX), 65_535);
    }

    #[test]
    fn foreign_short_or_mistyped_datagrams_are_rejected() {
        let mut ack = [0u8; ACK_BYTES];
        Ack { seq: 1, send_us: 2, recv_us: 3, ce_count: 4 }.encode(&mut ack);
        // An acknowledgement is not data, and data is not an acknowledgement.
        assert_eq!(Data::decode(&ack), None);
        let mut data = [0u8; DATA_BYTES];
        let sent = Data { seq: 1, send_us: 2, transfer_id: 3, budget_packets: 4 };
        sent.encode(&mut data);
        assert_eq!(Ack::decode(&data[..ACK_BYTES]), None);
        assert_eq!(Ack::decode(&ack[..ACK_BYTES - 1]), None);
        let mut other_version = ack;
        other_version[4] = 1;
        assert_eq!(Ack::decode(&other_version), None);
        let mut other_magic = ack;
        other_magic[0] = b'Q';
        assert_eq!(Ack::decode(&other_magic), None);
        // A shorter data datagram from another sender is still data, down to its header's end.
        assert_eq!(Data::decode(&data[..DATA_HEADER_BYTES]), Some(sent));
        assert_eq!(Data::decode(&data[..DATA_HEADER_BYTES - 1]), None);
    }
}
