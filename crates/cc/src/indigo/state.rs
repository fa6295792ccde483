//! What Indigo observes: per acknowledgement, three exponentially weighted moving averages
//! (α = 1/8) — queueing delay, delivery rate, sending rate — and at each decision those three, the
//! window and the previous action, scaled into the network's 9 inputs (Yan et al., USENIX ATC
//! 2018, §6 names the quantities; the units, the scales and when the averages restart are the
//! released code's, StanfordSNR/indigo env/sender.py and helpers/helpers.py):
//!
//! - queueing delay = RTT − min RTT, in ms;
//! - delivery rate = bytes delivered between this packet's send and its acknowledgement, over
//!   the time since the delivered count the packet was sent with last grew (at least 1 ms), in
//!   Mbit/s (BBR's estimate, draft-cheng-iccrg-delivery-rate-estimation, without §3.3's use of
//!   the send interval);
//! - sending rate = bytes sent from this packet's send (itself included) to its
//!   acknowledgement, over its RTT (at least 1 ms), in Mbit/s (Vegas's "actual" rate);
//! - each average starts at its first sample after a decision and is restarted by each decision,
//!   so a decision sees the last step's ~10 ms only;
//! - inputs: delay/200, delivery rate/200, sending rate/200, window (packets)/5000, then the
//!   previous action one-hot (5 values).

use std::collections::VecDeque;

use super::ACTIONS;
use crate::Acked;

/// The network's inputs per step: 4 measurements and the previous action one-hot.
pub const INPUTS: usize = 4 + ACTIONS;

/// Weight of a new sample in each average.
const EWMA_GAIN: f64 = 0.125;
/// The released code's input scales: ms, Mbit/s, Mbit/s, packets.
const DELAY_SCALE_MS: f64 = 200.0;
const RATE_SCALE_MBPS: f64 = 200.0;
const CWND_SCALE_PACKETS: f64 = 5000.0;

#[derive(Debug, Clone)]
pub struct Features {
    /// Average queueing delay since the last decision, ms; `None` before its first sample.
    pub delay_ms: Option<f64>,
    /// Average delivery rate since the last decision, Mbit/s.
    pub delivery_rate_mbps: Option<f64>,
    /// Average sending rate since the last decision, Mbit/s.
    pub send_rate_mbps: Option<f64>,
    /// Bytes sent over the flow's life.
    sent_bytes: u64,
    /// (seq, `sent_bytes` before that packet left) of the packets in flight, oldest first: the
    /// sending rate's start point. Allocated once; grows only when the flight reaches a new
    /// maximum.
    in_flight: VecDeque<(u64, u64)>,
}

impl Features {
    pub fn new() -> Self {
        Features {
            delay_ms: None,
            delivery_rate_mbps: None,
            send_rate_mbps: None,
            sent_bytes: 0,
            in_flight: VecDeque::with_capacity(4096),
        }
    }

    pub fn on_sent(&mut self, seq: u64, bytes: u64) {
        self.in_flight.push_back((seq, self.sent_bytes));
        self.sent_bytes += bytes;
    }

    /// Forgets packets up to `seq` (an acknowledgement or a loss of `seq`), returning
    /// `sent_bytes` before `seq` left when it was in the book.
    fn forget_up_to(&mut self, seq: u64) -> Option<u64> {
        while let Some(&(s, before)) = self.in_flight.front() {
            if s > seq {
                break;
            }
            self.in_flight.pop_front();
            if s == seq {
                return Some(before);
            }
        }
        None
    }

    pub fn on_loss(&mut self, seq: u64) {
        self.forget_up_to(seq);
    }

    pub fn on_ack(&mut self, e: &Acked) {
        let delay_ms = e.rtt_us.saturating_sub(e.min_rtt_us) as f64 / 1e3;
        ewma(&mut self.delay_ms, delay_ms);
        let delivered_bytes = e.delivered_bytes - e.delivered_bytes_at_send;
        let delivery_ms = (e.now_us.saturating_sub(e.delivered_time_at_send_us) as f64 / 1e3).max(1.0);
        ewma(&mut self.delivery_rate_mbps, mbps(delivered_bytes, delivery_ms));
        // A late acknowledgement of a packet already forgotten (reordered behind a later one)
        // gives no sending-rate sample.
        if let Some(before) = self.forget_up_to(e.seq) {
            let rtt_ms = (e.rtt_us as f64 / 1e3).max(1.0);
            ewma(&mut self.send_rate_mbps, mbps(self.sent_bytes - before, rtt_ms));
        }
    }

    /// The network's input for a decision now, with window `cwnd_packets` and previous action
    /// `prev_action`; restarts the averages. A measurement with no sample since the last
    /// decision reads 0.
    pub fn take_input(&mut self, cwnd_packets: f64, prev_action: usize) -> [f32; INPUTS] {
        let mut x = [0.0f32; INPUTS];
        x[0] = (self.delay_ms.take().unwrap_or(0.0) / DELAY_SCALE_MS) as f32;
        x[1] = (self.delivery_rate_mbps.take().unwrap_or(0.0) / RATE_SCALE_MBPS) as f32;
        x[2] = (self.send_rate_mbps.take().unwrap_or(0.0) / RATE_SCALE_MBPS) as f32;
        x[3] = (cwnd_packets / CWND_SCALE_PACKETS) as f32;
        x[4 + prev_action] = 1.0;
        x
    }
}

impl Default for Features {
    fn default() -> Self {
        Self::new()
    }
}

fn ewma(average: &mut Option<f64>, sample: f64) {
    *average = Some(match *average {
        None => sample,
        Some(a) => (1.0 - EWMA_GAIN) * a + EWMA_GAIN * sample,
    });
}

fn mbps(bytes: u64, interval_ms: f64) -> f64 {
    bytes as f64 * 8.0 / 1e3 / interval_ms
}
