//! Monitor intervals, the unit of experiment of PCC (Dong et al., "PCC: Re-architecting
//! Congestion Control for Consistent High Performance", NSDI 2015, §2.1 and §3; reused unchanged
//! by PCC Vivace, NSDI 2018, §2). The sender of both, `Pcc` (`mod.rs`), runs them.
//!
//! A PCC sender divides time into consecutive monitor intervals (MIs). During one MI it sends at
//! one fixed rate; once every packet sent in that MI has been acknowledged or declared lost, the
//! MI's results — its rate, its loss rate, the RTT samples of its packets — are turned into a
//! utility value by the controller. MIs are pipelined (§3 of the Allegro paper): the next MI
//! starts as soon as the last one's sending period ends, without waiting for its results, so
//! results arrive about one RTT after the MI that produced them has finished.
//!
//! What this file keeps, per MI:
//! - which packets belong to it: the consecutive sequence numbers sent while it was open (the
//!   driver numbers packets consecutively, `sent_packets.rs`), so a packet is found by range;
//! - packets and bytes sent, acknowledged and lost (a loss is the driver's RFC 9002 verdict);
//! - the span of its packets' send times and of their acknowledgements' arrival times, whose
//!   ratio tells whether the bottleneck delivered them as fast as they were sent (Allegro's
//!   throughput);
//! - the least-squares sums of (send time, RTT) over its acknowledged packets, from which Vivace
//!   reads the RTT gradient dRTT/dT (Vivace §3: linear regression over the MI's samples);
//! - whether it is complete: closed for sending, and every packet sent in it resolved.
//!
//! MI length: the papers tie an MI to the RTT and randomize it so that competing senders do not
//! keep their MIs aligned. We draw it uniformly from [1.7, 2.2] × SRTT (our choice within the
//! "one to two RTTs" of the papers: longer than one RTT plus RFC 9002's 9/8-RTT loss delay, so an
//! MI's results arrive before the next MI ends and every decision is at most one MI stale), and
//! at least the time to send `MIN_PACKETS_PER_INTERVAL` = 40 packets at the MI's rate, so that a
//! low-rate MI measures a loss rate rather than one packet's fate: one random loss in 40 is
//! 2.5%, below Allegro's 5% threshold. (With 10, one random loss in the first 1.2 Mbit/s MIs
//! ended the starting state at once; over the emulator with 1% loss Allegro then took 20 s to
//! climb to a 12 Mbit/s link and averaged 38% of it, against 90% with 40.) A controller may set
//! its own least (`Monitor::with_min_packets`): Vivace's is its authors' 4. Before the first RTT
//! sample, SRTT is taken as `INITIAL_RTT_US` = 100 ms.
//!
//! The sending rate `x` a utility uses is the MI's target (pacing) rate, not a count of its
//! packets: at tens of packets per MI, one packet more or less is a change of a few percent —
//! as large as the 1–5% rate differences the controllers compare.
//!
//! Randomness (MI lengths here, trial orders in the controllers) comes from a SplitMix64
//! generator (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA
//! 2014) seeded by the controller's `seed` parameter, so runs are reproducible.
//!
//! Nothing here allocates after `new`: the MIs awaiting results live in a fixed ring of
//! `MAX_PENDING_INTERVALS`. Should a stalled path leave more MIs unresolved than that, the
//! oldest is reported as it stands (its unresolved packets counted neither way).

use crate::{Acked, Lost, Sent};

/// MIs awaiting results at most; with MIs of ≥ 1.7 RTT only two or three are ever pending.
pub const MAX_PENDING_INTERVALS: usize = 16;
/// Allegro's MI length, in SRTTs, is uniform over this range.
pub const INTERVAL_MIN_RTTS: f64 = 1.7;
pub const INTERVAL_MAX_RTTS: f64 = 2.2;
/// An MI lasts at least long enough to send this many packets at its rate.
pub const MIN_PACKETS_PER_INTERVAL: f64 = 40.0;
/// SRTT assumed before the first sample.
pub const INITIAL_RTT_US: u64 = 100_000;

/// SplitMix64: a seeded, allocation-free generator for the controllers' random choices.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn coin(&mut self) -> bool {
        self.next_u64() >> 63 == 1
    }
}

