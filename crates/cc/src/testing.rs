//! Test-only support for the unit tests of every algorithm:
//!
//! - `ack` and `loss`: the events the bookkeeping would hand a controller, built by hand;
//! - `FixedPath`: an exact fixed path — a bottleneck serving one 1500-byte packet every
//!   `service_us` from an infinite FIFO, behind a propagation RTT — driven by the real
//!   `SentPackets` bookkeeping and the controller's decisions, in fake time. On an empty path a
//!   packet's RTT is exactly `base_rtt_us`; each packet queued ahead adds `service_us`, so queue
//!   lengths can be read off RTTs by hand. (The closed-loop tests in tests/ use the real link
//!   model instead, tests/support/link_loop.rs.)
//! - `percentile`: the one percentile definition of the Rust tests, the same file the
//!   integration tests use (tests/support/percentile.rs);
//! - `buildable`: a spec that builds for each registered name (tests/support/known_specs.rs).

use std::collections::VecDeque;

use crate::{Acked, CongestionControl, Lost, SentPackets};

#[path = "../tests/support/percentile.rs"]
mod percentile;
pub(crate) use percentile::percentile;

#[path = "../tests/support/known_specs.rs"]
mod known_specs;
pub(crate) use known_specs::{buildable, indigo_fixture};

pub(crate) const MSS: u64 = 1500;

/// An acknowledgement of packet `seq` sent at `sent_us`, as the bookkeeping would report it.
pub(crate) fn ack(now_us: u64, seq: u64, sent_us: u64, bytes: u64) -> Acked {
    let rtt_us = now_us - sent_us;
    Acked {
        now_us,
        seq,
        bytes,
        sent_us,
        peer_recv_us: sent_us + rtt_us / 2,
        rtt_us,
        srtt_us: rtt_us,
        min_rtt_us: rtt_us,
        delivered_bytes: (seq + 1) * bytes,
        delivered_bytes_at_send: 0,
        delivered_time_at_send_us: 0,
        first_sent_time_at_send_us: 0,
        inflight_bytes: 0,
        app_limited: false,
    }
}

/// The loss of 1500-byte packet `seq` sent at `sent_us`, declared at `now_us`.
pub(crate) fn loss(now_us: u64, seq: u64, sent_us: u64) -> Lost {
    Lost { now_us, seq, bytes: 1500, sent_us, inflight_bytes: 0 }
}

pub(crate) struct FixedPath {
    pub service_us: u64,
    pub base_rtt_us: u64,
    /// The propagation RTT grows by this much per second of run time (0: fixed), so that no
    /// later RTT sample ever matches an earlier minimum.
    pub rtt_drift_us_per_s: u64,
}

impl FixedPath {
    /// Runs `cc` until `until_us`, calling `observe` after each acknowledgement has been given
    /// to the controller. Returns the number of packets acknowledged.
    pub fn run<C: CongestionControl>(&self, cc: &mut C, until_us: u64, mut observe: impl FnMut(&Acked, &C)) -> u64 {
        let mut book = SentPackets::new();
        // (ack time, seq, departure from the bottleneck = the peer's receive time)
        let mut acks: VecDeque<(u64, u64, u64)> = VecDeque::new();
        let mut last_departure_us = 0;
        let mut next_send_us = 0;
        let mut now_us = 0;
        let mut acked = 0;
        loop {
            loop {
                let d = cc.decision();
                let window_open = d.cwnd_bytes.is_none_or(|cwnd_bytes| book.inflight_bytes() + MSS <= cwnd_bytes);
                if !window_open || now_us < next_send_us {
                    break;
                }
                let sent = book.on_sent(now_us, MSS);
                cc.on_sent(&sent);
                let departure_us = now_us.max(last_departure_us) + self.service_us;
                last_departure_us = departure_us;
                let rtt_us = self.base_rtt_us + self.rtt_drift_us_per_s * now_us / 1_000_000;
                acks.push_back((departure_us + rtt_us - self.service_us, sent.seq, departure_us));
                if let Some(rate) = d.pacing_rate_bps {
                    next_send_us = now_us + MSS * 8 * 1_000_000 / rate.max(1);
                }
            }
            let d = cc.decision();
            let window_open = d.cwnd_bytes.is_none_or(|cwnd_bytes| book.inflight_bytes() + MSS <= cwnd_bytes);
            let candidates = [
                acks.front().map(|a| a.0),
                (window_open && next_send_us > now_us).then_some(next_send_us),
                d.wake_at_us,
            ];
            let Some(next_us) = candidates.into_iter().flatten().min() else { return acked };
            if next_us > until_us {
                return acked;
            }
            now_us = next_us.max(now_us);
            while acks.front().is_some_and(|a| a.0 <= now_us) {
                let (_, seq, peer_recv_us) = acks.pop_front().expect("checked");
                if let Some(a) = book.on_ack(now_us, seq, peer_recv_us) {
                    cc.on_ack(&a);
                    acked += 1;
                    observe(&a, cc);
                }
            }
            if d.wake_at_us.is_some_and(|w| w <= now_us) {
                cc.on_timer(now_us);
            }
        }
    }
}
