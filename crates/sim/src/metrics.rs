//! Each flow's metrics, from the data direction, exactly as `pantheon analyze` defines them
//! (docs/analysis.md; python/pantheon/analysis/metrics.py; Yan et al., ATC 2018, §3.2):
//!
//! - throughput: bits delivered / (last delivery − first delivery), in bits/µs = Mbit/s; 0 with
//!   fewer than two deliveries or a span of zero;
//! - one-way delay of each delivered datagram (receive − send time), its 95th percentile by
//!   nearest rank (the ⌈0.95·n⌉-th smallest) and its mean, in ms;
//! - loss rate: 1 − bytes delivered / bytes sent; a datagram still in flight at the end never arrived;
//! - CE rate: the share of delivered datagrams that arrived marked CE (a queue's ECN signal); none
//!   for a flow that sent nothing ECN-capable.
//!
//! Sizes are the tunnel logs' (inner datagrams). A delivery is always matched to its send here
//! (the simulation hands over both times), so nothing is left out as the log reader must.
//!
//! On request (`pantheon-sim batch`'s `window_s`, docs/sim.md) the run is also cut into windows of
//! simulated time, [kW, (k+1)W) up to the run's end (the last one may be shorter), and each gets
//! its own throughput — bits of the datagrams delivered in it over its length, not over a delivery
//! span as above — and the p95 of their delays: what a ranking "within 10 % of the best in each
//! window" (ccBench's) needs.
//!
//! Memory. The delays are integer µs, and a percentile by nearest rank needs only how many times
//! each value occurred, so `Delays` keeps a count per distinct value: its size follows the distinct
//! delays — at most the spread between the smallest and the largest in µs plus one, in practice a
//! few thousand to some tens of thousands — and not the packets, as the list of every delay it
//! replaced did (8 bytes a datagram: 80 MB for 120 s of one flow at 1 Gbit/s, 400 MB for 600 s).
//! The p95 and the mean are the same numbers, bit for bit: the mean is the same integer sum divided
//! the same way, and the tests compare the p95 with a sort of every value. Measured on one 120 s
//! job of Cubic at 1 Gbit/s, 20 ms each way, a BDP (5 MB) buffer, 10 M datagrams: 84 MB peak
//! resident with the list, 7.9 MB with the counts.
//!
//! A hash map of counts, not a dense array over [min, max]: a flow of a few datagrams whose delays
//! spread over seconds (a bloated buffer) would make the array large where the list was small, and
//! a job of many flows pays that per flow; not a B-tree, whose ordered insert costs more per
//! datagram than a hash, where the order is needed once, at the end, for the distinct values alone.
//! The map hashes a delay with one multiplication (`DelayHasher`): SipHash's defence against chosen
//! keys is pointless for delays the simulation itself makes, and costs a run more than the counting
//! does. The job above took 2.66 s of CPU with the list, 2.71 s with these counts, 2.84 s with them
//! under SipHash (median of three each).
//!
//! The windows' numbers are those of one window at a time: deliveries come in time order (the
//! uplink's departures), so a window is closed, and its counts cleared, when the first delivery of
//! a later one arrives; 1 s windows cost the job above 4 % more CPU time and no more memory.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

use pantheon_link::Ecn;

use crate::observer::Observer;
use crate::simulation::DATA_INNER_BYTES;

/// One flow's numbers, as `pantheon-sim` prints them (FLOW_METRICS of docs/sim.md). A delay is
/// `None` when nothing was delivered (the CE rate too, and when nothing sent was ECN-capable), the
/// loss when nothing was sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowMetrics {
    pub throughput_mbps: f64,
    pub delay_p95_ms: Option<f64>,
    pub delay_mean_ms: Option<f64>,
    pub loss_rate: Option<f64>,
    pub ce_rate: Option<f64>,
    pub sent_packets: u64,
    pub delivered_packets: u64,
    /// Per window of the run, in time order, when the run was cut into windows (`Windows`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<Vec<Window>>,
}

/// One window's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Bits of the flow's datagrams delivered in the window over the window's length, Mbit/s.
    pub throughput_mbps: f64,
    /// The nearest-rank p95 of their one-way delays, ms; `None` when none was delivered.
    pub delay_p95_ms: Option<f64>,
}

/// Hashes a delay (a `u64`) with one multiplication by 2⁶⁴/φ (Fibonacci hashing, Knuth, TAOCP
/// vol. 3 §6.4), rotated so that the product's well-mixed high bits choose the bucket: the map's
/// index takes the hash's low bits, which for delays that are multiples of a power of two would
/// otherwise all be zero.
#[derive(Debug, Default, Clone, Copy)]
pub struct DelayHasher(u64);