/// One monitor interval; `R` is the controller's label for what the MI is for.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Interval<R> {
    /// Consecutive from 0 over the flow's MIs.
    pub id: u64,
    pub role: R,
    /// The rate the sender paces at during this MI.
    pub rate_bps: f64,
    pub start_us: u64,
    /// Planned end while open; the actual end once closed.
    pub end_us: u64,
    /// Still the MI new packets are counted in.
    pub open: bool,
    /// Sequence number of its first packet; its packets are `first_seq..first_seq + sent_packets`.
    pub first_seq: u64,
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub acked_packets: u64,
    pub acked_bytes: u64,
    pub lost_packets: u64,
    pub lost_bytes: u64,
    /// CE marks reported by its packets' acknowledgements: counted as losses by `loss_rate`
    /// (RFC 3168 §5: a mark stands for a drop), though their packets count as acknowledged.
    pub marked_packets: u64,
    /// Send times of its first- and last-sent acknowledged packets, and the times the first and
    /// last acknowledgements arrived (µs).
    first_acked_sent_us: u64,
    last_acked_sent_us: u64,
    first_ack_us: u64,
    last_ack_us: u64,
    /// Least-squares sums over acknowledged packets of t = send time − `start_us` and the RTT,
    /// both in seconds.
    rtt_samples: u64,
    sum_t_s: f64,
    sum_rtt_s: f64,
    sum_tt_s2: f64,
    sum_t_rtt_s2: f64,
    sum_rtt_rtt_s2: f64,
}

/// The loss rate of two MIs' packets together, each given as (loss rate, resolved packets).
pub fn pooled_loss_rate(a: (f64, u64), b: (f64, u64)) -> f64 {
    let (na, nb) = (a.1 as f64, b.1 as f64);
    (a.0 * na + b.0 * nb) / (na + nb).max(1.0)
}

/// The standard error of the difference of two MIs' loss rates, were both drawn from one
/// binomial rate (their pooled one): what chance alone makes of it. Random loss on a path moves
/// a 40-packet MI's loss rate by whole packets, 2.5% at a time; the PCC controllers use this to
/// tell such noise from a rate that really loses more (`allegro.rs`, `vivace.rs`).
pub fn loss_difference_stderr(a: (f64, u64), b: (f64, u64)) -> f64 {
    let pooled = pooled_loss_rate(a, b);
    (pooled * (1.0 - pooled) * (1.0 / (a.1 as f64).max(1.0) + 1.0 / (b.1 as f64).max(1.0))).sqrt()
}

impl<R> Interval<R> {
    fn holds(&self, seq: u64) -> bool {
        self.sent_packets > 0 && seq >= self.first_seq && seq < self.first_seq + self.sent_packets
    }

    /// Packets acknowledged or declared lost.
    pub fn resolved_packets(&self) -> u64 {
        self.acked_packets + self.lost_packets
    }

    /// Closed, and every packet sent in it acknowledged or lost.
    pub fn is_complete(&self) -> bool {
        !self.open && self.resolved_packets() == self.sent_packets
    }

    /// Fraction of its resolved packets that were lost or marked CE; 0 when none resolved.
    pub fn loss_rate(&self) -> f64 {
        match self.resolved_packets() {
            0 => 0.0,
            n => ((self.lost_packets + self.marked_packets) as f64 / n as f64).min(1.0),
        }
    }

    pub fn rate_mbps(&self) -> f64 {
        self.rate_bps / 1e6
    }

    /// How fast its packets were delivered relative to how fast they left: the time their
    /// sends spanned over the time their acknowledgements spanned, at most 1. Below 1 when a
    /// queue grew during the MI (the bottleneck spread the packets out); 1 with fewer than two
    /// acknowledgements.
    pub fn delivery_ratio(&self) -> f64 {
        let send_span_us = self.last_acked_sent_us - self.first_acked_sent_us;
        let ack_span_us = self.last_ack_us - self.first_ack_us;
        if self.acked_packets < 2 || ack_span_us == 0 {
            return 1.0;
        }
        (send_span_us as f64 / ack_span_us as f64).min(1.0)
    }

    /// Mean RTT of its acknowledged packets in µs, `None` without any.
    pub fn mean_rtt_us(&self) -> Option<f64> {
        (self.rtt_samples > 0).then(|| self.sum_rtt_s / self.rtt_samples as f64 * 1e6)
    }

