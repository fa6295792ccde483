//! Delivery schedules: the times at which the link may send 1500 bytes (a *delivery opportunity*,
//! Mahimahi's model of a link, ATC 2015 §3.2). Three kinds, as in the Pantheon paper's emulators
//! (§4): a constant rate, a recorded Mahimahi trace, and Poisson deliveries at a mean rate (the
//! paper's cellular emulators: "packet deliveries governed by a Poisson process").
//!
//! A schedule is a cursor over an infinite, non-decreasing sequence of opportunity times in
//! microseconds. `skip_to` fast-forwards across an idle period; for the constant and trace
//! schedules it is O(1) / O(log n) and gives the same cursor as stepping, and the Poisson schedule
//! steps so that its random stream, and hence a seeded run, does not depend on who was watching.

use crate::rng::Rng;
use crate::trace::Trace;

/// Bytes one delivery opportunity may carry (Mahimahi's convention: one MTU-sized packet).
pub const OPPORTUNITY_BYTES: u32 = 1500;
const OPPORTUNITY_BITS: u128 = OPPORTUNITY_BYTES as u128 * 8;

/// A delivery schedule of one of the supported kinds.
#[derive(Debug, Clone)]
pub enum Schedule {
    Constant(ConstantRate),
    Trace(TraceSchedule),
    Poisson(PoissonSchedule),
}

impl Schedule {
    /// Time of the next opportunity, in microseconds.
    pub fn next_us(&self) -> u64 {
        match self {
            Schedule::Constant(s) => s.next_us,
            Schedule::Trace(s) => s.next_us,
            Schedule::Poisson(s) => s.next_us,
        }
    }

    /// Consumes the opportunity at `next_us()`.
    pub fn advance(&mut self) {
        match self {
            Schedule::Constant(s) => s.advance(),
            Schedule::Trace(s) => s.advance(),
            Schedule::Poisson(s) => s.advance(),
        }
    }

    /// Discards every opportunity before `t_us`.
    pub fn skip_to(&mut self, t_us: u64) {
        if self.next_us() >= t_us {
            return;
        }
        match self {
            Schedule::Constant(s) => s.skip_to(t_us),
            Schedule::Trace(s) => s.skip_to(t_us),
            Schedule::Poisson(s) => {
                while s.next_us < t_us {
                    s.advance();
                }
            }
        }
    }
}

/// Evenly spaced opportunities: the k-th (k = 1, 2, ...) is at floor(k · 12000 bits / rate).
/// Computed from k rather than accumulated, so there is no drift at any rate.
#[derive(Debug, Clone)]
pub struct ConstantRate {
    rate_bps: u128,
    k: u128,
    next_us: u64,
}

impl ConstantRate {
    pub fn new(rate_mbps: f64) -> Self {
        assert!(rate_mbps > 0.0 && rate_mbps.is_finite(), "rate must be positive");
        let rate_bps = (rate_mbps * 1e6).round().max(1.0) as u128;
        let mut s = ConstantRate { rate_bps, k: 1, next_us: 0 };
        s.next_us = s.time_of(1);
        s
    }

    /// Saturates rather than wraps past `u64::MAX` µs (584 000 years: no run gets there).
    fn time_of(&self, k: u128) -> u64 {
        u64::try_from(k * OPPORTUNITY_BITS * 1_000_000 / self.rate_bps).unwrap_or(u64::MAX)
    }

    fn advance(&mut self) {
        self.k += 1;
        self.next_us = self.time_of(self.k);
    }

    fn skip_to(&mut self, t_us: u64) {
        // floor(k·N/D) >= t  <=>  k >= t·D/N, so the first such k is ceil(t·D/N).
        let n = OPPORTUNITY_BITS * 1_000_000;
        let k = (u128::from(t_us) * self.rate_bps).div_ceil(n);
        self.k = self.k.max(k);
        self.next_us = self.time_of(self.k);
    }
}

/// A Mahimahi trace, repeated with its period.
#[derive(Debug, Clone)]
pub struct TraceSchedule {
    trace: Trace,
    /// Which repetition of the trace the cursor is in.
    cycle: u64,
    /// Index of the next opportunity within the trace.
    index: usize,
    next_us: u64,
}

impl TraceSchedule {
    pub fn new(trace: Trace) -> Self {
        let next_us = trace.opportunities_ms()[0] * 1000;
        TraceSchedule { trace, cycle: 0, index: 0, next_us }
    }

    /// Saturates rather than wraps past `u64::MAX` µs (timestamps are at most a day,
    /// `bounds::MAX_TRACE_MS`, so only a cycle count no run reaches could get there).
    fn update(&mut self) {
        let t_ms =
            self.cycle.saturating_mul(self.trace.period_ms()).saturating_add(self.trace.opportunities_ms()[self.index]);
        self.next_us = t_ms.saturating_mul(1000);
    }

    fn advance(&mut self) {
        self.index += 1;
        if self.index == self.trace.opportunities_ms().len() {
            self.index = 0;
            self.cycle += 1;
        }
        self.update();
    }

