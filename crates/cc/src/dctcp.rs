//! DCTCP, Data Center TCP (Alizadeh et al., SIGCOMM 2010; RFC 8257).
//!
//! The idea: a queue that marks CE as soon as it holds more than a small threshold says not only
//! *that* the path is congested but, through the fraction of packets it marks, *how much*. The
//! sender keeps a moving average alpha of that fraction and cuts its window in proportion,
//! cwnd·(1 − alpha/2): a few marks cost a few percent, a window full of marks halves it as Reno
//! would. The window then oscillates in small steps around the pipe size and the queue stays near
//! the marking threshold instead of filling the buffer.
//!
//! Sections implemented (RFC 8257):
//! - §3.3 the sender's estimate: per acknowledgement, DCTCP.BytesAcked grows by the bytes it
//!   acknowledges and DCTCP.BytesMarked by the bytes of the marks it reports; when it acknowledges
//!   a packet at or beyond DCTCP.WindowEnd (the next packet to send when the observation window
//!   began, so about one RTT of data), alpha ← (1 − g)·alpha + g·BytesMarked/BytesAcked, the
//!   counters restart and WindowEnd moves to the next packet to send. WindowEnd starts at the
//!   first packet, so the first window is that packet alone (as the RFC's variables and Linux's
//!   `dctcp_reset` start).
//! - §3.3 the response: when an acknowledgement reports a mark, cwnd ← cwnd·(1 − alpha/2) and
//!   ssthresh ← cwnd, "not more than once for every window of data" (RFC 3168's rule, as in Reno's
//!   recovery here: marks of packets sent before the last reduction belong to it, and
//!   acknowledgements of those packets do not grow the window). Alpha is updated first, then the
//!   cut is taken, as Linux orders them (tcp_ack's `tcp_in_ack_event`, then the CWR entry).
//! - §3.4 growth: as Reno (reno.rs): slow start by byte counting, then one MSS per window.
//! - §3.5 loss: as Reno, ssthresh = cwnd = max(cwnd/2, 2·MSS) once per event, a cut for marks
//!   in the same window notwithstanding (as TCP's loss recovery overrides its CWR). This is also the
//!   safe fallback RFC 9331 §4.3 asks of a scalable controller: behind a queue that only drops,
//!   DCTCP is Reno.
//!
//! Constants: g = 1/16 (RFC 8257 §4.2's recommendation, Linux's `dctcp_shift_g` = 4; spec `g`);
//! alpha starts at 1, the conservative choice (Linux's `dctcp_alpha_on_init`), so a mark before
//! the first estimate halves the window; minimum window 2 MSS (Linux's `dctcp_ssthresh`); initial
//! window 10 packets (RFC 6928).
//!
//! ECN: DCTCP is a scalable controller, so the flow marks its datagrams ECN-capable always and
//! tells it of every mark. The codepoint is ECT(0), as RFC 8257 and Linux's `dctcp` send it;
//! `ect1=true` sends ECT(1) instead, so that an L4S queue (DualPI2, RFC 9332) classifies the
//! flow as L4S, which is how DCTCP is run in L4S experiments.
//!
//! Deviations: (1) feedback is the receiver's exact count of marks per acknowledgement, which is
//! what §3.2's ECE state machine reconstructs for a sender behind delayed ACKs, with nothing
//! lost; (2) as in reno.rs, there is no fast retransmit, a timeout is an ordinary loss, and the
//! reduction is taken from cwnd rather than FlightSize.
//!
//! Driver: window only (no pacing rate, no timer).

use crate::params::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Ecn, Lost, Sent, DEFAULT_INITIAL_CWND_PACKETS, DEFAULT_MSS_BYTES};

/// RFC 8257 §4.2: the recommended EWMA gain, 1/16.
pub const G: f64 = 1.0 / 16.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DctcpConfig {
    pub mss_bytes: u64,
    pub initial_cwnd_packets: u64,
    /// The EWMA gain of alpha, in (0, 1].
    pub g: f64,
    /// Send ECT(1) (L4S) rather than ECT(0).
    pub ect1: bool,
}

impl Default for DctcpConfig {
    fn default() -> Self {
        DctcpConfig {
            mss_bytes: DEFAULT_MSS_BYTES,
            initial_cwnd_packets: DEFAULT_INITIAL_CWND_PACKETS,
            g: G,
            ect1: false,
        }
    }
}