    /// dRTT/dT: the least-squares slope of RTT against send time over its acknowledged packets,
    /// in seconds of RTT per second (dimensionless); 0 with fewer than two distinct send times.
    pub fn rtt_gradient(&self) -> f64 {
        let n = self.rtt_samples as f64;
        let spread = n * self.sum_tt_s2 - self.sum_t_s * self.sum_t_s;
        if self.rtt_samples < 2 || spread <= 1e-18 {
            return 0.0;
        }
        (n * self.sum_t_rtt_s2 - self.sum_t_s * self.sum_rtt_s) / spread
    }

    /// How far its RTT samples scatter around the fitted line: the residuals' standard deviation
    /// over the mean RTT, dimensionless like `rtt_gradient` (a slope below it moves the RTT over
    /// one RTT by less than the samples scatter); infinite with fewer than three samples.
    pub fn rtt_scatter(&self) -> f64 {
        let n = self.rtt_samples as f64;
        let s_tt = self.sum_tt_s2 - self.sum_t_s * self.sum_t_s / n;
        let s_yy = self.sum_rtt_rtt_s2 - self.sum_rtt_s * self.sum_rtt_s / n;
        if self.rtt_samples < 3 || s_tt <= 1e-18 {
            return f64::INFINITY;
        }
        let slope = self.rtt_gradient();
        let residual_variance = ((s_yy - slope * slope * s_tt) / n).max(0.0);
        residual_variance.sqrt() / (self.sum_rtt_s / n)
    }
}

/// The MIs of one flow that are open or awaiting results, oldest first.
#[derive(Debug, Clone)]
pub struct Monitor<R> {
    ring: [Interval<R>; MAX_PENDING_INTERVALS],
    /// Slot of the oldest pending MI.
    head: usize,
    len: usize,
    next_id: u64,
    mss_bytes: u64,
    /// The fewest packets an MI lasts (`MIN_PACKETS_PER_INTERVAL` unless a controller sets it).
    min_packets: f64,
    pub rng: SplitMix64,
}

impl<R: Copy + Default> Monitor<R> {
    pub fn new(mss_bytes: u64, seed: u64) -> Self {
        Monitor {
            ring: [Interval::default(); MAX_PENDING_INTERVALS],
            head: 0,
            len: 0,
            next_id: 0,
            mss_bytes,
            min_packets: MIN_PACKETS_PER_INTERVAL,
            rng: SplitMix64::new(seed),
        }
    }

    /// The monitor with MIs of at least `packets` packets instead of `MIN_PACKETS_PER_INTERVAL`.
    pub fn with_min_packets(mut self, packets: f64) -> Self {
        self.min_packets = packets;
        self
    }

