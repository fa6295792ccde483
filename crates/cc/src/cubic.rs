//! CUBIC (Ha, Rhee & Xu, SIGOPS OSR 2008; RFC 8312, updated by RFC 9438).
//!
//! The idea: after a reduction, grow the window as a cubic function of the time since the
//! reduction, W(t) = C·(t − K)³ + W_max, so that it rises fast, flattens out around W_max (the
//! window where the last loss happened) and then probes beyond it — independent of the RTT, so
//! long- and short-RTT flows converge to the same windows. Where Reno would grow faster (short
//! RTTs, small windows), CUBIC grows at least as fast as Reno.
//!
//! Sections implemented (RFC 9438; units are segments = MSS and seconds):
//! - §4.2 window growth: K = ∛((W_max − cwnd_epoch)/C), the epoch starting at the first
//!   acknowledgement after a reduction; per acknowledgement the target is W_cubic(t + RTT)
//!   clamped to [cwnd, 1.5·cwnd], and cwnd grows by (target − cwnd)/cwnd per acknowledged
//!   segment. With cwnd_epoch = β·W_max (no fast convergence) K = ∛(W_max·(1−β)/C), RFC 8312
//!   §4.1's formula.
//! - §4.3 Reno-friendly region: W_est starts at cwnd_epoch and grows by
//!   α_cubic·(segments acknowledged)/cwnd, α_cubic = 3(1−β)/(1+β) until W_est reaches W_max, 1
//!   after; when W_cubic(t) < W_est, cwnd = W_est.
//! - §4.6 multiplicative decrease: cwnd = max(β·cwnd, 2), ssthresh likewise; once per
//!   congestion event (packets sent before the reduction belong to it, as in `reno`).
//! - §4.7 fast convergence: W_max = cwnd·(1+β)/2 when the window is below the previous W_max,
//!   cwnd otherwise.
//! - §4.10 slow start below ssthresh as Reno (RFC 5681 with byte counting); the first epoch after
//!   slow start ends without a loss starts with W_max = cwnd, K = 0.
//!
//! Constants: C = 0.4 and β_cubic = 0.7 (the values RFC 9438 specifies); initial window 10 packets
//! (RFC 6928); MSS 1500 bytes. The RTT in W_cubic(t + RTT) is the smoothed RTT (§4.2 leaves the
//! estimator open).
//!
//! Deviations: as in `reno`, the reduction is taken from cwnd rather than FlightSize, and a loss
//! found by the sender's timeout is an ordinary congestion event. HyStart (RFC 9406) is not
//! implemented: RFC 9438 only recommends it, and Pantheon's userspace scheme is plain CUBIC.
//!
//! Driver: window only (no pacing rate, no timer).

use crate::params::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_INITIAL_CWND_PACKETS, DEFAULT_MSS_BYTES};

/// RFC 9438: C = 0.4 (segments per second cubed).
pub const C: f64 = 0.4;
/// RFC 9438 §4.6: β_cubic = 0.7.
pub const BETA: f64 = 0.7;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CubicConfig {
    pub mss_bytes: u64,
    pub initial_cwnd_packets: u64,
    /// RFC 9438 §4.7; on by default as the RFC recommends.
    pub fast_convergence: bool,
}

impl Default for CubicConfig {
    fn default() -> Self {
        CubicConfig {
            mss_bytes: DEFAULT_MSS_BYTES,
            initial_cwnd_packets: DEFAULT_INITIAL_CWND_PACKETS,
            fast_convergence: true,
        }
    }
}

impl CubicConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = CubicConfig::default();
        Ok(CubicConfig {
            mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?,
            initial_cwnd_packets: p.u64_at_least("initial_cwnd_packets", 2, d.initial_cwnd_packets)?,
            fast_convergence: p.bool("fast_convergence", d.fast_convergence)?,
        })
    }
}

/// The cubic window function of RFC 9438 §4.2, eq. (1): segments at `t_s` seconds into the epoch.
pub fn w_cubic(t_s: f64, k_s: f64, w_max: f64) -> f64 {
    C * (t_s - k_s).powi(3) + w_max
}

/// The congestion-avoidance epoch that starts at the first acknowledgement after a reduction.
#[derive(Debug, Clone, Copy)]
struct Epoch {
    start_us: u64,
    /// Seconds W_cubic takes to return to W_max.
    k_s: f64,
    /// Reno-friendly window estimate W_est in segments (§4.3).
    w_est: f64,
}

