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
//! - unresponsive traffic that follows a rate trace: `rates_mbps=R0/R1/...,step_s=S` paces at
//!   R0 for the flow's first S seconds, R1 for the next S, and so on, looping at the end as a
//!   Mahimahi trace does (a video's bitrate ladder, a sender following a recorded throughput).
//!
//! Exactly one of the three is given; `interval_ms=T` is the rate of one `mss_bytes` datagram per
//! T ms, `mss_bytes·8/T` kbit/s, rounded to a whole bit/s (the flow's pacer then spaces
//! datagrams T ms apart to within a nanosecond; exactly for T = 100 ms, 117 120 bit/s). A trace's
//! step changes at the flow's time k·S: the controller asks to be woken then (`wake_at_us`) and
//! takes the next rate in `on_timer`.
//!
//! The rule a flow adds for every controller still holds (flow/mod.rs): after 1 s without an
//! acknowledgement the flow sends one probe per 100 ms instead of the controller's rate, so a CBR
//! flow into a dead path slows down — and a gap of a second or more between datagrams would make
//! the path look dead between any two of them. The gap is therefore at most `MAX_GAP_MS`, 500 ms,
//! which leaves 500 ms for the acknowledgement's round trip: `interval_ms ≤ 500`, `rate_mbps ≥`
//! one datagram per 500 ms (0.023424 Mbit/s for 1464-byte datagrams).
//!
//! A stalled sender keeps the schedule: the datagrams that fell due while its host did not run it
//! leave back to back when it runs again, up to `MAX_CATCH_UP_MS` of them, so that the rate is the
//! rate over any stretch of the run (a congestion controller's sender, whose rate is a ceiling,
//! makes up only a late wake-up: flow/pacer.rs). On the 2-core development VM, with a hypervisor
//! stealing 10–20% of its time (harness/steal.py), a 2 Mbit/s flow that did not catch up sent its
//! datagrams a median 5.885 ms apart (the 5.856 ms asked) but 6.58 ms on average: 11% under its
//! rate, stalls of up to 17.6 ms (p99 of the gaps) each costing the datagrams due in them.
//!
//! Driver: a pacing rate and no window; a timer only at a trace's steps.

use crate::params::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_MSS_BYTES};

/// The longest gap between two datagrams (the header says why), ms.
pub const MAX_GAP_MS: f64 = 500.0;
/// How long a stall of the sender the schedule survives, ms: longer than the stalls measured
/// (the header), short enough that a sender stopped for seconds does not then flood the path.
pub const MAX_CATCH_UP_MS: u64 = 50;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CbrConfig {
    /// The rates datagrams are paced at, bit/s, one per step; one rate for a constant one.
    pub rates_bps: Vec<u64>,
    /// How long each rate of a trace lasts, µs (unused with one rate).
    pub step_us: u64,
}

