//! Constant bit rate: datagrams paced at a fixed rate whatever the path does — no window, no
//! reaction to loss, delay or CE marks. Not a congestion controller; it is what an experiment
//! puts next to one:
//!
//! - unresponsive cross traffic, as iPerf's UDP mode sends it (`iperf -u -b R`): `rate_mbps=R`
//!   paces datagrams of `mss_bytes` at R Mbit/s (a flow's 1464-byte datagrams: one every
//!   1464·8/R µs, 976 µs at 12 Mbit/s);
//! - latency probes, the ping of Flent's RRUL test (Høiland-Jørgensen et al., "Flent: The
//!   FLExible Network Tester", VALUETOOLS 2017; the Realtime Response Under Load test
//!   specification of the Bufferbloat project): `interval_ms=T` sends one datagram every T ms,
//!   whose one-way delays in the records are the latency a real-time flow would see under load.
//!   Unlike a ping it is a full-size datagram: the flow has one datagram size (flow/datagram.rs).
//!
//! Exactly one of the two is given; `interval_ms=T` is the rate of one `mss_bytes` datagram per
//! T ms, `mss_bytes·8/T` kbit/s, rounded to a whole bit/s (the flow's pacer then spaces
//! datagrams T ms apart to within a nanosecond; exactly for T = 100 ms, 117 120 bit/s).
//!
//! The rule a flow adds for every controller still holds (flow/mod.rs): after 1 s without an
//! acknowledgement the flow sends one probe per 100 ms instead of the controller's rate, so a CBR
//! flow into a dead path slows down — and a gap of a second or more between datagrams would make
//! the path look dead between any two of them. The gap is therefore at most `MAX_GAP_MS`, 500 ms,
//! which leaves 500 ms for the acknowledgement's round trip: `interval_ms ≤ 500`, `rate_mbps ≥`
//! one datagram per 500 ms (0.023424 Mbit/s for 1464-byte datagrams).
//!
//! Driver: a pacing rate and no window; no timer.

use crate::params::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_MSS_BYTES};

/// The longest gap between two datagrams (the header says why), ms.
pub const MAX_GAP_MS: f64 = 500.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CbrConfig {
    /// The rate datagrams are paced at, bit/s.
    pub rate_bps: u64,
}

impl CbrConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let mss_bytes = p.u64_at_least("mss_bytes", 1, DEFAULT_MSS_BYTES)?;
        let datagram_bits = (mss_bytes * 8) as f64;
        let rate_mbps = p.optional_positive_f64("rate_mbps")?;
        let interval_ms = p.optional_positive_f64("interval_ms")?;
        let rate_bps = match (rate_mbps, interval_ms) {
            (Some(rate_mbps), None) => {
                let min_rate_mbps = datagram_bits / (MAX_GAP_MS * 1e3);
                if rate_mbps < min_rate_mbps {
                    return Err(p.error(format!(
                        "rate_mbps must be >= {min_rate_mbps} (one {mss_bytes}-byte datagram per {MAX_GAP_MS} ms), got {rate_mbps}"
                    )));
                }
                rate_mbps * 1e6
            }
            (None, Some(interval_ms)) => {
                if interval_ms > MAX_GAP_MS {
                    return Err(p.error(format!("interval_ms must be <= {MAX_GAP_MS}, got {interval_ms}")));
                }
                datagram_bits * 1e3 / interval_ms
            }
            _ => {
                return Err(
                    p.error("give exactly one of rate_mbps=R (Mbit/s) and interval_ms=T (one datagram per T ms)")
                )
            }
        };
        Ok(CbrConfig { rate_bps: rate_bps.round() as u64 })
    }
}

#[derive(Debug, Clone)]
pub struct Cbr {
    /// The pacing rate, bit/s: the configured one, for the flow's whole life.
    rate_bps: u64,
}

impl Cbr {
    pub fn new(config: CbrConfig) -> Self {
        Cbr { rate_bps: config.rate_bps }
    }
}