#[derive(Debug, Clone)]
pub struct Cubic {
    config: CubicConfig,
    /// Congestion window in segments (fractional: growth arrives in fractions of a segment).
    cwnd_packets: f64,
    /// Slow-start threshold in segments.
    ssthresh_packets: f64,
    /// Window in segments just before the last reduction (after fast convergence); 0 before any.
    w_max_packets: f64,
    epoch: Option<Epoch>,
    recovery_start_us: Option<u64>,
}

impl Cubic {
    pub fn new(config: CubicConfig) -> Self {
        Cubic {
            config,
            cwnd_packets: config.initial_cwnd_packets as f64,
            ssthresh_packets: f64::INFINITY,
            w_max_packets: 0.0,
            epoch: None,
            recovery_start_us: None,
        }
    }

    /// Window in segments.
    pub fn cwnd_packets(&self) -> f64 {
        self.cwnd_packets
    }

    pub fn w_max_segments(&self) -> f64 {
        self.w_max_packets
    }

    /// K of the current epoch in seconds, `None` outside an epoch.
    pub fn k_s(&self) -> Option<f64> {
        self.epoch.map(|e| e.k_s)
    }

    fn start_epoch(&mut self, now_us: u64) -> Epoch {
        let k_s = if self.w_max_packets > self.cwnd_packets {
            ((self.w_max_packets - self.cwnd_packets) / C).cbrt()
        } else {
            self.w_max_packets = self.cwnd_packets;
            0.0
        };
        Epoch { start_us: now_us, k_s, w_est: self.cwnd_packets }
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn on_sent(&mut self, _e: &Sent) {}

    fn on_ack(&mut self, e: &Acked) {
        if self.recovery_start_us.is_some_and(|start_us| e.sent_us <= start_us) {
            return;
        }
        let acked = e.bytes as f64 / self.config.mss_bytes as f64;
        if self.cwnd_packets < self.ssthresh_packets {
            self.cwnd_packets += acked.min(1.0);
            return;
        }
        let mut epoch = match self.epoch {
            Some(epoch) => epoch,
            None => self.start_epoch(e.now_us),
        };
        let t_s = (e.now_us - epoch.start_us) as f64 / 1e6;
        let rtt_s = e.srtt_us as f64 / 1e6;
        let alpha = if epoch.w_est < self.w_max_packets { 3.0 * (1.0 - BETA) / (1.0 + BETA) } else { 1.0 };
        epoch.w_est += alpha * acked / self.cwnd_packets;
        if w_cubic(t_s, epoch.k_s, self.w_max_packets) < epoch.w_est {
            self.cwnd_packets = epoch.w_est;
        } else {
            let target =
                w_cubic(t_s + rtt_s, epoch.k_s, self.w_max_packets).clamp(self.cwnd_packets, 1.5 * self.cwnd_packets);
            self.cwnd_packets += (target - self.cwnd_packets) / self.cwnd_packets * acked;
        }
        self.epoch = Some(epoch);
    }

    fn on_loss(&mut self, e: &Lost) {
        if self.recovery_start_us.is_some_and(|start_us| e.sent_us <= start_us) {
            return;
        }
        self.recovery_start_us = Some(e.now_us);
        self.w_max_packets = if self.config.fast_convergence && self.cwnd_packets < self.w_max_packets {
            self.cwnd_packets * (1.0 + BETA) / 2.0
        } else {
            self.cwnd_packets
        };
        self.ssthresh_packets = (self.cwnd_packets * BETA).max(2.0);
        self.cwnd_packets = self.ssthresh_packets;
        self.epoch = None;
    }

    fn decision(&self) -> Decision {
        let cwnd_bytes = (self.cwnd_packets * self.config.mss_bytes as f64) as u64;
        Decision { cwnd_bytes: Some(cwnd_bytes), pacing_rate_bps: None, wake_at_us: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ack, loss};

    /// A Cubic at `cwnd` segments in congestion avoidance that has just lost a packet at
    /// `now_us`.
    fn after_loss_at(cwnd_packets: u64, now_us: u64) -> Cubic {
        let mut c = Cubic::new(CubicConfig { initial_cwnd_packets: cwnd_packets, ..CubicConfig::default() });
        c.on_loss(&loss(now_us, 0, 0));
        c
    }

    /// Feeds acknowledgements as a window-limited flow with a fixed `rtt_us` receives them:
    /// cwnd of them per RTT, evenly spread, from `from_us` to `to_us`.
    fn run_acks(c: &mut Cubic, from_us: u64, to_us: u64, rtt_us: u64) {
        let mut now_us = from_us as f64;
        let mut seq = 1000;
        while now_us < to_us as f64 {
            let mut a = ack(now_us as u64, seq, now_us as u64 - rtt_us, 1500);
            a.srtt_us = rtt_us;
            c.on_ack(&a);
            seq += 1;
            now_us += rtt_us as f64 / c.cwnd_packets();
        }
    }

    #[test]
    fn reduction_and_k_follow_rfc8312() {
        let c = after_loss_at(100, 1_000_000);
        assert_eq!(c.cwnd_packets(), 70.0);
        assert_eq!(c.w_max_segments(), 100.0);
        let mut c = c;
        let mut a = ack(1_100_000, 5, 1_050_000, 1500);
        a.srtt_us = 50_000;
        c.on_ack(&a);
        // K = ∛(W_max·(1−β)/C) = ∛(100·0.3/0.4) = ∛75 = 4.2172 s.
        assert!((c.k_s().unwrap() - 75f64.cbrt()).abs() < 1e-12);
        assert!((c.k_s().unwrap() - 4.2172).abs() < 1e-4);
    }

    #[test]
    fn window_follows_the_cubic_curve_to_w_max_then_the_reno_friendly_estimate() {
        // 100 ms RTT; the epoch starts at the first acknowledgement, at 0.1 s.
        let mut c = after_loss_at(100, 0);
        run_acks(&mut c, 100_000, 4_217_000, 100_000);
        // At t = K the curve is at W_max; the window, aiming one RTT ahead, is within a segment.
        // The Reno-friendly estimate is far below: 70 + 0.529·41 RTTs ≈ 91.7.
        assert!((c.cwnd_packets() - 100.0).abs() < 1.0, "cwnd {}", c.cwnd_packets());
        assert!((c.epoch.unwrap().w_est - (70.0 + 0.5294 * 41.2)).abs() < 0.3);
        run_acks(&mut c, 4_217_000, 6_217_000, 100_000);
        // W_est reaches W_max after 30/0.529 = 56.7 RTTs (at 5.77 s) and then grows one segment
        // per RTT, faster than the curve's plateau (W_cubic(6.1 s) = 102.7): by 6.217 s it is
        // 100 + 4.5 = 104.5 and the window follows it.
        let t_s = 6.117;
        assert!(w_cubic(t_s, c.k_s().unwrap(), 100.0) < 102.8);
        assert_eq!(c.cwnd_packets(), c.epoch.unwrap().w_est);
        assert!((c.cwnd_packets() - 104.5).abs() < 0.3, "cwnd {}", c.cwnd_packets());
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut c = after_loss_at(100, 0);
        // The window is at 70 < W_max = 100 when the next loss comes.
        c.on_loss(&loss(500_000, 1, 400_000));
        assert!((c.w_max_segments() - 70.0 * 1.7 / 2.0).abs() < 1e-9);
        assert!((c.cwnd_packets() - 49.0).abs() < 1e-9);
        let mut plain =
            Cubic::new(CubicConfig { initial_cwnd_packets: 100, fast_convergence: false, ..CubicConfig::default() });
        plain.on_loss(&loss(0, 0, 0));
        plain.on_loss(&loss(500_000, 1, 400_000));
        assert_eq!(plain.w_max_segments(), 70.0);
    }

    #[test]
    fn short_rtt_follows_the_reno_friendly_estimate() {
        // W_max = 10, cwnd = 7, K = ∛(3/0.4) = 1.96 s. With a 1 ms RTT, 100 ms is 100 round trips:
        // the estimate grows α = 3·0.3/1.7 = 0.529 segments per round trip up to W_max, then 1 —
        // far ahead of the curve, which is still below W_max.
        let mut c = after_loss_at(10, 0);
        run_acks(&mut c, 1_000, 100_000, 1_000);
        let cubic_now = w_cubic(0.1, 7.5f64.cbrt(), 10.0);
        assert!(cubic_now < 10.0);
        // 3 segments at 0.529/RTT take 5.7 RTTs, the remaining 94.3 RTTs add ≈1 each: ≈104.
        assert!((c.cwnd_packets() - 104.3).abs() < 3.0, "cwnd {}", c.cwnd_packets());
    }
}
