//! The parameters of one direction of an emulated path: the Pantheon paper's five link
//! parameters (§4: rate or delivery process, propagation delay, queue size, loss rate) plus the
//! pathological policer and the queue's discipline (DropTail or an AQM, queue/). Drivers validate user input into this type; `Path::new` builds from it.

use crate::queue::{Aqm, QueueLimit};
use crate::timing::Timing;
use crate::trace::Trace;

#[derive(Debug, Clone, PartialEq)]
pub struct PathConfig {
    /// One-way propagation delay in microseconds.
    pub delay_us: u64,
    /// Probability that a packet is lost, in [0, 1].
    pub loss_probability: f64,
    /// The most the queue holds (`Aqm::default_limit` when the command line names none).
    pub queue: QueueLimit,
    /// The queue's discipline: DropTail (the paper's) or an AQM.
    pub aqm: Aqm,
    pub delivery: Delivery,
    pub policer: Option<PolicerConfig>,
    /// Microsecond (ours) or Mahimahi's millisecond clock (`timing.rs`).
    pub timing: Timing,
}

/// When the link may send.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// No rate limit: packets leave the moment they reach the link.
    Unlimited,
    /// Evenly spaced 1500-byte opportunities at this rate.
    Constant { rate_mbps: f64 },
    /// A Mahimahi trace, repeated.
    Trace(Trace),
    /// Poisson-distributed opportunities at this mean rate.
    Poisson { rate_mbps: f64 },
}

impl Delivery {
    /// Mean rate offered by the schedule, in Mbit/s (`None` for unlimited).
    pub fn mean_rate_mbps(&self) -> Option<f64> {
        match self {
            Delivery::Unlimited => None,
            Delivery::Constant { rate_mbps } | Delivery::Poisson { rate_mbps } => Some(*rate_mbps),
            Delivery::Trace(trace) => Some(trace.mean_rate_mbps()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PolicerConfig {
    /// Token fill rate in Mbit/s.
    pub rate_mbps: f64,
    /// Bucket depth in bytes.
    pub burst_bytes: u64,
}
