//! Test-only support for the unit tests of every algorithm:
//!
//! - `ack` and `loss`: the events the bookkeeping would hand a controller, built by hand;
//! - `FixedPath`: an exact fixed path — a bottleneck serving one datagram every `service_us`
//!   from an infinite FIFO, behind a propagation RTT — over which the shipped send rule
//!   (`flow::Flow`, as pantheon-udp and pantheon-sim drive it) runs a controller built as they
//!   build it (1464-byte datagrams), in fake time. On an empty path a datagram's RTT is exactly
//!   `base_rtt_us`; each one queued ahead adds `service_us`, so queue lengths can be read off
//!   RTTs by hand. (The closed-loop tests in tests/ use the real link model instead,
//!   tests/support/link_loop.rs.)
//! - `percentile`: the one percentile definition of the Rust tests, the same file the
//!   integration tests use (tests/support/percentile.rs);
//! - `buildable`: a spec that builds for each registered name (tests/support/known_specs.rs).

use std::collections::VecDeque;

use crate::flow::{controller, Flow, Instant, Verdict};
use crate::{Acked, CongestionControl, Lost};

#[path = "../tests/support/percentile.rs"]
mod percentile;
pub(crate) use percentile::percentile;

#[path = "../tests/support/known_specs.rs"]
mod known_specs;
pub(crate) use known_specs::{buildable, indigo_fixture, tao_fixture};

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
        ce_marks: 0,
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
    /// Runs the controller `spec` names, an algorithm of type `C`, until `until_us`, calling
    /// `observe` after each acknowledgement has been given to it. Returns the flow (its
    /// controller's state after the run: `Flow::controller`) and the datagrams acknowledged.
    ///
    /// The driver does what the simulator's sender does at each wake-up: acknowledgements, then
    /// loss detection, then timers, then every send the rule allows; it wakes at the earliest of
    /// the next acknowledgement and the flow's `deadline`, to the nanosecond (no host latency)
    /// and at least a microsecond after the last wake-up, as the simulator's sender does.
    pub fn run<C: CongestionControl>(
        &self,
        spec: &str,
        until_us: u64,
        mut observe: impl FnMut(&Acked, &C),
    ) -> (Flow, u64) {
        let mut flow = Flow::new(controller::build(spec).expect("a valid spec"));
        assert!(flow.controller::<C>().is_some(), "{spec} is not the algorithm the test observes");
        // (ack time, seq, departure from the bottleneck = the peer's receive time), µs
        let mut acks: VecDeque<(u64, u64, u64)> = VecDeque::new();
        let mut last_departure_us = 0;
        let mut now = Instant::ZERO;
        let mut acked = 0;
        loop {
            while acks.front().is_some_and(|a| a.0 <= now.as_us()) {
                let (_, seq, peer_recv_us) = acks.pop_front().expect("checked");
                if let Some(a) = flow.on_ack(now, seq, peer_recv_us, 0) {
                    acked += 1;
                    observe(&a, flow.controller().expect("checked"));
                }
                flow.detect_losses(now);
            }
            flow.run_timers(now);
            let send_at = loop {
                match flow.next_send(now) {
                    Verdict::Send(permit) => {
                        let sent = flow.on_sent(now, permit);
                        let departure_us = sent.now_us.max(last_departure_us) + self.service_us;
                        last_departure_us = departure_us;
                        let rtt_us = self.base_rtt_us + self.rtt_drift_us_per_s * sent.now_us / 1_000_000;
                        acks.push_back((departure_us + rtt_us - self.service_us, sent.seq, departure_us));
                    }
                    Verdict::At(due) => break Some(due),
                    Verdict::Closed => break None,
                }
            };
            let next =
                [flow.deadline(now, send_at), acks.front().map(|a| Instant::from_us(a.0))].into_iter().flatten().min();
            match next {
                Some(next) if next.as_us() <= until_us => now = next.max(Instant::from_us(now.as_us() + 1)),
                _ => return (flow, acked),
            }
        }
    }
}