impl DctcpConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = DctcpConfig::default();
        let g = p.positive_f64("g", d.g)?;
        if g > 1.0 {
            return Err(p.error(format!("g must be <= 1, got {g}")));
        }
        Ok(DctcpConfig {
            mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?,
            initial_cwnd_packets: p.u64_at_least("initial_cwnd_packets", 2, d.initial_cwnd_packets)?,
            g,
            ect1: p.bool("ect1", d.ect1)?,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Dctcp {
    config: DctcpConfig,
    /// Congestion window in bytes.
    cwnd_bytes: u64,
    /// Slow-start threshold in bytes; unbounded until the first reduction.
    ssthresh_bytes: u64,
    /// Bytes acknowledged in congestion avoidance since the window last grew (RFC 3465).
    ca_bytes_acked: u64,
    /// The estimated fraction of bytes marked, in [0, 1] (DCTCP.Alpha).
    alpha: f64,
    /// Bytes acknowledged in the current observation window (DCTCP.BytesAcked).
    window_acked_bytes: u64,
    /// Bytes of those whose marks were reported (DCTCP.BytesMarked).
    window_marked_bytes: u64,
    /// The observation window ends when a packet numbered this or later is acknowledged
    /// (DCTCP.WindowEnd, in packets).
    window_end_seq: u64,
    /// The next packet number to be sent (SND.NXT).
    next_seq: u64,
    /// Time of the last reduction (mark or loss): marks of packets sent up to then belong to it,
    /// and their acknowledgements do not grow the window.
    reduced_at_us: Option<u64>,
    /// Time of the last reduction for a loss: losses of packets sent up to then belong to it (a
    /// loss after a cut for marks still halves, as TCP's recovery follows its CWR).
    loss_reduced_at_us: Option<u64>,
}

impl Dctcp {
    pub fn new(config: DctcpConfig) -> Self {
        Dctcp {
            config,
            cwnd_bytes: config.initial_cwnd_packets * config.mss_bytes,
            ssthresh_bytes: u64::MAX,
            ca_bytes_acked: 0,
            alpha: 1.0,
            window_acked_bytes: 0,
            window_marked_bytes: 0,
            window_end_seq: 0,
            next_seq: 0,
            reduced_at_us: None,
            loss_reduced_at_us: None,
        }
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    pub fn cwnd_bytes(&self) -> u64 {
        self.cwnd_bytes
    }

    pub fn ssthresh_bytes(&self) -> u64 {
        self.ssthresh_bytes
    }

    fn reduced_since(&self, sent_us: u64) -> bool {
        self.reduced_at_us.is_some_and(|at_us| sent_us <= at_us)
    }

    fn reduce_to(&mut self, now_us: u64, cwnd_bytes: u64) {
        self.cwnd_bytes = cwnd_bytes.max(2 * self.config.mss_bytes);
        self.ssthresh_bytes = self.cwnd_bytes;
        self.ca_bytes_acked = 0;
        self.reduced_at_us = Some(now_us);
    }
}

impl CongestionControl for Dctcp {
    fn name(&self) -> &'static str {
        "dctcp"
    }

    fn on_sent(&mut self, e: &Sent) {
        self.next_seq = e.seq + 1;
    }

    fn on_ack(&mut self, e: &Acked) {
        self.window_acked_bytes += e.bytes;
        self.window_marked_bytes += e.ce_marks * e.bytes;
        if e.seq >= self.window_end_seq {
            let fraction = self.window_marked_bytes as f64 / self.window_acked_bytes as f64;
            self.alpha = ((1.0 - self.config.g) * self.alpha + self.config.g * fraction).min(1.0);
            self.window_acked_bytes = 0;
            self.window_marked_bytes = 0;
            self.window_end_seq = self.next_seq;
        }
        if e.ce_marks > 0 && !self.reduced_since(e.sent_us) {
            let cut = (self.cwnd_bytes as f64 * (1.0 - self.alpha / 2.0)) as u64;
            self.reduce_to(e.now_us, cut);
        }
        if self.reduced_since(e.sent_us) {
            return;
        }
        if self.cwnd_bytes < self.ssthresh_bytes {
            self.cwnd_bytes += e.bytes.min(self.config.mss_bytes);
            return;
        }
        self.ca_bytes_acked += e.bytes;
        if self.ca_bytes_acked >= self.cwnd_bytes {
            self.ca_bytes_acked -= self.cwnd_bytes;
            self.cwnd_bytes += self.config.mss_bytes;
        }
    }

    fn on_loss(&mut self, e: &Lost) {
        if self.loss_reduced_at_us.is_some_and(|at_us| e.sent_us <= at_us) {
            return;
        }
        self.loss_reduced_at_us = Some(e.now_us);
        self.reduce_to(e.now_us, self.cwnd_bytes / 2);
    }

    /// Every mark reaches `on_ack` as `Acked::ce_marks`, which takes it in RFC 8257's order.
    fn on_congestion_mark(&mut self, _e: &Acked) {}

    fn scalable_ecn(&self) -> Option<Ecn> {
        Some(if self.config.ect1 { Ecn::Ect1 } else { Ecn::Ect0 })
    }

    fn decision(&self) -> Decision {
        Decision { cwnd_bytes: Some(self.cwnd_bytes), pacing_rate_bps: None, wake_at_us: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reno::{Reno, RenoConfig};
    use crate::testing::{ack, loss};

    fn sent(d: &mut Dctcp, seqs: std::ops::Range<u64>) {
        for seq in seqs {
            d.on_sent(&Sent { now_us: 0, seq, bytes: 1500, inflight_bytes: 0 });
        }
    }

    /// Acknowledges `seqs` at `now_us` (sent at `sent_us`), those in `marked` reporting a mark.
    fn acked(d: &mut Dctcp, seqs: std::ops::Range<u64>, marked: std::ops::Range<u64>, now_us: u64, sent_us: u64) {
        for seq in seqs {
            d.on_ack(&Acked { ce_marks: u64::from(marked.contains(&seq)), ..ack(now_us, seq, sent_us, 1500) });
        }
    }

    #[test]
    fn alpha_is_the_moving_average_of_each_windows_marked_fraction() {
        // g = 1/16; every figure below is a dyadic fraction, so exact in f64.
        let mut d = Dctcp::new(DctcpConfig::default());
        assert_eq!(d.alpha(), 1.0);
        sent(&mut d, 0..10);
        // WindowEnd starts at packet 0: the first window is packet 0 alone, unmarked.
        // alpha = 15/16·1 + 1/16·0 = 0.9375; WindowEnd = 10.
        acked(&mut d, 0..1, 0..0, 100_000, 0);
        assert_eq!(d.alpha(), 0.9375);
        // Packets 1..=10, 5 of them marked (F = 0.5): 15/16·0.9375 + 0.5/16 = 0.91015625.
        sent(&mut d, 10..20);
        acked(&mut d, 1..11, 6..11, 200_000, 100_000);
        assert_eq!(d.alpha(), 0.91015625);
        // Packets 11..=20, none marked: 15/16·0.91015625 = 0.853271484375.
        sent(&mut d, 20..30);
        acked(&mut d, 11..21, 0..0, 300_000, 200_000);
        assert_eq!(d.alpha(), 0.853271484375);
        // Packets 21..=30, all marked: 15/16·0.853271484375 + 1/16 = 0.8624420166015625.
        sent(&mut d, 30..40);
        acked(&mut d, 21..31, 21..31, 400_000, 300_000);
        assert_eq!(d.alpha(), 0.8624420166015625);
    }

    #[test]
    fn a_mark_cuts_the_window_by_alpha_over_two_once_per_window() {
        let mut d = Dctcp::new(DctcpConfig { initial_cwnd_packets: 40, ..DctcpConfig::default() });
        sent(&mut d, 0..40);
        // Packet 0 marked: its window (itself) is all marked, alpha stays 1, and the window
        // halves: 60 000 → 30 000 bytes, ssthresh with it.
        acked(&mut d, 0..1, 0..1, 100_000, 0);
        assert_eq!((d.alpha(), d.cwnd_bytes(), d.ssthresh_bytes()), (1.0, 30_000, 30_000));
        // The rest of that flight, 10 of them marked: no second cut and no growth.
        acked(&mut d, 1..40, 1..11, 100_500, 0);
        assert_eq!(d.cwnd_bytes(), 30_000);
        // The next flight (20 packets): packet 40 closes the window of packets 1..=40, 10 of
        // 40 marked: alpha = 15/16·1 + 1/16·0.25 = 0.953125. A mark on packet 41, sent after
        // the cut, cuts again: 30 000·(1 − 0.953125/2) = 15 703.125 → 15 703 bytes.
        sent(&mut d, 40..60);
        acked(&mut d, 40..42, 41..42, 200_000, 100_500);
        assert_eq!(d.alpha(), 0.953125);
        assert_eq!((d.cwnd_bytes(), d.ssthresh_bytes()), (15_703, 15_703));
    }

    #[test]
    fn without_marks_it_is_reno() {
        // RFC 8257 §3.5 and RFC 9331 §4.3's fallback: behind a queue that only drops, the same
        // acknowledgements and losses give DCTCP exactly Reno's window.
        let mut d = Dctcp::new(DctcpConfig::default());
        let mut r = Reno::new(RenoConfig::default());
        let mut check = |now_us: u64, seq: u64, sent_us: u64, lost: bool| {
            if lost {
                d.on_loss(&loss(now_us, seq, sent_us));
                r.on_loss(&loss(now_us, seq, sent_us));
            } else {
                d.on_ack(&ack(now_us, seq, sent_us, 1500));
                r.on_ack(&ack(now_us, seq, sent_us, 1500));
            }
            assert_eq!(d.decision(), r.decision(), "after seq {seq} at {now_us} µs");
        };
        for seq in 0..30 {
            check(100_000, seq, 0, false);
        }
        check(200_000, 30, 100_000, true); // 40 → 20 packets
        check(200_100, 31, 100_001, true); // the same event
        for seq in 100..150 {
            check(300_000, seq, 250_000, false);
        }
        // 20 packets + 1 after 20 acknowledgements + 1 after 21 more = 22; halved: 11.
        check(400_000, 200, 350_000, true);
        assert_eq!(d.cwnd_bytes(), 11 * 1500);
    }

    #[test]
    fn the_codepoint_is_ect0_unless_ect1_is_asked_for() {
        assert_eq!(Dctcp::new(DctcpConfig::default()).scalable_ecn(), Some(Ecn::Ect0));
        assert_eq!(Dctcp::new(DctcpConfig { ect1: true, ..DctcpConfig::default() }).scalable_ecn(), Some(Ecn::Ect1));
    }
}
