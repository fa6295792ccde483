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
    /// One-way delay of every delivered datagram, µs, in delivery order.
    pub delays_us: Vec<u64>,
}

/// The ⌈percent/100 · n⌉-th smallest of `values` (at least the first); reorders them.
pub fn nearest_rank(values: &mut [u64], percent: u64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let rank = (percent * values.len() as u64).div_ceil(100).max(1) as usize;
    Some(*values.select_nth_unstable(rank - 1).1)
}

impl FlowTally {
    /// A datagram of `bytes` left; `ect`: ECN-capable.
    pub fn sent(&mut self, bytes: u64, ect: bool) {
        self.sent_packets += 1;
        self.ect_packets += u64::from(ect);
        self.sent_bytes += bytes;
    }

    /// A datagram of `bytes` arrived at `t_us` after `delay_us`; `ce`: marked CE.
    pub fn delivered(&mut self, bytes: u64, t_us: u64, delay_us: u64, ce: bool) {
        self.ce_packets += u64::from(ce);
        self.first_delivery_us.get_or_insert(t_us);
        self.last_delivery_us = t_us;
        self.delivered_bytes += bytes;
        self.delays_us.push(delay_us);
    }

    /// The metrics; reorders the delays.
    pub fn metrics(&mut self) -> FlowMetrics {
        let delivered_packets = self.delays_us.len() as u64;
        let span_us = self.first_delivery_us.map_or(0, |first| self.last_delivery_us - first);
        let throughput_mbps = if delivered_packets >= 2 && span_us > 0 {
            self.delivered_bytes as f64 * 8.0 / span_us as f64
        } else {
            0.0
        };
        let sum_us: u64 = self.delays_us.iter().sum();
        let delay_mean_ms = (delivered_packets > 0).then(|| sum_us as f64 / delivered_packets as f64 / 1000.0);
        FlowMetrics {
            throughput_mbps,
            delay_p95_ms: nearest_rank(&mut self.delays_us, 95).map(|d| d as f64 / 1000.0),
            delay_mean_ms,
            loss_rate: (self.sent_bytes > 0).then(|| 1.0 - self.delivered_bytes as f64 / self.sent_bytes as f64),
            ce_rate: (delivered_packets > 0 && self.ect_packets > 0)
                .then(|| self.ce_packets as f64 / delivered_packets as f64),
            sent_packets: self.sent_packets,
            delivered_packets,
        }
    }
}

/// The observer that keeps every flow's tally.
pub struct Metrics {
    pub flows: Vec<FlowTally>,
}

impl Metrics {
    /// Tallies for `flows` flows, each with room for `expected_packets` delays, so that a run
    /// near its expected size never grows them.
    pub fn new(flows: usize, expected_packets: usize) -> Metrics {
        let tally = || FlowTally { delays_us: Vec::with_capacity(expected_packets), ..FlowTally::default() };
        Metrics { flows: (0..flows).map(|_| tally()).collect() }
    }

    pub fn finish(mut self) -> Vec<FlowMetrics> {
        self.flows.iter_mut().map(FlowTally::metrics).collect()
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

    #[test]
    fn nearest_rank_is_the_textbook_one() {
        // n = 20: the 95th percentile is the 19th smallest, the median the 10th.
        let mut v: Vec<u64> = (1..=20).rev().collect();
        assert_eq!(nearest_rank(&mut v, 95), Some(19));
        assert_eq!(nearest_rank(&mut v, 50), Some(10));
        assert_eq!(nearest_rank(&mut [7], 95), Some(7));
        assert_eq!(nearest_rank(&mut [], 95), None);
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
    }

    #[test]
    fn a_silent_flow_has_no_delays() {
        let m = FlowTally::default().metrics();
        assert_eq!(
            (m.throughput_mbps, m.delay_p95_ms, m.delay_mean_ms, m.loss_rate, m.ce_rate),
            (0.0, None, None, None, None)
        );
    }
}
