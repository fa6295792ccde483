//! TCP Prague (draft-briscoe-iccrg-prague-congestion-control-04, De Schepper, Tilmans, Briscoe &
//! Goel, 2024; the reference is Linux's tcp_prague.c, L4STeam/linux, whose defaults the draft
//! describes).
//!
//! The idea: DCTCP's proportional response to ECN marks (dctcp.rs), made fit for the Internet by
//! the L4S requirements (RFC 9331 §4.3). The flow sends ECT(1), so an L4S queue (DualPI2, RFC
//! 9332) keeps it apart from classic traffic and marks it early and often at a shallow
//! threshold; the sender answers every round trip's marks with a small cut and a steady additive
//! increase, paces its packets so they arrive as a smooth stream, makes its growth independent
//! of its RTT, and behaves as Reno where the path only drops.
//!
//! Sections implemented (draft-04, as Linux's tcp_prague.c runs them by default):
//! - ECN: every datagram carries ECT(1) (the draft's packet identification); the receiver's
//!   exact count of CE marks is the feedback (AccECN).
//! - The moving average of ECN feedback: alpha ← (1 − g)·alpha + g·F once per round trip, F the
//!   fraction of the round's acknowledged packets that were marked; g = 1/16; alpha starts at 1
//!   and is not updated before the first mark shows an ECN queue on the path (Linux's `saw_ce`).
//! - §2.4.2 multiplicative decrease on ECN feedback: on an acknowledgement reporting a mark,
//!   cwnd ← cwnd − cwnd·alpha/2 (with alpha as it stands, before this round's update, as Linux
//!   enters CWR before its `cong_control`), ssthresh ← cwnd; then no further cut for marks of
//!   packets sent before it (TCP's CWR lasts one window).
//! - Additive increase: per acknowledged packet that was not marked, 1/cwnd in congestion
//!   avoidance (a marked one adds nothing: Linux's "unsaturated" increase, `acked -= ece_delta`),
//!   one packet in slow start; the window is fractional (Linux's `frac_cwnd`) and the driver's
//!   window is it rounded up to whole packets. The window also grows while a cut's window is
//!   outstanding (Linux grows in CWR), not while a loss's is.
//! - §2.4.4 reduced RTT-dependence: after `rtt_transition_rounds` round trips (500) out of slow
//!   start, a flow whose smoothed RTT is below the virtual RTT (`rtt_virt_ms`, 25 ms) grows by
//!   (srtt/rtt_virt)² packets per round trip instead of 1, so its rate grows by one packet per
//!   rtt_virt² whatever its RTT (Linux's default heuristic, RTT_CONTROL_RATE); alpha is then
//!   updated and the window cut at most once per rtt_virt, so short-RTT flows do not out-react
//!   long ones.
//! - Packet pacing: rate = cwnd·MSS/srtt, doubled while cwnd < ssthresh/2 (slow start), as
//!   Linux's `prague_update_pacing_rate`; no pacing before the first RTT sample.
//! - Loss: the window halves (Linux's `prague_enter_loss`), ssthresh with it, once per window of
//!   data, and does not grow until packets sent after the loss are acknowledged: the classic
//!   response RFC 9331 §4.3 requires behind a queue that drops.
//!
//! Constants (tcp_prague.c): g = 1/16 (`PRAGUE_SHIFT_G`), alpha's start 1 (`PRAGUE_MAX_ALPHA`),
//! rtt_virt 25 ms (`prague_rtt_target`), 500 rounds (`prague_rtt_transition`), minimum window 2
//! packets (`MIN_CWND`); initial window 10 packets (RFC 6928).
//!
//! Deviations: (1) no classic-ECN-AQM detection and fallback (the draft's and Linux's are off by
//! default, `prague_ecn_fallback` = 0); (2) no windows below 2 packets (the draft's fractional
//! windows are a placeholder there too); (3) no TSO burst sizing: the driver sends datagram by
//! datagram; (4) as in reno.rs, no retransmission, and a timeout is an ordinary loss; (5) the
//! RTT-dependent increase is taken from the smoothed RTT at each acknowledgement rather than once
//! per round.
//!
//! Driver: window and pacing rate; no timer.

use crate::params::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Ecn, Lost, Sent, DEFAULT_INITIAL_CWND_PACKETS, DEFAULT_MSS_BYTES};

/// The EWMA gain of alpha (tcp_prague.c `PRAGUE_SHIFT_G` = 4).
pub const G: f64 = 1.0 / 16.0;
/// The least window, packets (tcp_prague.c `MIN_CWND`).
const MIN_CWND_PACKETS: f64 = 2.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PragueConfig {
    pub mss_bytes: u64,
    pub initial_cwnd_packets: u64,
    /// The virtual RTT of §2.4.4, µs: flows with a shorter RTT grow as if they had it.
    pub rtt_virt_us: u64,
    /// Round trips out of slow start before the flow becomes RTT-independent.
    pub rtt_transition_rounds: u64,
}