    fn skip_to(&mut self, t_us: u64) {
        let period_ms = self.trace.period_ms();
        let target_ms = t_us.div_ceil(1000);
        let (mut cycle, mut offset_ms) = (target_ms / period_ms, target_ms % period_ms);
        if offset_ms == 0 && cycle > 0 {
            // The previous cycle's opportunities at its very end (timestamp == period) come at
            // this instant too, and before this cycle's.
            cycle -= 1;
            offset_ms = period_ms;
        }
        // Never empty at the end: the last timestamp equals the period, which is >= offset.
        self.index = self.trace.opportunities_ms().partition_point(|&t| t < offset_ms);
        self.cycle = cycle;
        self.update();
    }
}

/// Opportunities of a Poisson process: exponential gaps with mean 12000 bits / rate.
#[derive(Debug, Clone)]
pub struct PoissonSchedule {
    mean_gap_us: f64,
    rng: Rng,
    /// Exact time of the next opportunity; `next_us` is its floor.
    next_exact_us: f64,
    next_us: u64,
}

impl PoissonSchedule {
    pub fn new(rate_mbps: f64, seed: u64) -> Self {
        assert!(rate_mbps > 0.0 && rate_mbps.is_finite(), "rate must be positive");
        let mean_gap_us = OPPORTUNITY_BITS as f64 / rate_mbps;
        let mut rng = Rng::new(seed);
        let next_exact_us = rng.exponential(mean_gap_us);
        PoissonSchedule { mean_gap_us, rng, next_exact_us, next_us: next_exact_us as u64 }
    }

    fn advance(&mut self) {
        self.next_exact_us += self.rng.exponential(self.mean_gap_us);
        self.next_us = self.next_exact_us as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(s: &mut Schedule, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| {
                let t = s.next_us();
                s.advance();
                t
            })
            .collect()
    }

    #[test]
    fn constant_12_mbps_is_one_opportunity_per_ms() {
        let mut s = Schedule::Constant(ConstantRate::new(12.0));
        assert_eq!(take(&mut s, 3), vec![1000, 2000, 3000]);
    }

    #[test]
    fn constant_rate_does_not_drift() {
        // 7 Mbit/s: 1714.28... us per opportunity; the 7000th is at exactly 12 s.
        let mut s = Schedule::Constant(ConstantRate::new(7.0));
        let times = take(&mut s, 7000);
        assert_eq!(times[0], 1714);
        assert_eq!(times[1], 3428);
        assert_eq!(times[6999], 12_000_000);
    }

    #[test]
    fn constant_skip_equals_stepping() {
        for rate in [0.5, 7.0, 12.0, 100.0, 1000.0, 2345.6] {
            for t in [0u64, 1, 999, 1000, 1001, 123_457, 9_999_999] {
                let mut stepped = Schedule::Constant(ConstantRate::new(rate));
                while stepped.next_us() < t {
                    stepped.advance();
                }
                let mut skipped = Schedule::Constant(ConstantRate::new(rate));
                skipped.skip_to(t);
                assert_eq!(skipped.next_us(), stepped.next_us(), "rate {rate} t {t}");
                skipped.advance();
                stepped.advance();
                assert_eq!(skipped.next_us(), stepped.next_us());
            }
        }
    }

    #[test]
    fn trace_loops_with_its_period() {
        let trace = Trace::parse("0\n2\n2\n5\n").unwrap();
        let mut s = Schedule::Trace(TraceSchedule::new(trace));
        assert_eq!(take(&mut s, 9), vec![0, 2000, 2000, 5000, 5000, 7000, 7000, 10_000, 10_000]);
    }

    #[test]
    fn trace_skip_equals_stepping() {
        let trace = Trace::parse("1\n3\n3\n3\n8\n").unwrap();
        for t in [0u64, 1, 1000, 1001, 3000, 3001, 7999, 8000, 8001, 16_000, 16_001, 123_456] {
            let mut stepped = Schedule::Trace(TraceSchedule::new(trace.clone()));
            while stepped.next_us() < t {
                stepped.advance();
            }
            let mut skipped = Schedule::Trace(TraceSchedule::new(trace.clone()));
            skipped.skip_to(t);
            assert_eq!(skipped.next_us(), stepped.next_us(), "t {t}");
            assert_eq!(take(&mut skipped, 6), take(&mut stepped, 6), "t {t}");
        }
    }

    #[test]
    fn poisson_gaps_have_the_right_mean_and_spread() {
        // 12 Mbit/s: mean gap 1000 us; an exponential's standard deviation equals its mean.
        let mut s = Schedule::Poisson(PoissonSchedule::new(12.0, 3));
        let times = take(&mut s, 100_001);
        let gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((mean - 1000.0).abs() < 10.0, "mean {mean}");
        assert!((sd - 1000.0).abs() < 20.0, "sd {sd}");
    }

    #[test]
    fn poisson_is_reproducible_and_skip_consumes_the_same_stream() {
        let mut a = Schedule::Poisson(PoissonSchedule::new(50.0, 9));
        let mut b = Schedule::Poisson(PoissonSchedule::new(50.0, 9));
        a.skip_to(10_000);
        while b.next_us() < 10_000 {
            b.advance();
        }
        assert_eq!(take(&mut a, 50), take(&mut b, 50));
    }
}