impl CbrConfig {
    /// One constant rate, bit/s.
    pub fn constant(rate_bps: u64) -> Self {
        CbrConfig { rates_bps: vec![rate_bps], step_us: u64::MAX }
    }

    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let mss_bytes = p.u64_at_least("mss_bytes", 1, DEFAULT_MSS_BYTES)?;
        let datagram_bits = (mss_bytes * 8) as f64;
        let min_rate_mbps = datagram_bits / (MAX_GAP_MS * 1e3);
        let at_least_min = |p: &Params, key: &str, rate_mbps: f64| {
            if rate_mbps < min_rate_mbps {
                return Err(p.error(format!(
                    "{key} must be >= {min_rate_mbps} (one {mss_bytes}-byte datagram per {MAX_GAP_MS} ms), got {rate_mbps}"
                )));
            }
            Ok(rate_mbps * 1e6)
        };
        let rate_mbps = p.optional_positive_f64("rate_mbps")?;
        let interval_ms = p.optional_positive_f64("interval_ms")?;
        let rates_mbps = p.text("rates_mbps");
        let step_s = p.optional_positive_f64("step_s")?;
        let config = match (rate_mbps, interval_ms, rates_mbps) {
            (Some(rate_mbps), None, None) => Self::constant(at_least_min(p, "rate_mbps", rate_mbps)?.round() as u64),
            (None, Some(interval_ms), None) => {
                if interval_ms > MAX_GAP_MS {
                    return Err(p.error(format!("interval_ms must be <= {MAX_GAP_MS}, got {interval_ms}")));
                }
                Self::constant((datagram_bits * 1e3 / interval_ms).round() as u64)
            }
            (None, None, Some(text)) => {
                let Some(step_s) = step_s else {
                    return Err(p.error("rates_mbps needs step_s=S, how long each rate lasts in seconds"));
                };
                let mut rates_bps = Vec::new();
                for item in text.split('/') {
                    let rate_mbps: f64 = item.trim().parse().map_err(|_| {
                        p.error(format!("rates_mbps must be rates in Mbit/s joined by '/', got '{text}'"))
                    })?;
                    rates_bps.push(at_least_min(p, "every rate of rates_mbps", rate_mbps)?.round() as u64);
                }
                CbrConfig { rates_bps, step_us: ((step_s * 1e6).round() as u64).max(1) }
            }
            _ => {
                return Err(p.error(
                    "give exactly one of rate_mbps=R (Mbit/s), interval_ms=T (one datagram per T ms) and rates_mbps=R0/R1/...,step_s=S (a rate trace)",
                ))
            }
        };
        if step_s.is_some() && config.rates_bps.len() == 1 && rates_mbps.is_none() {
            return Err(p.error("step_s goes with rates_mbps"));
        }
        Ok(config)
    }
}

#[derive(Debug, Clone)]
pub struct Cbr {
    /// The pacing rates, bit/s, one per step of `step_us`, looping; one for a constant rate.
    rates_bps: Vec<u64>,
    step_us: u64,
    /// The step the flow's time is in (counting on past the trace's end: the rate is
    /// `rates_bps[step % len]`).
    step: u64,
}

impl Cbr {
    pub fn new(config: CbrConfig) -> Self {
        Cbr { rates_bps: config.rates_bps, step_us: config.step_us, step: 0 }
    }

