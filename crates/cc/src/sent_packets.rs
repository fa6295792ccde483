//! The sender's bookkeeping for one flow, shared by every driver: which packets are in flight,
//! the RTT estimators, loss detection and the delivery-rate state, turning "packet `seq` was
//! acknowledged, the peer received it at `peer_recv_us`" into the `Acked` and `Lost` events a
//! controller consumes.
//!
//! Pantheon's flows are unreliable and full-throttle: every packet is acknowledged on its own and
//! nothing is retransmitted, so a packet is in flight until it is acknowledged or declared lost,
//! and then forgotten.
//!
//! - Sent packets live in a ring indexed by sequence number (sequence numbers are assigned here,
//!   consecutively from 0). The ring doubles when the flight outgrows it, so once the window has
//!   reached its largest size no packet allocates.
//! - RTT: every acknowledgement is a sample (each acknowledges exactly one packet, and no packet
//!   is ever retransmitted, so Karn's ambiguity cannot arise). Smoothed RTT and RTT variance per
//!   RFC 6298 §2 (alpha = 1/8, beta = 1/4); the retransmission timeout RTO = SRTT +
//!   max(4·RTTVAR, 200 ms), 1 s before the first sample (§2.1). RFC 6298's K·RTTVAR term has G
//!   = 1 ms as its floor; Linux's is TCP_RTO_MIN, 200 ms (tcp_rtt_estimator keeps its variance
//!   term, mdev_max_us, at or above tcp_rto_min_us), which is the deviation below.
//! - A late acknowledgement of a packet already declared lost is an RTT sample too, and only
//!   that: RFC 9002 §5.1 samples any newly acknowledged packet, lost or not. It is not a second
//!   `Acked` event, and the loss the controller got stays (RFC 9002 §6.1 accepts that a spurious
//!   declaration costs a congestion response; no undo such as Linux's tcp_try_undo_loss). Without
//!   it a queue that grows faster than SRTT follows (a slow Poisson path) makes every packet
//!   time out, and the sender stops learning RTTs: one emulated Copa run on mexico-cellular
//!   declared 8,359 of 8,692 datagrams lost, 6,187 of them acknowledged later. A lost packet is
//!   remembered only while the ring keeps its slot; one reused by a later packet is not
//!   recognised, and its acknowledgement is ignored.
//! - Loss detection per RFC 9002 §6.1: a packet is lost once a packet sent at least
//!   kPacketThreshold = 3 later has been acknowledged, or once it was sent longer than
//!   kTimeThreshold · max(SRTT, latest RTT) ago (kTimeThreshold = 9/8, at least
//!   kGranularity = 1 ms) and a later packet has been acknowledged.
//! - Deviation: where RFC 9002 sends probes after a probe timeout (§6.2) — which a flow without
//!   retransmission cannot use to recover — a packet still unacknowledged one RTO after it was
//!   sent is declared lost. This is what ends a stall when a whole window is lost. Its margin
//!   over SRTT is at least 200 ms, as Linux's is, rather than RFC 6298 §2.4's floor of 1 s on
//!   the whole RTO: the 1 s floor protects against spurious retransmission, and here a spurious
//!   loss costs only one reduction. A floor of 200 ms on the whole RTO (docs/cc.md, "History")
//!   leaves a margin of 4·RTTVAR once the RTT passes it, and a queue that grows
//!   smoothly keeps RTTVAR near zero, so a host's hiccup of a millisecond or two could declare
//!   the flight lost: cubic-user and reno-user halved their windows at every 200 ms of RTT on a
//!   5-BDP buffer (12 Mbit/s, 30 ms, 450 kB, 2 runs of 30 s over the emulator: p95 one-way delay
//!   166 and 170 ms against the kernel's 329 and 322, bench/twin_fidelity.py).
//! - As in TCP, the RTO timer restarts whenever an acknowledgement arrives for a packet not
//!   acknowledged before (RFC 6298 §5.3; Linux's tcp_rearm_rto): a packet's RTO runs from its
//!   send or from the latest such acknowledgement, whichever is later, so what times a flight
//!   out is an RTO without acknowledgements. Run from the send alone, where the packet's own RTT
//!   takes up SRTT of it, about 200 ms without acknowledgements did: on a cellular trace, whose
//!   links go silent for a few hundred ms (TMobile-LTE-short's downlink 160-300 ms five times in
//!   its first 30 s, its uplink 724 ms once), the twins declared whole flights lost and cut their
//!   windows where the kernel's Cubic and Reno waited: their p95 one-way delay there was 0.71 of
//!   the kernel's, and is 0.88 (cubic-user) and 0.92 (reno-user) since (bench/twin_fidelity.py,
//!   2 runs of 30 s).
//! - Each expiry of the timer (a `detect_losses` call that declares packets lost by the RTO
//!   alone) doubles the RTO, up to 60 s (RFC 6298 §5.5), and the next RTT sample collapses it
//!   back to the §2 value (RFC 6298 §5, the note after rule 5.7).
//! - Delivery rate state per draft-cheng-iccrg-delivery-rate-estimation §3.2: each packet records
//!   the connection's delivered bytes, delivered time and first-sent time at its send, and
//!   whether the flow was application-limited.
//!
//! The driver calls `on_sent` for each packet it sends, `on_ack` for each acknowledgement, and
//! `detect_losses` after each acknowledgement and whenever `loss_deadline_us` passes.

