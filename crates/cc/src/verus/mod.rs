//! Verus (Zaki, Pötsch, Chen, Subramanian & Görg, "Adaptive Congestion Control for
//! Unpredictable Cellular Networks", SIGCOMM 2015).
//!
//! The idea: a cellular channel changes too fast to model, but over a short while the relation
//! between how much a sender keeps in flight and the delay its packets see is stable enough to
//! learn. Verus learns that relation — the delay profile — and, every short epoch, moves a target
//! delay up or down by small steps according to whether delay is rising, then sends whatever
//! window the profile says gives that delay. Loss is handled as in TCP.
//!
//! Sections implemented:
//! - §3.1 delay estimator: D_max,i, the largest RTT acknowledged in epoch i, smoothed across
//!   epochs by an EWMA (weight 0.8 on the new epoch); ΔD_max,i = D_max,i − D_max,i−1; D_min the
//!   smallest RTT of the flow. An epoch without acknowledgements takes the time since the last
//!   one as its delay (the oldest packet in flight has waited at least that long).
//! - §3.2 delay profile learner (`delay_profile.rs`): (window at send, RTT) samples, refreshed
//!   into a curve every second.
//! - §3.3 window estimator, per epoch of ε = 5 ms: the target delay moves by
//!   D_est,i+1 = D_est,i − δ2 if D_max,i / D_min > R (the delay is far above the path's own),
//!   D_est,i − δ1 if ΔD_max,i > 0 (the delay is rising), D_est,i + δ2 otherwise, never below
//!   D_min; W_i+1 = the profile's largest window with delay ≤ D_est,i+1; and the epoch sends
//!   S_i+1 = max(0, W_i+1 + ((2 − n)/(n − 1))·W_i) packets, n = ⌈RTT/ε⌉ (S = W_i+1 − W_i when
//!   n ≤ 1), with W_i the packets in flight now: a window spread over the n − 1 epochs its
//!   acknowledgements take, plus the change of window. (This is the paper's formula; it reads
//!   W_i+1 − W_i·(n−2)/(n−1).)
//! - §3.4 loss handler: a loss (one reaction per window: losses of packets sent before the last
//!   reaction are the same event) sets W = M·W_loss, W_loss the window when the lost packet was
//!   sent; until a packet sent after the reaction is acknowledged (the loss phase) the window
//!   grows by 1/W per acknowledgement as in TCP's congestion avoidance, epochs do not steer it,
//!   and delays are not added to the profile (they measure the queue being drained, not the
//!   window). The loss phase ends with D_est = the profile's delay at the window reached.
//! - §3.5 slow start: the window grows by one packet per acknowledgement (doubling per RTT)
//!   while the profile collects samples, until the first loss or a delay above 500 ms, which
//!   is handled as a loss (§3.4) and starts the epochs.
//!
//! Constants: ε = 5 ms, δ1 = 1 ms, δ2 = 2 ms, M = 0.7, profile EWMA 0.875, profile refresh 1 s,
//! slow-start exit delay 500 ms — the paper's values (§3, §4 setup) and those of the authors'
//! implementation (github.com/yzaki/verus, src/verus.hpp: EPOCH, DELTA1, DELTA2,
//! VERUS_M_DECREASE, CURVE_TIMER, SS_EXIT_THRESHOLD). R = 6: the authors' VERUS_R since their
//! commit b08f738 of 22 July 2015 ("fixed issues with fixed ethernet links and high data
//! rates"), unchanged to the repository's last commit (4b1bbf0, June 2017) and so the Verus
//! Pantheon ran; their first published code (July 2015) had R = 2. `verus:r=2` runs that
//! earlier, far more delay-conservative Verus: on a fixed link it holds the queue near one base
//! RTT, where R = 6 lets it build to about five (test `r_sets_the_delay_it_holds_on_a_fixed_link`).
//! D_max's EWMA weight 0.8 on the new epoch is from the implementation (the paper says only
//! that D_max is smoothed). Initial window 10 packets (RFC 6928; the paper starts from one).
//! Configurable: `epoch_ms`, `delta1_ms`, `delta2_ms`, `r`, `m`, `ss_exit_ms`,
//! `initial_cwnd_packets`, `mss_bytes`. Behind a deep buffer, the slow start's climb to 500 ms
//! of delay dominates the 95th-percentile delay of a short run (Verizon LTE trace, 1000-packet
//! buffer, 20 s: p95 485 ms, median 56 ms); `ss_exit_ms` lowers that exit.
//!
//! Deviations: (1) the delay profile is a monotone piecewise-linear curve, not a cubic
//! spline (justified in `delay_profile.rs`). (2) A profile sample's window is the sender's
//! packets in flight when the packet left (the paper's "outstanding window"), which the driver
//! reports exactly, rather than the target window carried in the packet. (3) The epoch's S
//! packets are released at the epoch's start (a window of in-flight + S), as the authors'
//! sender does, not paced across it. (4) The window never goes below 1 packet.
//!
//! Driver: window only, and a timer every epoch.

