//! The controller a gym environment runs: Indigo's without its network. It observes exactly
//! what Indigo observes — `pantheon_cc::indigo::Features`, the same code, fed the same sends,
//! acknowledgements and losses — and sends under a window of packets that the agent outside sets
//! between decision intervals (gym.rs) instead of an LSTM. Like Indigo it ignores loss
//! (Yan et al., ATC 2018 §6; the released sender has no loss signal) and hands the driver its
//! window rounded up to whole packets, without pacing.
//!
//! The flow owns its controller (`pantheon_cc::flow::Flow` takes a boxed one), so the agent
//! reaches the window and the features through a shared `Steer`. The window is an atomic, read
//! without a lock on every send decision (a mutex there was 13% of a 100 Mbit/s episode's time);
//! the features are behind a mutex, never contended — a gym process steps its environments on one
//! thread — taken once per send, acknowledgement and loss.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pantheon_cc::flow::datagram::PACKET_BYTES;
use pantheon_cc::indigo::Features;
use pantheon_cc::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_INITIAL_CWND_PACKETS};

#[derive(Debug)]
struct Shared {
    /// Indigo's observations since the last decision (state.rs).
    features: Mutex<Features>,
    /// The window, packets, as `f64::to_bits` (fractional, as Indigo's: ÷2 makes it so).
    cwnd_packets_bits: AtomicU64,
}

/// The agent's handle on a `Steered` controller.
#[derive(Debug, Clone)]
pub struct Steer(Arc<Shared>);

impl Steer {
    pub fn features(&self) -> MutexGuard<'_, Features> {
        self.0.features.lock().expect("nothing panics holding the features")
    }

    pub fn cwnd_packets(&self) -> f64 {
        f64::from_bits(self.0.cwnd_packets_bits.load(Ordering::Relaxed))
    }

    pub fn set_cwnd_packets(&self, cwnd_packets: f64) {
        self.0.cwnd_packets_bits.store(cwnd_packets.to_bits(), Ordering::Relaxed);
    }
}

pub struct Steered(Steer);

/// A controller at Indigo's initial window (10 packets, RFC 6928's and the released code's), and
/// the handle that steers it.
pub fn steered() -> (Box<dyn CongestionControl + Send>, Steer) {
    let shared = Shared {
        features: Mutex::new(Features::new()),
        cwnd_packets_bits: AtomicU64::new((DEFAULT_INITIAL_CWND_PACKETS as f64).to_bits()),
    };
    let steer = Steer(Arc::new(shared));
    (Box::new(Steered(steer.clone())), steer)
}

impl CongestionControl for Steered {
    fn name(&self) -> &'static str {
        "gym"
    }

    fn on_sent(&mut self, e: &Sent) {
        self.0.features().on_sent(e.seq, e.bytes);
    }

    fn on_ack(&mut self, e: &Acked) {
        self.0.features().on_ack(e);
    }

    fn on_loss(&mut self, e: &Lost) {
        self.0.features().on_loss(e.seq);
    }

    fn decision(&self) -> Decision {
        let packets = self.0.cwnd_packets().ceil() as u64;
        Decision { cwnd_bytes: Some(packets * PACKET_BYTES), pacing_rate_bps: None, wake_at_us: None }
    }
}