use crate::{Acked, Lost, Sent};

/// RFC 9002 §6.1.1 kPacketThreshold.
const PACKET_THRESHOLD: u64 = 3;
/// RFC 9002 §6.1.2 kGranularity, the smallest loss delay.
const GRANULARITY_US: u64 = 1_000;
/// RFC 6298 §2.1: the RTO before any RTT sample.
const INITIAL_RTO_US: u64 = 1_000_000;
/// The least margin of the RTO over SRTT: Linux's TCP_RTO_MIN, the floor of its variance term
/// (see the header for why not RFC 6298's 1 s floor on the whole RTO).
const MIN_RTO_MARGIN_US: u64 = 200_000;
/// RFC 6298 §2.5's upper bound.
const MAX_RTO_US: u64 = 60_000_000;
/// Ring slots allocated up front; enough for a 6 MB window of 1500-byte packets.
const INITIAL_RING_PACKETS: usize = 4096;

#[derive(Debug, Clone, Copy, Default)]
struct SentPacket {
    seq: u64,
    sent_us: u64,
    bytes: u64,
    delivered_bytes_at_send: u64,
    delivered_time_at_send_us: u64,
    first_sent_time_at_send_us: u64,
    app_limited: bool,
    /// Neither acknowledged nor declared lost yet.
    in_flight: bool,
    /// Declared lost and not acknowledged since: a late acknowledgement is still an RTT sample.
    declared_lost: bool,
}

/// The RTT estimators of RFC 6298 §2, in microseconds.
#[derive(Debug, Clone, Copy, Default)]
struct Rtt {
    srtt_us: u64,
    rttvar_us: u64,
    min_us: u64,
    latest_us: u64,
    sampled: bool,
    /// Timer expiries since the last sample: the RTO is doubled this many times (RFC 6298 §5.5).
    backoff_exponent: u32,
}

impl Rtt {
    fn sample(&mut self, rtt_us: u64) {
        if !self.sampled {
            self.sampled = true;
            self.srtt_us = rtt_us;
            self.rttvar_us = rtt_us / 2;
            self.min_us = rtt_us;
        } else {
            let deviation_us = self.srtt_us.abs_diff(rtt_us);
            self.rttvar_us = (3 * self.rttvar_us + deviation_us) / 4;
            self.srtt_us = (7 * self.srtt_us + rtt_us) / 8;
            self.min_us = self.min_us.min(rtt_us);
        }
        self.latest_us = rtt_us;
        self.backoff_exponent = 0;
    }

    fn rto_us(&self) -> u64 {
        let base_us =
            if self.sampled { self.srtt_us + (4 * self.rttvar_us).max(MIN_RTO_MARGIN_US) } else { INITIAL_RTO_US };
        (base_us << self.backoff_exponent).min(MAX_RTO_US)
    }

    /// The RTO timer expired: double the RTO (RFC 6298 §5.5). Once at the maximum the exponent
    /// stops growing, so the shift in `rto_us` cannot overflow.
    fn back_off(&mut self) {
        if self.rto_us() < MAX_RTO_US {
            self.backoff_exponent += 1;
        }
    }
}