pub mod delay_profile;

use self::delay_profile::{DelayProfile, MAX_WINDOW_PACKETS};
use crate::params::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_INITIAL_CWND_PACKETS, DEFAULT_MSS_BYTES};

/// §3.2: the profile is rebuilt this often.
const PROFILE_REFRESH_US: u64 = 1_000_000;
/// Weight of the new epoch in D_max's EWMA (the authors' implementation).
const DMAX_NEW_WEIGHT: f64 = 0.8;
/// Sequence numbers whose send-time window is remembered (a power of two, as large as the
/// profile's largest window).
const RING_PACKETS: usize = MAX_WINDOW_PACKETS;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VerusConfig {
    pub mss_bytes: u64,
    pub initial_cwnd_packets: u64,
    /// ε, µs.
    pub epoch_us: u64,
    /// Step down of the target delay while delay rises, ms.
    pub delta1_ms: f64,
    /// Step up of the target delay, and its step down when D_max/D_min exceeds R, ms.
    pub delta2_ms: f64,
    /// Largest tolerated D_max/D_min.
    pub r: f64,
    /// Multiplicative decrease on loss.
    pub m: f64,
    /// Slow start ends when an RTT exceeds this, ms (§3.5).
    pub ss_exit_ms: f64,
}

impl Default for VerusConfig {
    fn default() -> Self {
        VerusConfig {
            mss_bytes: DEFAULT_MSS_BYTES,
            initial_cwnd_packets: DEFAULT_INITIAL_CWND_PACKETS,
            epoch_us: 5_000,
            delta1_ms: 1.0,
            delta2_ms: 2.0,
            r: 6.0,
            m: 0.7,
            ss_exit_ms: 500.0,
        }
    }
}

impl VerusConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = VerusConfig::default();
        let config = VerusConfig {
            mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?,
            initial_cwnd_packets: p.u64_at_least("initial_cwnd_packets", 1, d.initial_cwnd_packets)?,
            epoch_us: (p.positive_f64("epoch_ms", d.epoch_us as f64 / 1000.0)? * 1000.0) as u64,
            delta1_ms: p.positive_f64("delta1_ms", d.delta1_ms)?,
            delta2_ms: p.positive_f64("delta2_ms", d.delta2_ms)?,
            r: p.positive_f64("r", d.r)?,
            m: p.positive_f64("m", d.m)?,
            ss_exit_ms: p.positive_f64("ss_exit_ms", d.ss_exit_ms)?,
        };
        if config.epoch_us == 0 {
            return Err(SpecError("verus: epoch_ms must be at least 0.001".into()));
        }
        if config.r <= 1.0 {
            return Err(SpecError(format!("verus: r must be > 1 (a ratio of delays), got {}", config.r)));
        }
        if config.m >= 1.0 {
            return Err(SpecError(format!("verus: m must be < 1 (a decrease), got {}", config.m)));
        }
        Ok(config)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    SlowStart,
    /// After a loss, until a packet sent after the reaction is acknowledged.
    Loss,
    /// The delay-profile control of §3.3.
    Epochs,
}

