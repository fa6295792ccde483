//! Verus's delay profile: the curve from sending window (packets) to delay (ms) that a Verus
//! sender learns online and inverts to pick its next window (Zaki et al., "Adaptive Congestion
//! Control for Unpredictable Cellular Networks", SIGCOMM 2015, §3.2 "delay profile learner").
//!
//! Samples: each acknowledged packet gives the pair (window when it was sent, its delay). Per
//! whole-packet window the profile keeps an exponentially weighted moving average of the delays
//! seen (weight 0.875 on the history, the paper's delay smoothing), so old samples fade as the
//! channel changes. The curve used for decisions is rebuilt from those bins periodically (the
//! paper: every second) and held fixed between rebuilds, so one epoch's noise cannot bend it.
//!
//! Deviation (curve shape): the paper fits a cubic smoothing spline through the samples. Here the
//! curve is a monotone piecewise-linear interpolation over the windows that have samples:
//! - monotone: each bin's delay is raised to the largest delay of any smaller window (a running
//!   maximum). The physics of a queue says more data in flight cannot mean less delay, and
//!   Verus needs an inverse (delay → window); a spline through noisy samples can wiggle and make
//!   that inverse ambiguous. The running maximum is the cheapest monotone fit that never
//!   understates a measured delay.
//! - piecewise linear between sampled windows, which is what a spline reduces to between dense
//!   samples (one bin per packet of window), without an allocation or a linear solve.
//! - below the smallest sampled window the curve is flat at its delay; above the largest it is
//!   extrapolated as delay ∝ window (d_last · w / w_last): what a saturated link does (the
//!   queueing delay of w packets on a link of rate C is w/C), so a window beyond any yet tried
//!   is predicted to cost proportionally more delay, and the next rebuild corrects it.

/// The largest window the profile can describe, packets (24 MB of 1500-byte packets).
pub const MAX_WINDOW_PACKETS: usize = 16_384;

/// Weight of the history in each bin's moving average (the paper's EWMA, §3.1).
const HISTORY_WEIGHT: f64 = 0.875;

#[derive(Debug, Clone)]
pub struct DelayProfile {
    /// Smoothed delay per window, ms, at index = window in packets; NaN: no sample yet.
    sample_ms: Box<[f64]>,
    /// The curve in use, ms, at index = window in packets (index 0 unused); valid once built.
    curve_ms: Box<[f64]>,
    built: bool,
    /// Largest window with a sample.
    max_sampled: usize,
}

impl Default for DelayProfile {
    fn default() -> Self {
        Self::new()
    }
}

impl DelayProfile {
    pub fn new() -> Self {
        DelayProfile {
            sample_ms: vec![f64::NAN; MAX_WINDOW_PACKETS + 1].into_boxed_slice(),
            curve_ms: vec![0.0; MAX_WINDOW_PACKETS + 1].into_boxed_slice(),
            built: false,
            max_sampled: 0,
        }
    }

    /// Adds one (window, delay) sample.
    pub fn record(&mut self, window_packets: usize, delay_ms: f64) {
        let w = window_packets.clamp(1, MAX_WINDOW_PACKETS);
        let bin = &mut self.sample_ms[w];
        *bin = if bin.is_nan() { delay_ms } else { HISTORY_WEIGHT * *bin + (1.0 - HISTORY_WEIGHT) * delay_ms };
        self.max_sampled = self.max_sampled.max(w);
    }

    pub fn is_built(&self) -> bool {
        self.built
    }

    /// Rebuilds the curve from the samples (see the header). Without any sample the curve stays
    /// as it was.
    pub fn rebuild(&mut self) {
        let Some(first) = (1..=self.max_sampled).find(|&w| !self.sample_ms[w].is_nan()) else { return };
        let mut running_max = self.sample_ms[first];
        let (mut last_w, mut last_d) = (first, running_max);
        for w in 1..=first {
            self.curve_ms[w] = running_max;
        }
        for w in first + 1..=self.max_sampled {
            let sample = self.sample_ms[w];
            if sample.is_nan() {
                continue;
            }
            running_max = running_max.max(sample);
            for between in last_w + 1..=w {
                let t = (between - last_w) as f64 / (w - last_w) as f64;
                self.curve_ms[between] = last_d + t * (running_max - last_d);
            }
            (last_w, last_d) = (w, running_max);
        }
        for w in last_w + 1..=MAX_WINDOW_PACKETS {
            self.curve_ms[w] = last_d * w as f64 / last_w as f64;
        }
        self.built = true;
    }

    /// The curve's delay for a window, ms.
    pub fn delay_ms(&self, window_packets: usize) -> f64 {
        self.curve_ms[window_packets.clamp(1, MAX_WINDOW_PACKETS)]
    }

    /// The largest window whose delay on the curve is at most `delay_ms` (at least 1).
    pub fn window_for(&self, delay_ms: f64) -> usize {
        // The curve is non-decreasing: binary search for the last window at or below the delay.
        let (mut lo, mut hi) = (1usize, MAX_WINDOW_PACKETS);
        if self.curve_ms[1] > delay_ms {
            return 1;
        }
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if self.curve_ms[mid] <= delay_ms {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 10-packet pipe with a 40 ms base delay: flat up to 10 packets, then 4 ms per packet.
    fn link_profile() -> DelayProfile {
        let mut p = DelayProfile::new();
        for (w, d) in [(2, 40.0), (6, 40.0), (10, 40.0), (20, 80.0)] {
            p.record(w, d);
        }
        p.rebuild();
        p
    }

    #[test]
    fn interpolates_linearly_between_sampled_windows() {
        let p = link_profile();
        assert_eq!(p.delay_ms(1), 40.0);
        assert_eq!(p.delay_ms(8), 40.0);
        assert_eq!(p.delay_ms(15), 60.0);
        assert_eq!(p.delay_ms(20), 80.0);
        // Beyond the last sample: delay ∝ window, 80 ms · 30/20.
        assert_eq!(p.delay_ms(30), 120.0);
    }

    #[test]
    fn inverts_to_the_largest_window_within_a_delay() {
        let p = link_profile();
        assert_eq!(p.window_for(40.0), 10);
        assert_eq!(p.window_for(59.9), 14);
        assert_eq!(p.window_for(60.0), 15);
        assert_eq!(p.window_for(100.0), 25);
        assert_eq!(p.window_for(10.0), 1);
    }

    #[test]
    fn a_dip_in_the_samples_is_flattened_to_keep_the_curve_monotone() {
        let mut p = link_profile();
        // A noisy low delay at 16 packets would make the inverse ambiguous.
        p.record(16, 30.0);
        p.rebuild();
        // 30 ms is raised to the 40 ms of the smaller windows; the segment to 20 packets now
        // runs from (16, 40) to (20, 80).
        assert_eq!(p.delay_ms(16), 40.0);
        assert_eq!(p.delay_ms(18), 60.0);
        for w in 1..40 {
            assert!(p.delay_ms(w + 1) >= p.delay_ms(w), "at {w}");
        }
    }

    #[test]
    fn bins_average_their_samples_with_the_paper_weight() {
        let mut p = DelayProfile::new();
        p.record(5, 40.0);
        p.record(5, 48.0);
        p.rebuild();
        // 0.875·40 + 0.125·48 = 41.
        assert_eq!(p.delay_ms(5), 41.0);
    }
}