/// One flow's sent packets and what their acknowledgements taught: RTT, losses, delivery rate.
#[derive(Debug, Clone)]
pub struct SentPackets {
    /// Sent packets, slot `seq % len`; `len` is a power of two.
    ring: Vec<SentPacket>,
    /// Sequence number of the next packet to send.
    next_seq: u64,
    /// Every packet below this is acknowledged or lost.
    oldest_unresolved_seq: u64,
    largest_acked_seq: Option<u64>,
    inflight_bytes: u64,
    rtt: Rtt,
    /// When the RTO timer last restarted: the latest acknowledgement of a packet not acknowledged
    /// before (RFC 6298 §5.3), µs; 0 before the first.
    timer_restarted_us: u64,
    /// Delivery-rate state (draft-cheng-iccrg-delivery-rate-estimation §3.1: C.delivered,
    /// C.delivered_time, C.first_sent_time, C.app_limited).
    delivered_bytes: u64,
    delivered_time_us: u64,
    first_sent_time_us: u64,
    /// Nonzero while application-limited: the `delivered_bytes` value past which the flow stops
    /// counting as application-limited.
    app_limited_until_bytes: u64,
    /// Packets the peer is known to have received: each acknowledged packet once, those
    /// acknowledged after being declared lost included (a byte budget counts these, flow/mod.rs).
    acked_packets: u64,
}

impl Default for SentPackets {
    fn default() -> Self {
        Self::new()
    }
}

impl SentPackets {
    pub fn new() -> Self {
        SentPackets {
            ring: vec![SentPacket::default(); INITIAL_RING_PACKETS],
            next_seq: 0,
            oldest_unresolved_seq: 0,
            largest_acked_seq: None,
            inflight_bytes: 0,
            rtt: Rtt::default(),
            timer_restarted_us: 0,
            delivered_bytes: 0,
            delivered_time_us: 0,
            first_sent_time_us: 0,
            app_limited_until_bytes: 0,
            acked_packets: 0,
        }
    }

    fn slot(&self, seq: u64) -> usize {
        (seq as usize) & (self.ring.len() - 1)
    }

    /// Records a packet of `bytes` leaving at `now_us` and returns the event for the controller;
    /// the packet's sequence number is `Sent::seq`.
    pub fn on_sent(&mut self, now_us: u64, bytes: u64) -> Sent {
        if self.next_seq - self.oldest_unresolved_seq == self.ring.len() as u64 {
            self.grow();
        }
        if self.inflight_bytes == 0 {
            // Nothing in flight: the next rate sample's intervals start now (§3.2).
            self.first_sent_time_us = now_us;
            self.delivered_time_us = now_us;
        }
        let seq = self.next_seq;
        let slot = self.slot(seq);
        self.ring[slot] = SentPacket {
            seq,
            sent_us: now_us,
            bytes,
            delivered_bytes_at_send: self.delivered_bytes,
            delivered_time_at_send_us: self.delivered_time_us,
            first_sent_time_at_send_us: self.first_sent_time_us,
            app_limited: self.app_limited_until_bytes != 0,
            in_flight: true,
            declared_lost: false,
        };
        self.next_seq += 1;
        self.inflight_bytes += bytes;
        Sent { now_us, seq, bytes, inflight_bytes: self.inflight_bytes }
    }

    /// Doubles the ring, keeping every unresolved packet at its slot for the new size.
    fn grow(&mut self) {
        let mut ring = vec![SentPacket::default(); self.ring.len() * 2];
        let mask = ring.len() - 1;
        for seq in self.oldest_unresolved_seq..self.next_seq {
            ring[(seq as usize) & mask] = self.ring[self.slot(seq)];
        }
        self.ring = ring;
    }

    /// The driver had nothing to send although the controller allowed it: samples taken until
    /// what is in flight now is delivered are marked application-limited (§3.4).
    pub fn mark_app_limited(&mut self) {
        self.app_limited_until_bytes = (self.delivered_bytes + self.inflight_bytes).max(1);
    }