#[derive(Debug, Clone)]
pub struct Verus {
    config: VerusConfig,
    phase: Phase,
    /// W, packets: the window in slow start and the loss phase, the epoch's target window in
    /// the epochs.
    window_packets: f64,
    /// D_est, ms.
    d_est_ms: f64,
    /// D_min, ms (0 before the first acknowledgement).
    d_min_ms: f64,
    /// Smoothed D_max of the last epoch, ms.
    d_max_ms: Option<f64>,
    /// Largest RTT acknowledged in this epoch, ms; `None`: no acknowledgement yet.
    epoch_max_ms: Option<f64>,
    last_ack_us: u64,
    srtt_us: u64,
    inflight_bytes: u64,
    /// Packets the current epoch may still send.
    credit_packets: u64,
    next_epoch_us: Option<u64>,
    next_refresh_us: u64,
    /// When the last loss reaction happened; losses of packets sent before it are ignored.
    reaction_us: Option<u64>,
    profile: DelayProfile,
    /// Packets in flight when each of the last `RING_PACKETS` sequence numbers was sent, and the
    /// sequence number the slot belongs to.
    window_at_send: Box<[u32]>,
    seq_at_slot: Box<[u64]>,
}

impl Verus {
    pub fn new(config: VerusConfig) -> Self {
        Verus {
            config,
            phase: Phase::SlowStart,
            window_packets: config.initial_cwnd_packets as f64,
            d_est_ms: 0.0,
            d_min_ms: 0.0,
            d_max_ms: None,
            epoch_max_ms: None,
            last_ack_us: 0,
            srtt_us: 0,
            inflight_bytes: 0,
            credit_packets: 0,
            next_epoch_us: None,
            next_refresh_us: 0,
            reaction_us: None,
            profile: DelayProfile::new(),
            window_at_send: vec![0; RING_PACKETS].into_boxed_slice(),
            seq_at_slot: vec![u64::MAX; RING_PACKETS].into_boxed_slice(),
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// D_est, ms.
    pub fn target_delay_ms(&self) -> f64 {
        self.d_est_ms
    }

    /// The window the last epoch chose (or the slow-start / loss-phase window), packets.
    pub fn window_packets(&self) -> f64 {
        self.window_packets
    }

    pub fn profile(&self) -> &DelayProfile {
        &self.profile
    }

    fn sent_window(&self, seq: u64) -> Option<usize> {
        let slot = (seq as usize) & (RING_PACKETS - 1);
        (self.seq_at_slot[slot] == seq).then(|| self.window_at_send[slot] as usize)
    }

    /// §3.4 (and the end of slow start): cut the window and wait out the loss phase.
    fn react_to_loss(&mut self, now_us: u64, window_at_loss: f64) {
        self.window_packets = (self.config.m * window_at_loss).max(1.0);
        self.reaction_us = Some(now_us);
        self.phase = Phase::Loss;
        self.profile.rebuild();
        self.next_refresh_us = now_us + PROFILE_REFRESH_US;
    }

    /// §3.1 and §3.3: one epoch's update of D_est, W and S.
    fn epoch(&mut self, now_us: u64) {
        let since_ack_ms = now_us.saturating_sub(self.last_ack_us) as f64 / 1000.0;
        let previous = self.d_max_ms;
        let raw_ms = self.epoch_max_ms.take().unwrap_or_else(|| previous.unwrap_or(0.0).max(since_ack_ms));
        let d_max = previous.map_or(raw_ms, |p| (1.0 - DMAX_NEW_WEIGHT) * p + DMAX_NEW_WEIGHT * raw_ms);
        self.d_max_ms = Some(d_max);
        if self.phase != Phase::Epochs {
            return;
        }
        let rising = previous.is_some_and(|p| d_max > p);
        self.d_est_ms = if d_max > self.config.r * self.d_min_ms {
            (self.d_est_ms - self.config.delta2_ms).max(self.d_min_ms)
        } else if rising {
            (self.d_est_ms - self.config.delta1_ms).max(self.d_min_ms)
        } else {
            self.d_est_ms + self.config.delta2_ms
        };
        let next_window = self.profile.window_for(self.d_est_ms) as f64;
        let in_flight = (self.inflight_bytes as f64 / self.config.mss_bytes as f64).round();
        let n = (self.srtt_us as f64 / self.config.epoch_us as f64).ceil();
        let send = if n > 1.0 { next_window + (2.0 - n) / (n - 1.0) * in_flight } else { next_window - in_flight };
        self.window_packets = next_window;
        self.credit_packets = send.max(0.0).floor() as u64;
    }
}

impl CongestionControl for Verus {
    fn name(&self) -> &'static str {
        "verus"
    }

    fn on_sent(&mut self, e: &Sent) {
        let slot = (e.seq as usize) & (RING_PACKETS - 1);
        self.seq_at_slot[slot] = e.seq;
        self.window_at_send[slot] = e.inflight_bytes.div_ceil(self.config.mss_bytes).min(u32::MAX as u64) as u32;
        self.inflight_bytes = e.inflight_bytes;
        self.credit_packets = self.credit_packets.saturating_sub(1);
        self.next_epoch_us.get_or_insert(e.now_us + self.config.epoch_us);
    }

    fn on_ack(&mut self, e: &Acked) {
        let rtt_ms = e.rtt_us as f64 / 1000.0;
        self.inflight_bytes = e.inflight_bytes;
        self.d_min_ms = e.min_rtt_us as f64 / 1000.0;
        self.srtt_us = e.srtt_us;
        self.last_ack_us = e.now_us;
        self.epoch_max_ms = Some(self.epoch_max_ms.map_or(rtt_ms, |m| m.max(rtt_ms)));
        let sent_window = self.sent_window(e.seq);
        match self.phase {
            Phase::SlowStart => {
                if let Some(w) = sent_window {
                    self.profile.record(w, rtt_ms);
                }
                self.window_packets += 1.0;
                if rtt_ms > self.config.ss_exit_ms {
                    self.react_to_loss(e.now_us, sent_window.map_or(self.window_packets, |w| w as f64));
                }
            }
            Phase::Loss => {
                self.window_packets += 1.0 / self.window_packets;
                if self.reaction_us.is_some_and(|r| e.sent_us > r) {
                    self.phase = Phase::Epochs;
                    self.d_est_ms = self.profile.delay_ms(self.window_packets as usize).max(self.d_min_ms);
                    self.credit_packets = 0;
                }
            }
            Phase::Epochs => {
                if let Some(w) = sent_window {
                    self.profile.record(w, rtt_ms);
                }
            }
        }
    }

    fn on_loss(&mut self, e: &Lost) {
        self.inflight_bytes = e.inflight_bytes;
        if self.reaction_us.is_some_and(|r| e.sent_us <= r) {
            return;
        }
        let window_at_loss = self.sent_window(e.seq).map_or(self.window_packets, |w| w as f64);
        self.react_to_loss(e.now_us, window_at_loss);
    }

    fn on_timer(&mut self, now_us: u64) {
        let Some(due_us) = self.next_epoch_us else { return };
        if now_us < due_us {
            return;
        }
        // One epoch per wake-up: a late wake-up does not replay the epochs it missed.
        self.next_epoch_us = Some(due_us.max(now_us.saturating_sub(self.config.epoch_us)) + self.config.epoch_us);
        if self.phase != Phase::SlowStart && now_us >= self.next_refresh_us {
            self.profile.rebuild();
            self.next_refresh_us = now_us + PROFILE_REFRESH_US;
        }
        self.epoch(now_us);
    }

    fn decision(&self) -> Decision {
        let mss = self.config.mss_bytes;
        let cwnd_bytes = match self.phase {
            Phase::SlowStart | Phase::Loss => (self.window_packets.floor() as u64).max(1) * mss,
            Phase::Epochs => self.inflight_bytes + self.credit_packets * mss,
        };
        Decision { cwnd_bytes: Some(cwnd_bytes), pacing_rate_bps: None, wake_at_us: self.next_epoch_us }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ack;
    use crate::testing::{FixedPath, MSS};

    /// A Verus in the epochs on a hand-made profile: flat at 40 ms up to a 10-packet pipe, then
    /// 4 ms per packet (a 250 packets/s link behind a 40 ms RTT).
    fn in_epochs(d_est_ms: f64) -> Verus {
        let mut v = Verus::new(VerusConfig::default());
        for (w, d) in [(2, 40.0), (10, 40.0), (20, 80.0)] {
            v.profile.record(w, d);
        }
        v.profile.rebuild();
        v.phase = Phase::Epochs;
        v.d_min_ms = 40.0;
        v.d_est_ms = d_est_ms;
        v.srtt_us = 40_000;
        v.next_epoch_us = Some(S + 5_000);
        v.next_refresh_us = u64::MAX;
        v
    }

    /// Where the hand-driven tests' clocks start (so that send times stay positive).
    const S: u64 = 1_000_000;

    fn acked_rtt(v: &mut Verus, now_us: u64, rtt_us: u64) {
        v.on_ack(&ack(now_us, 1_000_000 + now_us, now_us - rtt_us, MSS));
        v.d_min_ms = 40.0;
    }

    #[test]
    fn flat_delay_raises_the_target_by_delta2_and_the_window_follows_the_profile() {
        let mut v = in_epochs(50.0);
        acked_rtt(&mut v, S + 4_000, 40_000);
        v.on_timer(S + 5_000);
        acked_rtt(&mut v, S + 9_000, 40_000);
        v.on_timer(S + 10_000);
        // Two epochs without a rise: 50 → 52 → 54 ms; 54 ms on the profile is 10 + 14/4 = 13.5
        // packets, so the window is 13.
        assert_eq!(v.target_delay_ms(), 54.0);
        assert_eq!(v.window_packets(), 13.0);
    }

    #[test]
    fn rising_delay_lowers_the_target_by_delta1() {
        let mut v = in_epochs(60.0);
        acked_rtt(&mut v, S + 4_000, 50_000);
        v.on_timer(S + 5_000);
        assert_eq!(v.target_delay_ms(), 62.0, "the first epoch has nothing to compare with");
        acked_rtt(&mut v, S + 9_000, 60_000);
        v.on_timer(S + 10_000);
        // D_max 50 → 0.2·50 + 0.8·60 = 58 ms: rising, 62 − δ1 = 61 ms.
        assert_eq!(v.target_delay_ms(), 61.0);
    }

    #[test]
    fn delay_beyond_r_times_the_minimum_lowers_the_target_by_delta2() {
        let mut v = in_epochs(90.0);
        v.config.r = 2.0;
        acked_rtt(&mut v, S + 4_000, 85_000);
        v.on_timer(S + 5_000);
        // D_max 85 ms > R·D_min = 80 ms (R = 2): 90 − δ2 = 88 ms, whatever the trend.
        assert_eq!(v.target_delay_ms(), 88.0);
        acked_rtt(&mut v, S + 9_000, 81_000);
        v.on_timer(S + 10_000);
        // Falling (85 → 0.2·85 + 0.8·81 = 81.8) but still above 80: 86 ms.
        assert_eq!(v.target_delay_ms(), 86.0);
        // Never below D_min.
        let mut low = in_epochs(41.0);
        acked_rtt(&mut low, S + 4_000, 250_000);
        low.on_timer(S + 5_000);
        assert_eq!(low.target_delay_ms(), 40.0);
    }

    #[test]
    fn epoch_sends_the_papers_share_of_the_window() {
        // RTT 40 ms, ε = 5 ms: n = 8. With 12 packets in flight and a next window of 13:
        // S = 13 + (2 − 8)/(8 − 1)·12 = 13 − 10.29 = 2.71 → 2 packets.
        let mut v = in_epochs(50.0);
        v.inflight_bytes = 12 * MSS;
        v.epoch_max_ms = Some(40.0);
        v.d_max_ms = Some(40.0);
        v.last_ack_us = S + 4_000;
        v.on_timer(S + 5_000);
        assert_eq!(v.window_packets(), 13.0);
        assert_eq!(v.decision().cwnd_bytes, Some(14 * MSS));
        v.on_sent(&Sent { now_us: S + 5_000, seq: 7, bytes: MSS, inflight_bytes: 13 * MSS });
        v.on_sent(&Sent { now_us: S + 5_000, seq: 8, bytes: MSS, inflight_bytes: 14 * MSS });
        assert_eq!(v.decision().cwnd_bytes, Some(14 * MSS), "the epoch's credit is spent");
    }

    #[test]
    fn loss_cuts_the_window_by_m_once_per_event() {
        let mut v = in_epochs(60.0);
        for seq in 0..20 {
            v.on_sent(&Sent { now_us: S + 1_000, seq, bytes: MSS, inflight_bytes: (seq + 1) * MSS });
        }
        v.on_loss(&Lost { now_us: S + 50_000, seq: 9, bytes: MSS, sent_us: S + 1_000, inflight_bytes: 19 * MSS });
        // Lost packet left with 10 in flight: W = 0.7·10 = 7.
        assert_eq!(v.phase(), Phase::Loss);
        assert_eq!(v.window_packets(), 7.0);
        v.on_loss(&Lost { now_us: S + 51_000, seq: 10, bytes: MSS, sent_us: S + 1_000, inflight_bytes: 18 * MSS });
        assert_eq!(v.window_packets(), 7.0, "same loss event");
        // A packet sent after the reaction is acknowledged: back to the epochs, D_est at the
        // profile's delay for the window (7 packets: 40 ms).
        v.on_sent(&Sent { now_us: S + 60_000, seq: 20, bytes: MSS, inflight_bytes: 8 * MSS });
        v.on_ack(&ack(S + 100_000, 20, S + 60_000, MSS));
        assert_eq!(v.phase(), Phase::Epochs);
        assert!((v.window_packets() - (7.0 + 1.0 / 7.0)).abs() < 1e-12);
        assert_eq!(v.target_delay_ms(), 40.0);
    }

    #[test]
    fn bad_parameters_are_one_line_errors() {
        let err = |spec: &str| crate::build(spec).err().expect("rejected").0;
        assert_eq!(err("verus:r=1"), "verus: r must be > 1 (a ratio of delays), got 1");
        assert_eq!(err("verus:m=1.5"), "verus: m must be < 1 (a decrease), got 1.5");
        assert_eq!(err("sprout:bins=2000"), "sprout: bins must be <= 1024, got 2000");
        assert!(crate::build("verus:ss_exit_ms=150,r=3").is_ok());
    }

    /// Median RTT (ms) and utilization of the last 10 s of 20 on a 1000 packets/s link behind
    /// 40 ms with an infinite buffer.
    fn fixed_link(spec: &str) -> (f64, f64) {
        let path = FixedPath { service_us: 1000, base_rtt_us: 40_000, rtt_drift_us_per_s: 0 };
        let mut rtts_ms = Vec::new();
        path.run(spec, 20_000_000, |a, _: &Verus| {
            if a.now_us > 10_000_000 {
                rtts_ms.push(a.rtt_us as f64 / 1000.0);
            }
        });
        rtts_ms.sort_by(f64::total_cmp);
        (rtts_ms[rtts_ms.len() / 2], rtts_ms.len() as f64 / 10_000.0)
    }

    #[test]
    fn r_sets_the_delay_it_holds_on_a_fixed_link() {
        // Slow start ends at 500 ms of delay, then the epochs keep D_max/D_min below R: the
        // authors' R = 6 lets the queue build to several base RTTs, R = 2 to about one.
        let (median_ms, utilization) = fixed_link("verus");
        eprintln!("r=6: median RTT {median_ms} ms, utilization {utilization}");
        let (median_r2_ms, utilization_r2) = fixed_link("verus:r=2");
        eprintln!("r=2: median RTT {median_r2_ms} ms, utilization {utilization_r2}");
        assert!(utilization > 0.9 && utilization_r2 > 0.9, "utilization {utilization}, {utilization_r2}");
        assert!(median_r2_ms > 45.0 && median_r2_ms < 100.0, "r=2: median RTT {median_r2_ms} ms");
        assert!(median_ms > 100.0 && median_ms < 6.0 * 40.0 + 20.0, "r=6: median RTT {median_ms} ms");
    }
}