const FIBONACCI: u64 = 0x9e37_79b9_7f4a_7c15;

impl Hasher for DelayHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(FIBONACCI);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0 ^ value).wrapping_mul(FIBONACCI);
    }

    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

/// One-way delays, µs, as a count per distinct value (the module's header says why).
#[derive(Debug, Clone, Default)]
pub struct Delays {
    counts: HashMap<u64, u64, BuildHasherDefault<DelayHasher>>,
    /// How many delays were added.
    packets: u64,
    /// Their sum, µs.
    sum_us: u64,
}

impl Delays {
    pub fn add(&mut self, delay_us: u64) {
        *self.counts.entry(delay_us).or_insert(0) += 1;
        self.packets += 1;
        self.sum_us += delay_us;
    }

    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// The sum of every delay added, µs.
    pub fn sum_us(&self) -> u64 {
        self.sum_us
    }

    /// How many distinct values are kept.
    pub fn distinct(&self) -> usize {
        self.counts.len()
    }

    /// The ⌈percent/100 · n⌉-th smallest delay (at least the first), as a sort of every delay
    /// would give it; `None` when there are none.
    pub fn nearest_rank(&self, percent: u64) -> Option<u64> {
        let rank = (percent * self.packets).div_ceil(100).max(1);
        let mut values: Vec<(u64, u64)> = self.counts.iter().map(|(&value, &count)| (value, count)).collect();
        values.sort_unstable();
        let mut at_or_below = 0;
        values.into_iter().find_map(|(value, count)| {
            at_or_below += count;
            (at_or_below >= rank).then_some(value)
        })
    }

    /// Forgets every delay, keeping the room.
    pub fn clear(&mut self) {
        self.counts.clear();
        self.packets = 0;
        self.sum_us = 0;
    }
}

/// The p95 of `delays` in ms.
fn p95_ms(delays: &Delays) -> Option<f64> {
    delays.nearest_rank(95).map(|d| d as f64 / 1000.0)
}

/// A flow's deliveries cut into windows of `window_us` from 0 to `runtime_us`.
#[derive(Debug, Clone)]
pub struct Windows {
    window_us: u64,
    runtime_us: u64,
    /// The windows before `current`, closed.
    closed: Vec<Window>,
    /// The window deliveries go into now, numbered from 0.
    current: u64,
    /// Bytes delivered in it.
    current_bytes: u64,
    /// Delays of the datagrams delivered in it.
    current_delays: Delays,
}

impl Windows {
    /// `window_us` > 0.
    pub fn new(window_us: u64, runtime_us: u64) -> Windows {
        Windows {
            window_us,
            runtime_us,
            closed: Vec::new(),
            current: 0,
            current_bytes: 0,
            current_delays: Delays::default(),
        }
    }

    /// How many windows cover the run.
    pub fn count(&self) -> u64 {
        self.runtime_us.div_ceil(self.window_us)
    }

    /// Window `k`'s numbers given what was delivered in it.
    fn window(&self, k: u64, bytes: u64, delays: &Delays) -> Window {
        let start_us = k * self.window_us;
        let length_us = (start_us + self.window_us).min(self.runtime_us) - start_us;
        Window { throughput_mbps: bytes as f64 * 8.0 / length_us as f64, delay_p95_ms: p95_ms(delays) }
    }

    /// A datagram of `bytes` arrived at `t_us` (no earlier than the one before) after `delay_us`.
    fn delivered(&mut self, bytes: u64, t_us: u64, delay_us: u64) {
        let k = (t_us / self.window_us).min(self.count() - 1);
        debug_assert!(k >= self.current, "deliveries come in time order");
        while self.current < k {
            let closed = self.window(self.current, self.current_bytes, &self.current_delays);
            self.closed.push(closed);
            self.current += 1;
            self.current_bytes = 0;
            self.current_delays.clear();
        }
        self.current_bytes += bytes;
        self.current_delays.add(delay_us);
    }

    /// Every window's numbers, those after the last delivery empty.
    fn finished(&self) -> Vec<Window> {
        let mut windows = self.closed.clone();
        windows.push(self.window(self.current, self.current_bytes, &self.current_delays));
        let empty = Delays::default();
        windows.extend((self.current + 1..self.count()).map(|k| self.window(k, 0, &empty)));
        windows
    }
}

/// What one flow's data did, as the run goes.
#[derive(Debug, Clone, Default)]
pub struct FlowTally {
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub delivered_bytes: u64,
    pub first_delivery_us: Option<u64>,
    pub last_delivery_us: u64,
    /// Datagrams sent ECN-capable.
    pub ect_packets: u64,
    /// Delivered datagrams that arrived marked CE.
    pub ce_packets: u64,
    /// One-way delay of every delivered datagram.
    pub delays: Delays,
    /// The same deliveries by window, when the run is cut into windows.
    pub windows: Option<Windows>,
}