    /// Packet `seq` was acknowledged at `now_us`; the peer received it at `peer_recv_us` on its
    /// own clock. `None` when `seq` is not in flight: never sent, already acknowledged, or
    /// already declared lost (a late acknowledgement of a lost packet is only an RTT sample).
    pub fn on_ack(&mut self, now_us: u64, seq: u64, peer_recv_us: u64) -> Option<Acked> {
        if seq >= self.next_seq {
            return None;
        }
        let slot = self.slot(seq);
        let packet = self.ring[slot];
        if packet.seq != seq {
            return None;
        }
        if packet.declared_lost {
            self.ring[slot].declared_lost = false;
            self.acked_packets += 1;
            self.rtt.sample(now_us.saturating_sub(packet.sent_us));
            self.timer_restarted_us = now_us;
            return None;
        }
        if !packet.in_flight {
            return None;
        }
        self.timer_restarted_us = now_us;
        self.ring[slot].in_flight = false;
        self.inflight_bytes -= packet.bytes;
        self.acked_packets += 1;
        let rtt_us = now_us.saturating_sub(packet.sent_us);
        self.rtt.sample(rtt_us);
        self.largest_acked_seq = Some(self.largest_acked_seq.map_or(seq, |s| s.max(seq)));

        self.delivered_bytes += packet.bytes;
        self.delivered_time_us = now_us;
        self.first_sent_time_us = packet.sent_us;
        if self.app_limited_until_bytes != 0 && self.delivered_bytes > self.app_limited_until_bytes {
            self.app_limited_until_bytes = 0;
        }
        self.skip_resolved();
        Some(Acked {
            now_us,
            seq,
            bytes: packet.bytes,
            sent_us: packet.sent_us,
            peer_recv_us,
            rtt_us,
            srtt_us: self.rtt.srtt_us,
            min_rtt_us: self.rtt.min_us,
            delivered_bytes: self.delivered_bytes,
            delivered_bytes_at_send: packet.delivered_bytes_at_send,
            delivered_time_at_send_us: packet.delivered_time_at_send_us,
            first_sent_time_at_send_us: packet.first_sent_time_at_send_us,
            inflight_bytes: self.inflight_bytes,
            app_limited: packet.app_limited,
            // The bookkeeping knows nothing of ECN: `flow::Flow::on_ack` sets it.
            ce_marks: 0,
        })
    }

    fn skip_resolved(&mut self) {
        while self.oldest_unresolved_seq < self.next_seq && !self.ring[self.slot(self.oldest_unresolved_seq)].in_flight
        {
            self.oldest_unresolved_seq += 1;
        }
    }

    /// RFC 9002 §6.1.2's loss delay: 9/8 of max(SRTT, latest RTT), at least 1 ms.
    fn loss_delay_us(&self) -> u64 {
        (self.rtt.srtt_us.max(self.rtt.latest_us) * 9 / 8).max(GRANULARITY_US)
    }

    /// Whether a later acknowledgement shows the oldest unresolved packet (which was sent first
    /// of all in flight) lost by `now_us` (RFC 9002 §6.1).
    fn is_overtaken(&self, packet: &SentPacket, now_us: u64) -> bool {
        self.largest_acked_seq.is_some_and(|largest| {
            largest >= packet.seq + PACKET_THRESHOLD
                || (largest > packet.seq && packet.sent_us + self.loss_delay_us() <= now_us)
        })
    }

    /// Where a packet's RTO runs from: its send, or the timer's last restart if later (RFC 6298
    /// §5.3). It only grows with the sequence number, so the oldest packet times out first.
    fn timeout_base_us(&self, packet: &SentPacket) -> u64 {
        packet.sent_us.max(self.timer_restarted_us)
    }

    /// Declares lost every packet that is lost by `now_us`, oldest first. Packets are sent in
    /// sequence order, so the first survivor ends the scan and every packet is examined once.
    /// Packets declared lost by the RTO alone make one timer expiry, which backs the RTO off
    /// once the scan is over.
    pub fn detect_losses(&mut self, now_us: u64, on_lost: &mut impl FnMut(&Lost)) {
        let rto_us = self.rtt.rto_us();
        let mut timer_expired = false;
        while self.oldest_unresolved_seq < self.next_seq {
            let slot = self.slot(self.oldest_unresolved_seq);
            let packet = self.ring[slot];
            if !self.is_overtaken(&packet, now_us) {
                if self.timeout_base_us(&packet) + rto_us > now_us {
                    break;
                }
                timer_expired = true;
            }
            self.ring[slot].in_flight = false;
            self.ring[slot].declared_lost = true;
            self.inflight_bytes -= packet.bytes;
            self.skip_resolved();
            on_lost(&Lost {
                now_us,
                seq: packet.seq,
                bytes: packet.bytes,
                sent_us: packet.sent_us,
                inflight_bytes: self.inflight_bytes,
            });
        }
        if timer_expired {
            self.rtt.back_off();
        }
    }