impl CongestionControl for Cbr {
    fn name(&self) -> &'static str {
        "cbr"
    }

    fn on_sent(&mut self, _e: &Sent) {}

    fn on_ack(&mut self, _e: &Acked) {}

    fn on_loss(&mut self, _e: &Lost) {}

    /// A mark changes nothing either (the default would call `on_loss`, which does nothing; this
    /// says so where a reader looks).
    fn on_congestion_mark(&mut self, _e: &Acked) {}

    fn decision(&self) -> Decision {
        Decision { cwnd_bytes: None, pacing_rate_bps: Some(self.rate_bps), wake_at_us: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{controller, Flow, Instant, Verdict};
    use crate::testing::{ack, loss};

    /// The gaps between the first `n` datagrams a flow sends on time, µs.
    fn gaps_us(flow: &mut Flow, n: usize) -> Vec<u64> {
        let mut now = Instant::ZERO;
        let mut sent_us = Vec::new();
        while sent_us.len() < n {
            match flow.next_send(now) {
                Verdict::Send(permit) => {
                    flow.on_sent(now, permit);
                    sent_us.push(now.as_us());
                }
                Verdict::At(due) => now = due,
                Verdict::Closed => panic!("cbr has no window"),
            }
        }
        sent_us.windows(2).map(|w| w[1] - w[0]).collect()
    }

    fn cbr_flow(spec: &str) -> Flow {
        Flow::new(controller::build(spec).unwrap())
    }

    #[test]
    fn twelve_mbps_spaces_1464_byte_datagrams_976_us_apart() {
        // 1464 B · 8 / 12 Mbit/s = 976 µs; no window, however many are in flight.
        let mut f = cbr_flow("cbr:rate_mbps=12");
        assert_eq!(f.decision(), Decision { cwnd_bytes: None, pacing_rate_bps: Some(12_000_000), wake_at_us: None });
        assert_eq!(gaps_us(&mut f, 100), vec![976; 99]);
    }

    #[test]
    fn an_interval_of_100_ms_sends_one_datagram_per_100_ms() {
        // 1464 B · 8 per 100 ms = 117 120 bit/s.
        let mut f = cbr_flow("cbr:interval_ms=100");
        assert_eq!(f.decision().pacing_rate_bps, Some(117_120));
        assert_eq!(gaps_us(&mut f, 6), vec![100_000; 5]);
    }

    #[test]
    fn loss_marks_and_acknowledgements_change_nothing() {
        let mut cc = Cbr::new(CbrConfig { rate_bps: 12_000_000 });
        let before = cc.decision();
        for seq in 0..50 {
            cc.on_loss(&loss(10_000 + seq, seq, seq));
            cc.on_congestion_mark(&ack(20_000 + seq, seq + 50, seq, 1464));
            cc.on_ack(&ack(20_000 + seq, seq + 100, seq, 1464));
            assert_eq!(cc.decision(), before);
        }
    }

    #[test]
    fn a_flow_losing_half_its_datagrams_keeps_its_rate() {
        // Every other datagram lost (3 later ones acknowledged declares it so): the gaps stay 976 µs.
        let mut f = cbr_flow("cbr:rate_mbps=12");
        let mut now = Instant::ZERO;
        let mut sent_us = Vec::new();
        while sent_us.len() < 200 {
            match f.next_send(now) {
                Verdict::Send(permit) => {
                    let seq = f.on_sent(now, permit).seq;
                    sent_us.push(now.as_us());
                    if seq % 2 == 1 {
                        f.on_ack(now, seq, 0, 0);
                        f.detect_losses(now);
                    }
                }
                Verdict::At(due) => now = due,
                Verdict::Closed => panic!("cbr has no window"),
            }
        }
        assert!(f.counts().lost >= 98, "{:?}", f.counts());
        assert!(sent_us.windows(2).all(|w| w[1] - w[0] == 976));
    }

    #[test]
    fn mistakes_are_one_line() {
        let err = |spec: &str| crate::build(spec).err().expect("spec should be rejected").0;
        let both = "cbr: give exactly one of rate_mbps=R (Mbit/s) and interval_ms=T (one datagram per T ms)";
        assert_eq!(err("cbr"), both);
        assert_eq!(err("cbr:rate_mbps=1,interval_ms=10"), both);
        assert_eq!(err("cbr:rate_mbps=0"), "cbr: rate_mbps must be > 0, got 0");
        assert_eq!(err("cbr:rate_mbps=inf"), "cbr: rate_mbps must be > 0, got inf");
        assert_eq!(err("cbr:interval_ms=-5"), "cbr: interval_ms must be > 0, got -5");
        assert_eq!(err("cbr:interval_ms=1000"), "cbr: interval_ms must be <= 500, got 1000");
        assert_eq!(
            err("cbr:rate_mbps=0.01,mss_bytes=1464"),
            "cbr: rate_mbps must be >= 0.023424 (one 1464-byte datagram per 500 ms), got 0.01"
        );
    }
}
