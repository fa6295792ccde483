//! The controller a gym environment runs: Indigo's without its network. It observes exactly
//! what Indigo observes — `pantheon_cc::indigo::Features`, the same code, fed the same sends,
//! acknowledgements and losses — and sends under a window of packets that the agent outside sets
//! between decision intervals (gym.rs) instead of an LSTM. Like Indigo it ignores loss
//! (Yan et al., ATC 2018 §6; the released sender has no loss signal) and hands the driver its
//! window rounded up to whole packets, without pacing.
//!
//! The flow owns its controller (`pantheon_cc::flow::Flow` takes a boxed one), so the agent's
//! side reaches the window and the features through a shared `Steering`. Its lock is never
//! contended — a gym process steps its environments on one thread — and costs an uncontended
//! atomic pair per event.

use std::sync::{Arc, Mutex, MutexGuard};

use pantheon_cc::flow::datagram::PACKET_BYTES;
use pantheon_cc::indigo::Features;
use pantheon_cc::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_INITIAL_CWND_PACKETS};

/// What the agent reads and sets.
#[derive(Debug)]
pub struct Steering {
    /// Indigo's observations since the last decision (state.rs).
    pub features: Features,
    /// The window, packets (may be fractional, as Indigo's: ÷2 makes it so).
    pub cwnd_packets: f64,
}

/// The agent's handle on a `Steered` controller.
#[derive(Debug, Clone)]
pub struct Steer(Arc<Mutex<Steering>>);

impl Steer {
    pub fn lock(&self) -> MutexGuard<'_, Steering> {
        self.0.lock().expect("nothing panics holding the steering")
    }
}

pub struct Steered(Steer);

/// A controller at Indigo's initial window (10 packets, RFC 6928's and the released code's), and
/// the handle that steers it.
pub fn steered() -> (Box<dyn CongestionControl + Send>, Steer) {
    let steering = Steering { features: Features::new(), cwnd_packets: DEFAULT_INITIAL_CWND_PACKETS as f64 };
    let steer = Steer(Arc::new(Mutex::new(steering)));
    (Box::new(Steered(steer.clone())), steer)
}

impl CongestionControl for Steered {
    fn name(&self) -> &'static str {
        "gym"
    }

    fn on_sent(&mut self, e: &Sent) {
        self.0.lock().features.on_sent(e.seq, e.bytes);
    }

    fn on_ack(&mut self, e: &Acked) {
        self.0.lock().features.on_ack(e);
    }

    fn on_loss(&mut self, e: &Lost) {
        self.0.lock().features.on_loss(e.seq);
    }

    fn decision(&self) -> Decision {
        let packets = self.0.lock().cwnd_packets.ceil() as u64;
        Decision { cwnd_bytes: Some(packets * PACKET_BYTES), pacing_rate_bps: None, wake_at_us: None }
    }
}
