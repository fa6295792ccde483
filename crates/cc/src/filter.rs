//! Windowed extrema of a signal, the estimators the delay- and model-based algorithms are built
//! on: Copa's RTTstanding (the minimum RTT over the last srtt/2, NSDI 2018 §2.1) and RTTmin
//! (minimum over about 10 s), LEDBAT's base delay (minimum of per-minute minima over
//! BASE_HISTORY minutes, RFC 6817 §2.4.2), BBR's BtlBw (maximum delivery rate over the last 10
//! round trips, draft-cardwell-iccrg-bbr-congestion-control-00 §4.1.1).
//!
//! Two shapes, both free of per-sample allocation once warm:
//! - `SlidingMin` is exact over a time window: a monotone queue of samples that can still become
//!   the minimum. Its memory grows to the number of samples in one window, then stays.
//! - `Buckets` keeps one extremum per bucket (a minute, a second, a round trip) for the last N
//!   buckets, in a fixed array: the window is exact to one bucket, as RFC 6817 specifies.

use std::collections::VecDeque;

/// Exact minimum of the samples of the last `window_us`.
#[derive(Debug, Clone, Default)]
pub struct SlidingMin {
    /// (time, value), times increasing and values strictly increasing: every entry is the minimum
    /// of the samples from its time on.
    candidates: VecDeque<(u64, u64)>,
}

impl SlidingMin {
    pub fn new() -> Self {
        SlidingMin { candidates: VecDeque::with_capacity(64) }
    }

    /// Adds a sample at `now_us` and forgets samples older than `window_us`. Returns the minimum.
    pub fn update(&mut self, now_us: u64, value: u64, window_us: u64) -> u64 {
        while self.candidates.back().is_some_and(|&(_, v)| v >= value) {
            self.candidates.pop_back();
        }
        self.candidates.push_back((now_us, value));
        let oldest_us = now_us.saturating_sub(window_us);
        // The newest sample is always kept, so the window never empties.
        while self.candidates.front().is_some_and(|&(t, _)| t < oldest_us) {
            self.candidates.pop_front();
        }
        self.candidates.front().expect("the newest sample is kept").1
    }
}

/// Which extremum a `Buckets` keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extremum {
    Min,
    Max,
}

/// The extremum over the last `N` buckets, where a bucket is any increasing key (minute number,
/// second number, round-trip count). Values are i64 so that clock-offset-laden one-way delays fit.
#[derive(Debug, Clone)]
pub struct Buckets<const N: usize> {
    kind: Extremum,
    /// Extremum per bucket, indexed by key mod N; `None` for a bucket without samples.
    values: [Option<i64>; N],
    /// Key of the newest bucket seen.
    newest_key: Option<u64>,
}

impl<const N: usize> Buckets<N> {
    pub fn new(kind: Extremum) -> Self {
        Buckets { kind, values: [None; N], newest_key: None }
    }

    /// Adds a sample in bucket `key` (keys never decrease) and returns the extremum over buckets
    /// `key - N + 1 ..= key`.
    pub fn update(&mut self, key: u64, value: i64) -> i64 {
        let newest = self.newest_key.unwrap_or(key);
        // Clear the buckets skipped since the last sample: they fell out of the window or saw
        // nothing.
        if key > newest {
            let stale = (key - newest).min(N as u64);
            for k in 0..stale {
                self.values[((key - k) % N as u64) as usize] = None;
            }
        }
        self.newest_key = Some(key.max(newest));
        let slot = &mut self.values[(key % N as u64) as usize];
        *slot = Some(match (*slot, self.kind) {
            (None, _) => value,
            (Some(v), Extremum::Min) => v.min(value),
            (Some(v), Extremum::Max) => v.max(value),
        });
        self.get().expect("just set")
    }

    /// The extremum over the window, `None` before the first sample.
    pub fn get(&self) -> Option<i64> {
        let present = self.values.iter().flatten().copied();
        match self.kind {
            Extremum::Min => present.min(),
            Extremum::Max => present.max(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sliding_min_forgets_old_samples() {
        let mut f = SlidingMin::new();
        assert_eq!(f.update(0, 50, 100), 50);
        assert_eq!(f.update(10, 70, 100), 50);
        assert_eq!(f.update(100, 80, 100), 50);
        // At 111 the sample of time 0 and 10 are older than 100 us: 80 is the minimum.
        assert_eq!(f.update(111, 90, 100), 80);
        assert_eq!(f.update(250, 95, 100), 95);
        assert_eq!(f.update(251, 10, 100), 10);
    }

    #[test]
    fn buckets_keep_the_last_n() {
        let mut f: Buckets<3> = Buckets::new(Extremum::Min);
        assert_eq!(f.get(), None);
        assert_eq!(f.update(0, 5), 5);
        assert_eq!(f.update(1, 7), 5);
        assert_eq!(f.update(2, 9), 5);
        // Bucket 0 leaves the window when bucket 3 opens.
        assert_eq!(f.update(3, 8), 7);
        // A jump past the whole window forgets everything before it.
        assert_eq!(f.update(10, 20), 20);
        let mut g: Buckets<2> = Buckets::new(Extremum::Max);
        g.update(4, 3);
        g.update(4, 6);
        assert_eq!(g.update(5, 1), 6);
        assert_eq!(g.update(6, 2), 2);
    }
}
