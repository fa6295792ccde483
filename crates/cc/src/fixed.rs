//! A constant window: N packets in flight, always, whatever the path does — no pacing, no reaction
//! to delay or loss. Not a congestion controller anyone should deploy; it is the yardstick Indigo
//! needs (Yan et al., USENIX ATC 2018, §6): the oracle of a training path is the fixed window that
//! does best there (issue 19 §2 searches for it with this controller in the simulator), and "the
//! best fixed window" is the baseline a learned controller must beat.
//!
//! The window may be fractional (an oracle's search need not stop at whole packets); the driver
//! gets it rounded up, as Indigo's (indigo/mod.rs), so both mean the same by "a window of x".

use crate::params::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_MSS_BYTES};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FixedConfig {
    pub mss_bytes: u64,
    /// The window, packets (≥ 1).
    pub cwnd_packets: f64,
}

impl FixedConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let mss_bytes = p.u64_at_least("mss_bytes", 1, DEFAULT_MSS_BYTES)?;
        let Some(cwnd_packets) = p.optional_positive_f64("cwnd_packets")? else {
            return Err(p.error("give cwnd_packets=N (the window, packets)"));
        };
        if cwnd_packets < 1.0 {
            return Err(p.error(format!("cwnd_packets must be >= 1, got {cwnd_packets}")));
        }
        Ok(FixedConfig { mss_bytes, cwnd_packets })
    }
}

#[derive(Debug, Clone)]
pub struct Fixed {
    /// The window, bytes: the configured packets rounded up.
    cwnd_bytes: u64,
}

impl Fixed {
    pub fn new(config: FixedConfig) -> Self {
        Fixed { cwnd_bytes: config.cwnd_packets.ceil() as u64 * config.mss_bytes }
    }
}

impl CongestionControl for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn on_sent(&mut self, _e: &Sent) {}

    fn on_ack(&mut self, _e: &Acked) {}

    fn on_loss(&mut self, _e: &Lost) {}

    fn decision(&self) -> Decision {
        Decision { cwnd_bytes: Some(self.cwnd_bytes), pacing_rate_bps: None, wake_at_us: None }
    }
}