impl FlowTally {
    /// A tally that also cuts the run into windows.
    pub fn in_windows(windows: Windows) -> FlowTally {
        FlowTally { windows: Some(windows), ..FlowTally::default() }
    }

    /// A datagram of `bytes` left; `ect`: ECN-capable.
    pub fn sent(&mut self, bytes: u64, ect: bool) {
        self.sent_packets += 1;
        self.ect_packets += u64::from(ect);
        self.sent_bytes += bytes;
    }

    /// A datagram of `bytes` arrived at `t_us` (no earlier than the one before) after `delay_us`;
    /// `ce`: marked CE.
    pub fn delivered(&mut self, bytes: u64, t_us: u64, delay_us: u64, ce: bool) {
        self.ce_packets += u64::from(ce);
        self.first_delivery_us.get_or_insert(t_us);
        self.last_delivery_us = t_us;
        self.delivered_bytes += bytes;
        self.delays.add(delay_us);
        if let Some(windows) = &mut self.windows {
            windows.delivered(bytes, t_us, delay_us);
        }
    }

    pub fn metrics(&self) -> FlowMetrics {
        let delivered_packets = self.delays.packets();
        let span_us = self.first_delivery_us.map_or(0, |first| self.last_delivery_us - first);
        let throughput_mbps = if delivered_packets >= 2 && span_us > 0 {
            self.delivered_bytes as f64 * 8.0 / span_us as f64
        } else {
            0.0
        };
        let sum_us = self.delays.sum_us();
        let delay_mean_ms = (delivered_packets > 0).then(|| sum_us as f64 / delivered_packets as f64 / 1000.0);
        FlowMetrics {
            throughput_mbps,
            delay_p95_ms: p95_ms(&self.delays),
            delay_mean_ms,
            loss_rate: (self.sent_bytes > 0).then(|| 1.0 - self.delivered_bytes as f64 / self.sent_bytes as f64),
            ce_rate: (delivered_packets > 0 && self.ect_packets > 0)
                .then(|| self.ce_packets as f64 / delivered_packets as f64),
            sent_packets: self.sent_packets,
            delivered_packets,
            windows: self.windows.as_ref().map(Windows::finished),
        }
    }
}

/// The observer that keeps every flow's tally.
pub struct Metrics {
    pub flows: Vec<FlowTally>,
}

impl Metrics {
    pub fn new(flows: usize) -> Metrics {
        Metrics { flows: vec![FlowTally::default(); flows] }
    }

    /// Tallies that also cut a run of `runtime_us` into windows of `window_us` (> 0).
    pub fn in_windows(flows: usize, window_us: u64, runtime_us: u64) -> Metrics {
        Metrics { flows: vec![FlowTally::in_windows(Windows::new(window_us, runtime_us)); flows] }
    }

    pub fn finish(self) -> Vec<FlowMetrics> {
        self.flows.iter().map(FlowTally::metrics).collect()
    }
}

impl Observer for Metrics {
    fn data_sent(&mut self, flow: usize, _uid: u64, _t_us: u64, ecn: Ecn) {
        self.flows[flow].sent(u64::from(DATA_INNER_BYTES), ecn.is_capable());
    }