impl Default for PragueConfig {
    fn default() -> Self {
        PragueConfig {
            mss_bytes: DEFAULT_MSS_BYTES,
            initial_cwnd_packets: DEFAULT_INITIAL_CWND_PACKETS,
            rtt_virt_us: 25_000,
            rtt_transition_rounds: 500,
        }
    }
}

impl PragueConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = PragueConfig::default();
        Ok(PragueConfig {
            mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?,
            initial_cwnd_packets: p.u64_at_least("initial_cwnd_packets", 2, d.initial_cwnd_packets)?,
            rtt_virt_us: (p.positive_f64("rtt_virt_ms", d.rtt_virt_us as f64 / 1000.0)? * 1000.0) as u64,
            rtt_transition_rounds: p.u64_at_least("rtt_transition_rounds", 0, d.rtt_transition_rounds)?,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Prague {
    config: PragueConfig,
    /// Congestion window in packets, fractional.
    cwnd_packets: f64,
    /// Slow-start threshold in packets; unbounded until the first reduction.
    ssthresh_packets: f64,
    /// The estimated fraction of packets marked, in [0, 1].
    alpha: f64,
    /// A mark has been seen: the path has an ECN queue, and alpha is updated from now on.
    saw_ce: bool,
    /// When alpha was last updated, µs.
    alpha_updated_us: u64,
    /// Bytes acknowledged in the current round, and the bytes of the marks they reported.
    round_acked_bytes: u64,
    round_marked_bytes: u64,
    /// The round ends when a packet numbered this or later is acknowledged.
    round_end_seq: u64,
    /// Rounds completed out of slow start.
    rounds: u64,
    /// The next packet number to be sent.
    next_seq: u64,
    /// Smoothed RTT, µs; 0 before the first sample.
    srtt_us: u64,
    /// Time of the last reduction (mark or loss): marks of packets sent up to then belong to it.
    reduced_at_us: Option<u64>,
    /// Time of the last cut for marks, µs.
    mark_cut_at_us: Option<u64>,
    /// Time of the last reduction for a loss: its losses, and no growth, for packets sent up to it.
    loss_reduced_at_us: Option<u64>,
}

impl Prague {
    pub fn new(config: PragueConfig) -> Self {
        Prague {
            config,
            cwnd_packets: config.initial_cwnd_packets as f64,
            ssthresh_packets: f64::INFINITY,
            alpha: 1.0,
            saw_ce: false,
            alpha_updated_us: 0,
            round_acked_bytes: 0,
            round_marked_bytes: 0,
            round_end_seq: 0,
            rounds: 0,
            next_seq: 0,
            srtt_us: 0,
            reduced_at_us: None,
            mark_cut_at_us: None,
            loss_reduced_at_us: None,
        }
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    pub fn cwnd_packets(&self) -> f64 {
        self.cwnd_packets
    }

    pub fn ssthresh_packets(&self) -> f64 {
        self.ssthresh_packets
    }

    fn in_slow_start(&self) -> bool {
        self.cwnd_packets < self.ssthresh_packets
    }

    /// §2.4.4: out of slow start for `rtt_transition_rounds` rounds.
    pub fn rtt_independent(&self) -> bool {
        !self.in_slow_start() && self.rounds >= self.config.rtt_transition_rounds
    }

    /// The additive increase per round trip, packets: 1, or (srtt/rtt_virt)² once RTT-independent.
    fn increase_per_round_packets(&self) -> f64 {
        if !self.rtt_independent() || self.srtt_us == 0 || self.srtt_us >= self.config.rtt_virt_us {
            return 1.0;
        }
        let ratio = self.srtt_us as f64 / self.config.rtt_virt_us as f64;
        ratio * ratio
    }

    fn may_cut_for_mark(&self, e: &Acked) -> bool {
        if self.reduced_at_us.is_some_and(|at_us| e.sent_us <= at_us) {
            return false;
        }
        !self.rtt_independent() || self.mark_cut_at_us.is_none_or(|at_us| e.now_us >= at_us + self.config.rtt_virt_us)
    }

    fn reduce_to(&mut self, now_us: u64, cwnd_packets: f64) {
        self.cwnd_packets = cwnd_packets.max(MIN_CWND_PACKETS);
        self.ssthresh_packets = self.cwnd_packets;
        self.reduced_at_us = Some(now_us);
    }

    fn end_round(&mut self, now_us: u64) {
        if self.saw_ce {
            let fraction = self.round_marked_bytes as f64 / self.round_acked_bytes.max(1) as f64;
            self.alpha = ((1.0 - G) * self.alpha + G * fraction).min(1.0);
            self.alpha_updated_us = now_us;
        }
        self.round_acked_bytes = 0;
        self.round_marked_bytes = 0;
        self.round_end_seq = self.next_seq;
        if !self.in_slow_start() {
            self.rounds += 1;
        }
    }
}

impl CongestionControl for Prague {
    fn name(&self) -> &'static str {
        "prague"
    }

    fn on_sent(&mut self, e: &Sent) {
        self.next_seq = e.seq + 1;
    }

    fn on_ack(&mut self, e: &Acked) {
        self.srtt_us = e.srtt_us;
        if e.ce_marks > 0 {
            self.saw_ce = true;
            if self.may_cut_for_mark(e) {
                self.reduce_to(e.now_us, self.cwnd_packets * (1.0 - self.alpha / 2.0));
                self.mark_cut_at_us = Some(e.now_us);
            }
        }
        let in_loss = self.loss_reduced_at_us.is_some_and(|at_us| e.sent_us <= at_us);
        if e.ce_marks == 0 && !in_loss {
            let acked_packets = e.bytes as f64 / self.config.mss_bytes as f64;
            if self.in_slow_start() {
                self.cwnd_packets = (self.cwnd_packets + acked_packets).min(self.ssthresh_packets);
            } else {
                self.cwnd_packets += self.increase_per_round_packets() * acked_packets / self.cwnd_packets;
            }
        }
        self.round_acked_bytes += e.bytes;
        self.round_marked_bytes += e.ce_marks * e.bytes;
        let round_over = e.seq >= self.round_end_seq;
        if round_over && (!self.rtt_independent() || e.now_us >= self.alpha_updated_us + self.config.rtt_virt_us) {
            self.end_round(e.now_us);
        }
    }

    fn on_loss(&mut self, e: &Lost) {
        if self.loss_reduced_at_us.is_some_and(|at_us| e.sent_us <= at_us) {
            return;
        }
        self.loss_reduced_at_us = Some(e.now_us);
        self.reduce_to(e.now_us, self.cwnd_packets / 2.0);
    }

    /// Every mark reaches `on_ack` as `Acked::ce_marks`, which takes it in Linux's order.
    fn on_congestion_mark(&mut self, _e: &Acked) {}

    fn scalable_ecn(&self) -> Option<Ecn> {
        Some(Ecn::Ect1)
    }

    fn decision(&self) -> Decision {
        let mss_bytes = self.config.mss_bytes;
        let cwnd_bytes = self.cwnd_packets.ceil() as u64 * mss_bytes;
        let pacing_rate_bps = (self.srtt_us > 0).then(|| {
            let gain = if self.cwnd_packets < self.ssthresh_packets / 2.0 { 2.0 } else { 1.0 };
            crate::rate_bps(gain * self.cwnd_packets * mss_bytes as f64, self.srtt_us as f64)
        });
        Decision { cwnd_bytes: Some(cwnd_bytes), pacing_rate_bps, wake_at_us: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ack, loss};

    fn send(p: &mut Prague, seqs: std::ops::Range<u64>) {
        for seq in seqs {
            p.on_sent(&Sent { now_us: 0, seq, bytes: 1500, inflight_bytes: 0 });
        }
    }

    fn ack_marked(now_us: u64, seq: u64, sent_us: u64, marked: bool) -> Acked {
        Acked { ce_marks: u64::from(marked), ..ack(now_us, seq, sent_us, 1500) }
    }

    fn prague(initial_cwnd_packets: u64) -> Prague {
        Prague::new(PragueConfig { initial_cwnd_packets, ..PragueConfig::default() })
    }

    #[test]
    fn marks_cut_by_alpha_over_two_and_alpha_follows_each_rounds_fraction() {
        let mut p = prague(40);
        send(&mut p, 0..40);
        // Packet 0 marked: the cut uses alpha as it stands, 1: 40 → 20 packets, out of slow
        // start. Then packet 0 closes the first round (it began at packet 0), all marked:
        // alpha = 15/16 + 1/16 = 1.
        p.on_ack(&ack_marked(50_000, 0, 0, true));
        assert_eq!((p.cwnd_packets(), p.ssthresh_packets(), p.alpha()), (20.0, 20.0, 1.0));
        // The rest of the flight, unmarked, grows the window (Linux grows in CWR): 39
        // acknowledgements of 1/cwnd each: cwnd² grows by about 2 per acknowledgement,
        // √(400 + 78) = 21.86.
        for seq in 1..40 {
            p.on_ack(&ack_marked(50_000 + seq, seq, 0, false));
        }
        assert!((p.cwnd_packets() - 21.86).abs() < 0.01, "cwnd {}", p.cwnd_packets());
        // Packet 40 closes the round of packets 1..=40, none marked: alpha = 15/16.
        send(&mut p, 40..62);
        p.on_ack(&ack_marked(100_000, 40, 50_100, false));
        assert_eq!(p.alpha(), 0.9375);
        // A mark on packet 41, sent after the cut: cwnd·(1 − 0.9375/2) = 0.53125·cwnd.
        let before = p.cwnd_packets();
        p.on_ack(&ack_marked(100_100, 41, 50_100, true));
        assert_eq!(p.cwnd_packets(), before * 0.53125);
        // More marks from that flight: no second cut (and marked acknowledgements add nothing).
        let cut = p.cwnd_packets();
        p.on_ack(&ack_marked(100_200, 42, 50_100, true));
        assert_eq!(p.cwnd_packets(), cut);
    }

    #[test]
    fn without_marks_a_loss_halves_as_reno() {
        // RFC 9331 §4.3: behind a queue that only drops, Prague halves.
        let mut p = prague(40);
        p.on_loss(&loss(100_000, 5, 0));
        assert_eq!((p.cwnd_packets(), p.ssthresh_packets()), (20.0, 20.0));
        // The same window: nothing more, and its acknowledgements do not grow the window.
        p.on_loss(&loss(100_100, 6, 0));
        p.on_ack(&ack(100_200, 7, 0, 1500));
        assert_eq!(p.cwnd_packets(), 20.0);
        // A packet sent after the reduction: one packet per window of acknowledgements.
        for seq in 0..20 {
            p.on_ack(&ack(200_000, 100 + seq, 150_000, 1500));
        }
        // √(400 + 40) = 20.98.
        assert!((p.cwnd_packets() - 20.98).abs() < 0.01, "cwnd {}", p.cwnd_packets());
        let grown = p.cwnd_packets();
        p.on_loss(&loss(300_000, 200, 250_000));
        assert_eq!(p.cwnd_packets(), grown / 2.0);
        // Never below 2 packets.
        for i in 0..10 {
            let now_us = 400_000 + i * 1000;
            p.on_loss(&loss(now_us, 300 + i, now_us - 500));
        }
        assert_eq!(p.cwnd_packets(), 2.0);
    }

    #[test]
    fn it_paces_at_cwnd_over_srtt_twice_that_in_slow_start() {
        let mut p = prague(10);
        // No RTT sample yet: the window alone.
        assert_eq!(p.decision().pacing_rate_bps, None);
        send(&mut p, 0..10);
        // One acknowledgement, 50 ms: 11 packets in slow start, 2 × 11·1500·8 bit / 50 ms.
        p.on_ack(&ack(50_000, 0, 0, 1500));
        assert_eq!(p.decision().pacing_rate_bps, Some(2 * 2_640_000));
        assert_eq!(p.decision().cwnd_bytes, Some(11 * 1500));
        // A mark halves it (alpha 1) to 5.5 packets, out of slow start: 5.5·1500·8 bit / 50 ms,
        // and a window of 6 whole packets.
        p.on_ack(&ack_marked(50_000, 1, 0, true));
        assert_eq!(p.decision().pacing_rate_bps, Some(1_320_000));
        assert_eq!(p.decision().cwnd_bytes, Some(6 * 1500));
    }

    #[test]
    fn once_rtt_independent_a_short_rtt_flow_grows_by_srtt_over_rtt_virt_squared() {
        // 5 ms RTT against rtt_virt 25 ms: (5/25)² = 0.04 packets per round trip, where a flow
        // that is not yet RTT-independent grows one.
        let grow = |rtt_transition_rounds: u64| {
            let mut p = Prague::new(PragueConfig { rtt_transition_rounds, ..PragueConfig::default() });
            p.on_loss(&loss(0, 0, 0)); // 10 → 5 packets, out of slow start
            let mut seq = 1;
            let mut now_us = 10_000;
            for _ in 0..100 {
                let flight = p.cwnd_packets().ceil() as u64;
                send(&mut p, seq..seq + flight);
                for s in seq..seq + flight {
                    p.on_ack(&ack(now_us, s, now_us - 5_000, 1500));
                }
                seq += flight;
                now_us += 5_000;
            }
            p
        };
        let plain = grow(1_000_000);
        assert!(!plain.rtt_independent());
        assert!(plain.cwnd_packets() > 100.0, "cwnd {}", plain.cwnd_packets());
        // 100 round trips at ≈ 0.04 packets each (a round trip is a window of acknowledgements,
        // slightly more than the window they grow): ≈ 5 + 4 packets.
        let independent = grow(0);
        assert!(independent.rtt_independent());
        assert!((independent.cwnd_packets() - 9.0).abs() < 0.3, "cwnd {}", independent.cwnd_packets());
    }

    #[test]
    fn its_codepoint_is_ect1() {
        assert_eq!(prague(10).scalable_ecn(), Some(Ecn::Ect1));
    }
}