    /// The id the next `start` will give.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    fn slot(&self, i: usize) -> usize {
        (self.head + i) % MAX_PENDING_INTERVALS
    }

    /// The MI packets are counted in now, if any.
    pub fn current(&self) -> Option<&Interval<R>> {
        let newest = &self.ring[self.slot(self.len.checked_sub(1)?)];
        newest.open.then_some(newest)
    }

    /// The length of an MI at `rate_bps` given an RTT (`None` before the first sample): uniform
    /// over `(min, max)` RTTs, and at least the least MI's packets' worth (40 by default).
    pub fn draw_length_us(&mut self, rate_bps: f64, rtt_us: Option<u64>, (min, max): (f64, f64)) -> u64 {
        let rtt_us = rtt_us.unwrap_or(INITIAL_RTT_US) as f64;
        let rtts = min + (max - min) * self.rng.unit();
        let packets_us = self.min_packets * (self.mss_bytes * 8) as f64 * 1e6 / rate_bps.max(1.0);
        (rtts * rtt_us).max(packets_us).ceil() as u64
    }

    /// Closes the open MI (if any) at `now_us` and opens a new one of `length_us` at `rate_bps`.
    /// Returns its id. If the ring is full, the oldest pending MI is dropped unreported; the
    /// controller asks `pop_complete` after every event, so this only happens on a stalled path.
    pub fn start(&mut self, now_us: u64, length_us: u64, rate_bps: f64, role: R) -> u64 {
        if let Some(i) = self.len.checked_sub(1) {
            let slot = self.slot(i);
            let newest = &mut self.ring[slot];
            if newest.open {
                newest.open = false;
                newest.end_us = now_us;
            }
        }
        if self.len == MAX_PENDING_INTERVALS {
            self.head = self.slot(1);
            self.len -= 1;
        }
        let id = self.next_id;
        self.next_id += 1;
        let slot = self.slot(self.len);
        self.ring[slot] = Interval {
            id,
            role,
            rate_bps,
            start_us: now_us,
            end_us: now_us + length_us,
            open: true,
            ..Interval::default()
        };
        self.len += 1;
        id
    }

    pub fn on_sent(&mut self, e: &Sent) {
        let Some(i) = self.len.checked_sub(1) else { return };
        let slot = self.slot(i);
        let mi = &mut self.ring[slot];
        if !mi.open {
            return;
        }
        if mi.sent_packets == 0 {
            mi.first_seq = e.seq;
        }
        mi.sent_packets += 1;
        mi.sent_bytes += e.bytes;
    }

    fn find(&mut self, seq: u64) -> Option<&mut Interval<R>> {
        let i = (0..self.len).rev().find(|&i| self.ring[self.slot(i)].holds(seq))?;
        let slot = self.slot(i);
        Some(&mut self.ring[slot])
    }

    pub fn on_ack(&mut self, e: &Acked) {
        let Some(mi) = self.find(e.seq) else { return };
        if mi.acked_packets == 0 {
            (mi.first_acked_sent_us, mi.last_acked_sent_us) = (e.sent_us, e.sent_us);
            (mi.first_ack_us, mi.last_ack_us) = (e.now_us, e.now_us);
        }
        mi.first_acked_sent_us = mi.first_acked_sent_us.min(e.sent_us);
        mi.last_acked_sent_us = mi.last_acked_sent_us.max(e.sent_us);
        mi.first_ack_us = mi.first_ack_us.min(e.now_us);
        mi.last_ack_us = mi.last_ack_us.max(e.now_us);
        mi.acked_packets += 1;
        mi.acked_bytes += e.bytes;
        mi.marked_packets += e.ce_marks;
        let t_s = e.sent_us.saturating_sub(mi.start_us) as f64 / 1e6;
        let rtt_s = e.rtt_us as f64 / 1e6;
        mi.rtt_samples += 1;
        mi.sum_t_s += t_s;
        mi.sum_rtt_s += rtt_s;
        mi.sum_tt_s2 += t_s * t_s;
        mi.sum_t_rtt_s2 += t_s * rtt_s;
        mi.sum_rtt_rtt_s2 += rtt_s * rtt_s;
    }

    pub fn on_loss(&mut self, e: &Lost) {
        let Some(mi) = self.find(e.seq) else { return };
        mi.lost_packets += 1;
        mi.lost_bytes += e.bytes;
    }

    /// The oldest pending MI, removed, if its results are complete. MIs complete in order
    /// because the driver resolves packets roughly in order and results are reported oldest
    /// first: call this until it returns `None`.
    pub fn pop_complete(&mut self) -> Option<Interval<R>> {
        if self.len == 0 || !self.ring[self.head].is_complete() {
            return None;
        }
        let mi = self.ring[self.head];
        self.head = self.slot(1);
        self.len -= 1;
        Some(mi)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::testing::ack;
    use crate::{CongestionControl, SentPackets};

    /// Test-only: a path with a fixed RTT whose loss rate is a function of the rate a packet was
    /// paced at — `max(0, 1 − capacity/rate)` models a full DropTail bottleneck without its
    /// queue — so a PCC sender's utilities can be computed by hand. 1500-byte packets; the lost
    /// fraction is applied exactly (an accumulator, not a coin), packets are lost by never being
    /// acknowledged, and the real `SentPackets` declares them lost. `observe` sees the controller
    /// after every event until it returns false or `until_us` passes.
    pub(crate) fn run_scripted<C: CongestionControl>(
        cc: &mut C,
        rtt_us: u64,
        until_us: u64,
        loss_of_rate_mbps: impl Fn(f64) -> f64,
        mut observe: impl FnMut(u64, &C) -> bool,
    ) {
        let mut sender = SentPackets::new();
        let mut acks: VecDeque<(u64, u64)> = VecDeque::new();
        let (mut now_us, mut next_send_us, mut lost_share) = (0u64, 0u64, 0.0f64);
        loop {
            loop {
                let d = cc.decision();
                let window_open = d.cwnd_bytes.is_none_or(|cwnd_bytes| sender.inflight_bytes() + 1500 <= cwnd_bytes);
                if !window_open || now_us < next_send_us {
                    break;
                }
                let sent = sender.on_sent(now_us, 1500);
                cc.on_sent(&sent);
                let rate_bps = d.pacing_rate_bps.expect("PCC paces");
                next_send_us = now_us + 1500 * 8 * 1_000_000 / rate_bps.max(1);
                lost_share += loss_of_rate_mbps(rate_bps as f64 / 1e6);
                if lost_share >= 1.0 {
                    lost_share -= 1.0;
                } else {
                    acks.push_back((now_us + rtt_us, sent.seq));
                }
            }
            let d = cc.decision();
            let window_open = d.cwnd_bytes.is_none_or(|cwnd_bytes| sender.inflight_bytes() + 1500 <= cwnd_bytes);
            let candidates = [
                acks.front().map(|a| a.0),
                (window_open && next_send_us > now_us).then_some(next_send_us),
                sender.loss_deadline_us(),
                d.wake_at_us,
            ];
            now_us = candidates.into_iter().flatten().min().expect("PCC always has a timer").max(now_us);
            if now_us > until_us {
                return;
            }
            while acks.front().is_some_and(|a| a.0 <= now_us) {
                let (_, seq) = acks.pop_front().expect("checked");
                if let Some(a) = sender.on_ack(now_us, seq, now_us - rtt_us / 2) {
                    cc.on_ack(&a);
                }
            }
            sender.detect_losses(now_us, &mut |l| cc.on_loss(l));
            if cc.decision().wake_at_us.is_some_and(|w| w <= now_us) {
                cc.on_timer(now_us);
            }
            if !observe(now_us, cc) {
                return;
            }
        }
    }

    fn sent(seq: u64, now_us: u64) -> Sent {
        Sent { now_us, seq, bytes: 1500, inflight_bytes: 0 }
    }

    fn lost(seq: u64, now_us: u64) -> Lost {
        Lost { now_us, seq, bytes: 1500, sent_us: 0, inflight_bytes: 0 }
    }

    #[test]
    fn packets_are_counted_in_the_interval_they_were_sent_in() {
        let mut m: Monitor<u8> = Monitor::new(1500, 1);
        m.start(0, 10_000, 12e6, 7);
        for seq in 0..4 {
            m.on_sent(&sent(seq, seq * 1000));
        }
        m.start(10_000, 10_000, 6e6, 8);
        for seq in 4..6 {
            m.on_sent(&sent(seq, 10_000 + seq * 1000));
        }
        // The first MI is closed but packet 3 is unresolved: not complete yet.
        m.on_ack(&ack(40_000, 0, 0, 1500));
        m.on_ack(&ack(41_000, 1, 1000, 1500));
        m.on_loss(&lost(2, 42_000));
        m.on_ack(&ack(50_000, 4, 14_000, 1500));
        assert!(m.pop_complete().is_none());
        m.on_ack(&ack(43_000, 3, 3000, 1500));
        let first = m.pop_complete().unwrap();
        assert_eq!((first.id, first.role, first.end_us), (0, 7, 10_000));
        assert_eq!((first.sent_packets, first.acked_packets, first.lost_packets), (4, 3, 1));
        assert_eq!(first.loss_rate(), 0.25);
        // Packets 0, 1, 3 left over 3 ms and were acknowledged over 3 ms: delivered as sent.
        assert_eq!(first.delivery_ratio(), 1.0);
        // The second is still open: never complete while packets may join it.
        assert!(m.pop_complete().is_none());
        assert_eq!(m.current().map(|mi| (mi.id, mi.acked_packets)), Some((1, 1)));
    }

    #[test]
    fn a_mark_counts_as_a_loss_in_the_loss_rate_but_its_packet_as_acknowledged() {
        let mut m: Monitor<u8> = Monitor::new(1500, 1);
        m.start(0, 10_000, 12e6, 0);
        for seq in 0..4 {
            m.on_sent(&sent(seq, seq * 1000));
        }
        m.start(10_000, 10_000, 12e6, 0);
        for seq in 0..4 {
            let marked = Acked { ce_marks: u64::from(seq == 1), ..ack(40_000 + seq, seq, seq * 1000, 1500) };
            m.on_ack(&marked);
        }
        // Four acknowledged (so the MI is complete), one of them marked: a loss rate of 1/4.
        let mi = m.pop_complete().unwrap();
        assert_eq!((mi.acked_packets, mi.lost_packets, mi.marked_packets), (4, 0, 1));
        assert_eq!(mi.loss_rate(), 0.25);
    }

    #[test]
    fn rtt_gradient_is_the_least_squares_slope() {
        let mut m: Monitor<u8> = Monitor::new(1500, 1);
        m.start(0, 100_000, 12e6, 0);
        // RTT = 40 ms + 0.1 · send time (a queue growing at a tenth of the link rate), plus 1 ms
        // on every other sample.
        for i in 0..10u64 {
            let sent_us = i * 10_000;
            m.on_sent(&sent(i, sent_us));
            let noise_us = if i % 2 == 0 { 1000 } else { 0 };
            let rtt_us = 40_000 + sent_us / 10 + noise_us;
            m.on_ack(&ack(sent_us + rtt_us, i, sent_us, 1500));
        }
        let mi = m.current().unwrap();
        // The noise e tilts the fit by Σ(t−t̄)(e−ē)/Σ(t−t̄)²: with t = 0, 0.01, …, 0.09 s and
        // e − ē = ±0.5 ms that is −2.5·10⁻⁵/8.25·10⁻³ = −1/330, so the slope is 0.1 − 1/330.
        assert!((mi.rtt_gradient() - (0.1 - 1.0 / 330.0)).abs() < 1e-9, "{}", mi.rtt_gradient());
        assert!((mi.mean_rtt_us().unwrap() - (40_000.0 + 4_500.0 + 500.0)).abs() < 1e-6);
        // Residual sum of squares: 10·(0.5 ms)² less what the tilt explains, (1/330)²·8.25·10⁻³ s²;
        // its root mean over the 45 ms mean RTT is the scatter, 0.0109.
        let residual_s2 = 10.0 * 0.0005f64.powi(2) - (1.0f64 / 330.0).powi(2) * 8.25e-3;
        let scatter = mi.rtt_scatter();
        assert!((scatter - (residual_s2 / 10.0).sqrt() / 0.045).abs() < 1e-9, "{scatter}");
        assert!((scatter - 0.0109).abs() < 1e-4, "{scatter}");
    }

    #[test]
    fn delivery_ratio_shows_a_queue_spreading_the_packets_out() {
        let mut m: Monitor<u8> = Monitor::new(1500, 1);
        m.start(0, 100_000, 24e6, 0);
        // Sent every 0.5 ms, delivered every 1 ms by a bottleneck half as fast.
        for seq in 0..10 {
            m.on_sent(&sent(seq, seq * 500));
            m.on_ack(&ack(40_000 + seq * 1000, seq, seq * 500, 1500));
        }
        assert_eq!(m.current().unwrap().delivery_ratio(), 0.5);
    }

    #[test]
    fn interval_length_is_1_7_to_2_2_rtts_and_at_least_forty_packets() {
        let mut m: Monitor<u8> = Monitor::new(1500, 3);
        for _ in 0..1000 {
            let us = m.draw_length_us(48e6, Some(40_000), (INTERVAL_MIN_RTTS, INTERVAL_MAX_RTTS));
            assert!((68_000..=88_000).contains(&us), "{us}");
        }
        // 12 Mbit/s: a 1500-byte packet every ms, so forty packets take 40 ms > 2.2 · 40 ms.
        assert_eq!(m.draw_length_us(1.2e7, Some(20_000), (INTERVAL_MIN_RTTS, INTERVAL_MAX_RTTS)), 40_000);
        assert_eq!(m.draw_length_us(1.2e6, Some(40_000), (INTERVAL_MIN_RTTS, INTERVAL_MAX_RTTS)), 400_000);
    }

    #[test]
    fn a_full_ring_drops_the_oldest_interval() {
        let mut m: Monitor<u8> = Monitor::new(1500, 1);
        for i in 0..MAX_PENDING_INTERVALS as u64 {
            m.start(i * 1000, 1000, 1e6, 0);
            m.on_sent(&sent(i, i * 1000));
        }
        m.start(100_000, 1000, 1e6, 0);
        // The 17th MI pushed MI 0 out; MI 1 (packet 1) completes when packet 1 is acknowledged.
        m.on_ack(&ack(200_000, 1, 1000, 1500));
        assert_eq!(m.pop_complete().map(|mi| mi.id), Some(1));
    }
}