    fn data_received(&mut self, flow: usize, _uid: u64, t_us: u64, sent_us: u64, ecn: Ecn) {
        self.flows[flow].delivered(u64::from(DATA_INNER_BYTES), t_us, t_us - sent_us, ecn == Ecn::Ce);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The textbook nearest rank: sorts every value.
    fn nearest_rank_by_sorting(values: &[u64], percent: u64) -> Option<u64> {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let rank = (percent * sorted.len() as u64).div_ceil(100).max(1) as usize;
        sorted.get(rank - 1).copied()
    }

    fn delays_of(values: &[u64]) -> Delays {
        let mut delays = Delays::default();
        values.iter().for_each(|&v| delays.add(v));
        delays
    }

    #[test]
    fn nearest_rank_is_the_textbook_one() {
        // n = 20: the 95th percentile is the 19th smallest, the median the 10th.
        let d = delays_of(&(1..=20).rev().collect::<Vec<u64>>());
        assert_eq!(d.nearest_rank(95), Some(19));
        assert_eq!(d.nearest_rank(50), Some(10));
        assert_eq!(delays_of(&[7]).nearest_rank(95), Some(7));
        assert_eq!(Delays::default().nearest_rank(95), None);
        // Repeated values: 3 × 5 µs and 1 × 9 µs; the p75 is the 3rd smallest, the p76 the 4th.
        let d = delays_of(&[9, 5, 5, 5]);
        assert_eq!((d.nearest_rank(75), d.nearest_rank(76), d.distinct()), (Some(5), Some(9), 2));
    }

    #[test]
    fn counts_give_the_sorts_percentiles_and_sum_on_random_delays() {
        // SplitMix64 (Steele, Lea & Flood, OOPSLA 2014): reproducible without a crate.
        let mut state = 0x5eed_u64;
        let mut next = move || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        for case in 0..400 {
            let n = (next() % 3000) as usize;
            // Narrow spreads (many repeats), a path's (tens of ms), and powers of two apart.
            let (base, spread, step) = match case % 4 {
                0 => (20_000, 7, 1),
                1 => (next() % 100_000, 1 + next() % 60_000, 1),
                2 => (0, 1 + next() % 1000, 1 << 12),
                _ => (next() % (1 << 40), 1 + next() % (1 << 30), 1),
            };
            let values: Vec<u64> = (0..n).map(|_| base + (next() % spread) * step).collect();
            let delays = delays_of(&values);
            assert_eq!(delays.sum_us(), values.iter().sum::<u64>());
            assert_eq!(delays.packets(), n as u64);
            for percent in [1, 5, 50, 94, 95, 96, 99, 100] {
                assert_eq!(delays.nearest_rank(percent), nearest_rank_by_sorting(&values, percent), "case {case}");
            }
        }
    }

    #[test]
    fn metrics_of_a_small_flow_by_hand() {
        let mut t = FlowTally::default();
        for _ in 0..4 {
            t.sent(1464, true);
        }
        // Three of four delivered at 10, 11, 12 ms with delays 20, 21, 30 ms; the second marked CE.
        t.delivered(1464, 10_000, 20_000, false);
        t.delivered(1464, 11_000, 21_000, true);
        t.delivered(1464, 12_000, 30_000, false);
        let m = t.metrics();
        assert_eq!(m.throughput_mbps, 3.0 * 1464.0 * 8.0 / 2000.0);
        assert_eq!(m.delay_p95_ms, Some(30.0));
        assert!((m.delay_mean_ms.unwrap() - 71.0 / 3.0).abs() < 1e-12);
        assert_eq!(m.loss_rate, Some(0.25));
        assert_eq!(m.ce_rate, Some(1.0 / 3.0));
        assert_eq!((m.sent_packets, m.delivered_packets), (4, 3));
        assert_eq!(m.windows, None);
    }

    #[test]
    fn a_silent_flow_has_no_delays() {
        let m = FlowTally::default().metrics();
        assert_eq!(
            (m.throughput_mbps, m.delay_p95_ms, m.delay_mean_ms, m.loss_rate, m.ce_rate),
            (0.0, None, None, None, None)
        );
    }

    #[test]
    fn windows_of_a_small_flow_by_hand() {
        // A run of 2.5 s in windows of 1 s: [0, 1), [1, 2) and the partial [2, 2.5).
        let mut t = FlowTally::in_windows(Windows::new(1_000_000, 2_500_000));
        // Two datagrams in the first window (delays 20 and 40 ms), none in the second, three in
        // the last (delays 10, 30, 50 ms), the last one just before the end.
        for (t_us, delay_us) in [(100_000, 20_000), (999_999, 40_000), (2_000_000, 10_000), (2_100_000, 50_000)] {
            t.delivered(1000, t_us, delay_us, false);
        }
        t.delivered(1000, 2_499_999, 30_000, false);
        let windows = t.metrics().windows.unwrap();
        let expected = [(2.0 * 8000.0 / 1e6, Some(40.0)), (0.0, None), (3.0 * 8000.0 / 500_000.0, Some(50.0))];
        let got: Vec<(f64, Option<f64>)> = windows.iter().map(|w| (w.throughput_mbps, w.delay_p95_ms)).collect();
        assert_eq!(got, expected);
        // The windows' bits are the flow's delivered bits.
        let lengths_us = [1e6, 1e6, 5e5];
        let bits: f64 = windows.iter().zip(lengths_us).map(|(w, l)| w.throughput_mbps * l).sum();
        assert_eq!(bits, t.delivered_bytes as f64 * 8.0);
    }

    #[test]
    fn a_flow_that_delivers_nothing_has_every_window_empty() {
        let windows = FlowTally::in_windows(Windows::new(300, 1000)).metrics().windows.unwrap();
        assert_eq!(windows, vec![Window { throughput_mbps: 0.0, delay_p95_ms: None }; 4]);
    }
}