    fn rate_bps(&self) -> u64 {
        self.rates_bps[(self.step % self.rates_bps.len() as u64) as usize]
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

    /// The flow's time has reached a trace's next step.
    fn on_timer(&mut self, now_us: u64) {
        self.step = now_us / self.step_us;
    }

    fn decision(&self) -> Decision {
        let wake_at_us = (self.rates_bps.len() > 1).then(|| (self.step + 1).saturating_mul(self.step_us));
        Decision { cwnd_bytes: None, pacing_rate_bps: Some(self.rate_bps()), wake_at_us }
    }

    fn pacing_max_lag_ns(&self) -> u64 {
        MAX_CATCH_UP_MS * 1_000_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{controller, Flow, Instant, Verdict};
    use crate::testing::{ack, loss};

    /// The times a flow sends at until `done(sent so far, now)`, its sender waking for a send due
    /// at `due_us` at `wake_us(due_us, how many it sent)`: on time, or later where it stalled.
    fn send_times_us(
        flow: &mut Flow,
        done: impl Fn(&[u64], u64) -> bool,
        wake_us: impl Fn(u64, usize) -> u64,
    ) -> Vec<u64> {
        let mut now = Instant::ZERO;
        let mut sent_us = Vec::new();
        while !done(&sent_us, now.as_us()) {
            match flow.next_send(now) {
                Verdict::Send(permit) => {
                    flow.on_sent(now, permit);
                    sent_us.push(now.as_us());
                }
                Verdict::At(due) => now = Instant::from_us(wake_us(due.as_us(), sent_us.len())).max(due),
                Verdict::Closed => panic!("cbr has no window"),
            }
        }
        sent_us
    }

    /// The gaps between the first `n` datagrams a flow sends on time, µs.
    fn gaps_us(flow: &mut Flow, n: usize) -> Vec<u64> {
        let sent_us = send_times_us(flow, |sent, _| sent.len() >= n, |due_us, _| due_us);
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
        let mut cc = Cbr::new(CbrConfig::constant(12_000_000));
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

    /// The times a 12 Mbit/s flow sends at before `end_us`, its sender stalling as `wake_us` says.
    fn stalled_send_times_us(end_us: u64, wake_us: impl Fn(u64, usize) -> u64) -> Vec<u64> {
        send_times_us(&mut cbr_flow("cbr:rate_mbps=12"), |_, now_us| now_us >= end_us, wake_us)
    }

    #[test]
    fn a_stalled_sender_keeps_its_schedule() {
        // 976 µs gaps, the sender stopped from 5 ms to 25 ms: the 20 datagrams due meanwhile
        // leave at once when it runs again, and the schedule goes on as if on time.
        let sent_us =
            stalled_send_times_us(40_000, |due_us, _| if (5_000..25_000).contains(&due_us) { 25_000 } else { due_us });
        assert_eq!(sent_us.iter().filter(|&&t| t == 25_000).count(), 1 + (25_000 - 5_856) / 976);
        assert_eq!(sent_us.len() as u64, 40_000 / 976 + 1);
        // Stopped from the second datagram to 900 ms: what fell due before the last
        // MAX_CATCH_UP_MS is lost, the rest leaves at once, and the schedule goes on from there.
        let sent_us = stalled_send_times_us(1_000_000, |due_us, sent| if sent == 1 { 900_000 } else { due_us });
        assert_eq!(sent_us.len() as u64, 1 + 1 + MAX_CATCH_UP_MS * 1000 / 976 + 100_000 / 976);
    }

    #[test]
    fn a_rate_trace_paces_each_step_at_its_rate_and_loops() {
        // 12 Mbit/s for 10 ms (976 µs gaps), then 6 (1952 µs), then 12 again.
        let mut f = cbr_flow("cbr:rates_mbps=12/6,step_s=0.01");
        let mut now = Instant::ZERO;
        let mut sent_us = Vec::new();
        while now.as_us() < 40_000 {
            f.run_timers(now);
            match f.next_send(now) {
                Verdict::Send(permit) => {
                    f.on_sent(now, permit);
                    sent_us.push(now.as_us());
                }
                Verdict::At(due) => now = f.deadline(now, Some(due)).map_or(due, |d| d.min(due)),
                Verdict::Closed => panic!("cbr has no window"),
            }
        }
        let gaps_in = |from_us: u64, to_us: u64| -> Vec<u64> {
            let inside: Vec<u64> = sent_us.iter().copied().filter(|&t| (from_us..to_us).contains(&t)).collect();
            inside.windows(2).map(|w| w[1] - w[0]).collect()
        };
        assert!(gaps_in(0, 10_000).iter().all(|&g| g == 976), "{:?}", gaps_in(0, 10_000));
        assert!(gaps_in(12_000, 20_000).iter().all(|&g| g == 1952), "{:?}", gaps_in(12_000, 20_000));
        assert!(gaps_in(22_000, 30_000).iter().all(|&g| g == 976), "{:?}", gaps_in(22_000, 30_000));
    }

    #[test]
    fn mistakes_are_one_line() {
        let err = |spec: &str| crate::build(spec).err().expect("spec should be rejected").0;
        let both = "cbr: give exactly one of rate_mbps=R (Mbit/s), interval_ms=T (one datagram per T ms) and rates_mbps=R0/R1/...,step_s=S (a rate trace)";
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
        assert_eq!(err("cbr:rates_mbps=2/4"), "cbr: rates_mbps needs step_s=S, how long each rate lasts in seconds");
        assert_eq!(
            err("cbr:rates_mbps=2/x,step_s=1"),
            "cbr: rates_mbps must be rates in Mbit/s joined by '/', got '2/x'"
        );
        assert_eq!(
            err("cbr:rates_mbps=2/0.001,step_s=1,mss_bytes=1464"),
            "cbr: every rate of rates_mbps must be >= 0.023424 (one 1464-byte datagram per 500 ms), got 0.001"
        );
        assert_eq!(err("cbr:rate_mbps=2,step_s=1"), "cbr: step_s goes with rates_mbps");
    }
}