    /// When `detect_losses` must next run if no acknowledgement comes first.
    pub fn loss_deadline_us(&self) -> Option<u64> {
        if self.oldest_unresolved_seq == self.next_seq {
            return None;
        }
        let oldest = &self.ring[self.slot(self.oldest_unresolved_seq)];
        let timeout_us = self.timeout_base_us(oldest) + self.rtt.rto_us();
        match self.largest_acked_seq {
            Some(largest) if largest > oldest.seq => Some(timeout_us.min(oldest.sent_us + self.loss_delay_us())),
            _ => Some(timeout_us),
        }
    }

    pub fn inflight_bytes(&self) -> u64 {
        self.inflight_bytes
    }

    /// Smoothed RTT, `None` before the first sample.
    pub fn srtt_us(&self) -> Option<u64> {
        self.rtt.sampled.then_some(self.rtt.srtt_us)
    }

    pub fn min_rtt_us(&self) -> Option<u64> {
        self.rtt.sampled.then_some(self.rtt.min_us)
    }

    pub fn rto_us(&self) -> u64 {
        self.rtt.rto_us()
    }

    pub fn delivered_bytes(&self) -> u64 {
        self.delivered_bytes
    }

    /// Packets acknowledged, each once, late acknowledgements of packets declared lost included
    /// (unlike `delivered_bytes`, the delivery-rate state, which counts only packets in flight).
    pub fn acked_packets(&self) -> u64 {
        self.acked_packets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost(sender: &mut SentPackets, now_us: u64) -> Vec<u64> {
        let mut seqs = Vec::new();
        sender.detect_losses(now_us, &mut |l| seqs.push(l.seq));
        seqs
    }

    #[test]
    fn rtt_estimators_follow_rfc6298() {
        let mut s = SentPackets::new();
        s.on_sent(0, 1500);
        s.on_sent(0, 1500);
        let a = s.on_ack(100_000, 0, 50).unwrap();
        // First sample: SRTT = R, RTTVAR = R/2, RTO = R + 4·R/2 = 300 ms.
        assert_eq!((a.rtt_us, a.srtt_us, a.min_rtt_us), (100_000, 100_000, 100_000));
        assert_eq!(s.rto_us(), 300_000);
        let b = s.on_ack(180_000, 1, 60).unwrap();
        // RTTVAR = 3/4·50 + 1/4·80 = 57.5 ms; SRTT = 7/8·100 + 1/8·180 = 110 ms.
        assert_eq!(b.srtt_us, 110_000);
        assert_eq!(s.rto_us(), 110_000 + 4 * 57_500);
        assert_eq!(b.min_rtt_us, 100_000);
    }

    #[test]
    fn three_later_acks_declare_a_packet_lost() {
        let mut s = SentPackets::new();
        for _ in 0..5 {
            s.on_sent(0, 1000);
        }
        s.on_ack(10_000, 1, 0).unwrap();
        s.on_ack(10_001, 2, 0).unwrap();
        assert!(lost(&mut s, 10_001).is_empty());
        s.on_ack(10_002, 3, 0).unwrap();
        // Packet 0 is 3 behind packet 3; the time threshold (9/8 · 10 ms) has not passed yet.
        assert_eq!(lost(&mut s, 10_002), vec![0]);
        assert_eq!(s.inflight_bytes(), 1000);
        // A late acknowledgement of a lost packet is no `Acked` event and returns no bytes.
        assert_eq!(s.on_ack(10_003, 0, 0), None);
        assert_eq!(s.inflight_bytes(), 1000);
    }

    /// A sender whose packet 0 took 20 ms (RTO 20 + 200 ms) and whose packet 1, sent at 30 ms,
    /// timed out at 250 ms.
    fn packet_1_timed_out() -> SentPackets {
        let mut s = SentPackets::new();
        s.on_sent(0, 1000);
        s.on_ack(20_000, 0, 0).unwrap();
        s.on_sent(30_000, 1000);
        assert!(lost(&mut s, 249_999).is_empty());
        assert_eq!(lost(&mut s, 250_000), vec![1]);
        s
    }

    #[test]
    fn a_late_ack_of_a_lost_packet_is_an_rtt_sample_once() {
        let mut s = packet_1_timed_out();
        let delivered = s.delivered_bytes();
        assert_eq!(s.on_ack(430_000, 1, 0), None);
        // SRTT = 7/8 · 20 ms + 1/8 · 400 ms.
        assert_eq!(s.srtt_us(), Some(67_500));
        assert_eq!((s.inflight_bytes(), s.delivered_bytes()), (0, delivered));
        assert_eq!(s.acked_packets(), 2);
        // A duplicate is no second sample, and no second packet received.
        assert_eq!(s.on_ack(900_000, 1, 0), None);
        assert_eq!(s.srtt_us(), Some(67_500));
        assert_eq!(s.acked_packets(), 2);
    }

    #[test]
    fn a_lost_packet_whose_slot_was_reused_is_forgotten() {
        let mut s = packet_1_timed_out();
        for seq in 2..2 + INITIAL_RING_PACKETS as u64 {
            s.on_sent(260_000, 1000);
            s.on_ack(280_000, seq, 0).unwrap();
        }
        let srtt_us = s.srtt_us();
        assert_eq!(s.on_ack(300_000, 1, 0), None);
        assert_eq!(s.srtt_us(), srtt_us);
    }

    #[test]
    fn consecutive_timeouts_double_the_rto_and_a_sample_resets_it() {
        let mut s = packet_1_timed_out();
        assert_eq!(s.rto_us(), 440_000);
        s.on_sent(260_000, 1000);
        assert_eq!(s.loss_deadline_us(), Some(700_000));
        assert!(lost(&mut s, 699_999).is_empty());
        assert_eq!(lost(&mut s, 700_000), vec![2]);
        assert_eq!(s.rto_us(), 880_000);
        s.on_sent(710_000, 1000);
        s.on_ack(730_000, 3, 0).unwrap();
        // SRTT 20 ms, RTTVAR 7.5 ms: back to SRTT + the 200 ms margin.
        assert_eq!(s.rto_us(), 220_000);
    }

    #[test]
    fn the_backed_off_rto_stops_at_sixty_seconds() {
        let mut s = SentPackets::new();
        let mut now_us = 0;
        for _ in 0..12 {
            s.on_sent(now_us, 1000);
            now_us += s.rto_us();
            assert_eq!(lost(&mut s, now_us).len(), 1);
        }
        assert_eq!(s.rto_us(), MAX_RTO_US);
    }

    #[test]
    fn time_threshold_declares_a_packet_lost_at_nine_eighths_rtt() {
        let mut s = SentPackets::new();
        s.on_sent(0, 1000);
        s.on_sent(1, 1000);
        s.on_ack(80_001, 1, 0).unwrap();
        // Loss delay = 9/8 · 80 ms = 90 ms after packet 0's send.
        assert_eq!(s.loss_deadline_us(), Some(90_000));
        assert!(lost(&mut s, 89_999).is_empty());
        assert_eq!(lost(&mut s, 90_000), vec![0]);
        assert_eq!(s.loss_deadline_us(), None);
    }

    #[test]
    fn a_silent_window_is_lost_after_one_rto() {
        let mut s = SentPackets::new();
        s.on_sent(0, 1000);
        s.on_ack(20_000, 0, 0).unwrap();
        // RTO = 20 ms + max(4·10 ms, 200 ms) = 220 ms.
        s.on_sent(30_000, 1000);
        s.on_sent(30_500, 1000);
        assert_eq!(s.loss_deadline_us(), Some(250_000));
        assert!(lost(&mut s, 249_999).is_empty());
        // One expiry declares both lost and backs the RTO off once.
        assert_eq!(lost(&mut s, 250_600), vec![1, 2]);
        assert_eq!(s.inflight_bytes(), 0);
        assert_eq!(s.rto_us(), 440_000);
    }

    #[test]
    fn each_acknowledgement_restarts_the_rto_timer() {
        // Three packets leave together into a queue; their acknowledgements come 20 and 210 ms
        // later, then nothing. Packet 2's timeout runs from the last acknowledgement, not from its
        // send: the flow is declared silent only after a whole RTO without one (RFC 6298 §5.3).
        let mut s = SentPackets::new();
        for _ in 0..3 {
            s.on_sent(0, 1000);
        }
        s.on_ack(20_000, 0, 0).unwrap();
        s.on_ack(210_000, 1, 0).unwrap();
        // SRTT = 7/8 · 20 + 1/8 · 210 = 43.75 ms; RTTVAR = 3/4 · 10 + 1/4 · 190 = 55 ms.
        assert_eq!(s.rto_us(), 43_750 + 4 * 55_000);
        assert_eq!(s.loss_deadline_us(), Some(210_000 + 263_750));
        assert!(lost(&mut s, 473_749).is_empty());
        assert_eq!(lost(&mut s, 473_750), vec![2]);
    }

    #[test]
    fn a_late_acknowledgement_restarts_the_rto_timer_too() {
        let mut s = packet_1_timed_out();
        s.on_sent(260_000, 1000);
        // Packet 1's acknowledgement (RTT 400 ms) shows the path alive. SRTT = 67.5 ms, RTTVAR =
        // 3/4 · 10 + 1/4 · 380 = 102.5 ms.
        assert_eq!(s.on_ack(430_000, 1, 0), None);
        assert_eq!(s.rto_us(), 67_500 + 4 * 102_500);
        assert_eq!(s.loss_deadline_us(), Some(430_000 + 477_500));
    }

    #[test]
    fn past_200_ms_of_rtt_the_rto_keeps_200_ms_of_margin() {
        // A queue growing by 1 ms a second at a 300 ms RTT: RTTVAR falls to a few µs, and the RTO
        // stays SRTT + 200 ms, so a packet delayed 5 ms by a host stall is not declared lost
        // (with a 200 ms floor on the whole RTO its margin would be max(G, 4·RTTVAR) = 1 ms).
        let mut s = SentPackets::new();
        for seq in 0..100 {
            s.on_sent(seq * 1_000, 1000);
        }
        for seq in 0..100 {
            s.on_ack(seq * 1_000 + 300_000 + seq, seq, 0).unwrap();
        }
        let srtt_us = s.srtt_us().unwrap();
        assert!((300_090..=300_100).contains(&srtt_us), "{srtt_us}");
        assert_eq!(s.rto_us(), srtt_us + 200_000);
        let now_us = 400_000;
        s.on_sent(now_us, 1000);
        assert!(lost(&mut s, now_us + 305_100).is_empty());
        assert_eq!(lost(&mut s, now_us + srtt_us + 200_000), vec![100]);
    }

    #[test]
    fn rate_sample_fields_give_the_bottleneck_rate() {
        // Twenty 1500-byte packets leave at t = 0 and packet n is acknowledged at 40 + n ms (a
        // 12 Mbit/s bottleneck); each acknowledgement releases one more packet.
        let mut s = SentPackets::new();
        for _ in 0..20 {
            s.on_sent(0, 1500);
        }
        let mut rates = Vec::new();
        for seq in 0..60 {
            let a = s.on_ack(40_000 + seq * 1000, seq, seq * 1000).unwrap();
            rates.push(a.delivery_rate_bps());
            s.on_sent(a.now_us, 1500);
        }
        // The first packets' samples run from the first send, so they under-estimate:
        // (n+1)·1500 B over 40 + n ms.
        assert_eq!(rates[0], Some(300_000));
        assert_eq!(rates[9], Some(10 * 1500 * 8 * 1_000_000 / 49_000));
        // Packet 59 left at 79 ms (when 40 packets were delivered) after packet 39, which left at
        // 59 ms: 20 packets over 20 ms both ways, the bottleneck rate exactly.
        assert_eq!(rates[59], Some(12_000_000));
    }

    #[test]
    fn ring_grows_with_the_flight_and_keeps_packets() {
        let mut s = SentPackets::new();
        for t in 0..10_000 {
            s.on_sent(t, 100);
        }
        assert_eq!(s.inflight_bytes(), 1_000_000);
        let a = s.on_ack(20_000, 9_999, 0).unwrap();
        assert_eq!((a.sent_us, a.rtt_us), (9_999, 10_001));
        let b = s.on_ack(20_001, 0, 0).unwrap();
        assert_eq!(b.sent_us, 0);
    }

    #[test]
    fn app_limited_marks_samples_until_the_flight_is_delivered() {
        let mut s = SentPackets::new();
        s.on_sent(0, 1000);
        s.mark_app_limited();
        s.on_sent(1, 1000);
        assert!(!s.on_ack(10_000, 0, 0).unwrap().app_limited);
        assert!(s.on_ack(10_001, 1, 0).unwrap().app_limited);
        s.on_sent(10_002, 1000);
        assert!(!s.on_ack(20_000, 2, 0).unwrap().app_limited);
    }
}
