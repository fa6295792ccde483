//! A closed loop over the link model in fake time: one full-throttle flow — the shipped send rule,
//! `pantheon_cc::flow::Flow`, the one pantheon-udp and pantheon-sim drive — sends over a
//! `pantheon_link::Path` and hears its acknowledgements back over a second, pure-delay path. The
//! algorithms' behaviour tests use it (closed_loop.rs, pcc_random_loss.rs, scream_link.rs,
//! indigo.rs) to check what a researcher reads off Pantheon's report — utilization, queueing
//! delay — against a real queue.
//!
//! It is the smallest driver that closes the loop, not the simulator (crates/sim adds several
//! flows, the hosts' timing, the acknowledgements' own sizes and the harness's logs): at each
//! wake-up the flow is told the acknowledgements that arrived, then runs its timers, then sends
//! every datagram its rule allows; it wakes at the earliest of the paths' next events and the
//! flow's deadline, rounded up to the µs as the simulator rounds it. Each acknowledgement carries
//! the instant its datagram left the bottleneck as the receiver's time. A datagram is
//! `PACKET_BYTES` (1464) to the controller and `DATA_PATH_BYTES` (1500) on the forward path, as
//! in the simulator: it crosses the path inside the tunnel, one delivery opportunity each.
//!
//! ECN: each datagram enters the path with the flow's codepoint (`Flow::ecn`); the receiver counts
//! the datagrams that left the bottleneck marked CE and every acknowledgement carries the count
//! it had reached (AccECN's feedback), which the flow turns into marks.

use pantheon_link::{Aqm, Delivery, Event, PacketInfo, Path, PathConfig, QueueLimit, OPPORTUNITY_BYTES};

use pantheon_cc::flow::{Flow, Instant, Verdict};

/// A datagram on the forward path: the flow's 1464 bytes plus the tunnel's 36 fill one 1500-byte
/// delivery opportunity (crates/cc/src/flow/datagram.rs; crates/sim's `DATA_PATH_BYTES`).
pub const DATA_PATH_BYTES: u32 = OPPORTUNITY_BYTES;

/// An acknowledgement's size on the return path, which delays but never queues it.
const ACK_BYTES: u32 = 40;

/// What the loop shows the test, in time order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// A datagram entered the forward path.
    Sent { t_us: u64 },
    /// A datagram left the bottleneck after waiting `t_us - queued_at_us` in its queue;
    /// `marked`: the queue set CE on it.
    Departure { t_us: u64, queued_at_us: u64, marked: bool },
    /// The forward path dropped a datagram (queue full, random loss or policer).
    Drop,
}

/// Runs `flow` for `duration_us` of fake time over `forward` (its RNG seeded with `seed`),
/// acknowledgements back after `ack_delay_us`. The last step may run past `duration_us` to the
/// next event; observers that count per interval filter by time.
pub fn run(
    flow: &mut Flow,
    forward: &PathConfig,
    seed: u64,
    ack_delay_us: u64,
    duration_us: u64,
    observe: &mut dyn FnMut(Seen),
) {
    let mut forward: Path<u64> = Path::new(forward, seed, false);
    let reverse_config = PathConfig {
        delay_us: ack_delay_us,
        loss_probability: 0.0,
        queue: QueueLimit::Infinite,
        aqm: Aqm::DropTail,
        delivery: Delivery::Unlimited,
        policer: None,
        timing: Default::default(),
    };
    // Acknowledgements carry (seq, the receiver's clock at arrival, its count of CE marks then).
    let mut reverse: Path<(u64, u64, u64)> = Path::new(&reverse_config, seed + 1, false);
    let mut now_us = 0u64;
    let mut ce_count = 0u64;
    let mut arrived: Vec<(u64, u64, u64)> = Vec::new();
    let mut acks: Vec<(u64, u64, u64)> = Vec::new();
    while now_us < duration_us {
        let now = Instant::from_us(now_us);
        for &(seq, peer_recv_us, ce_count) in &acks {
            flow.on_ack(now, seq, peer_recv_us, ce_count);
            flow.detect_losses(now);
        }
        acks.clear();
        flow.run_timers(now);
        let send_at = loop {
            match flow.next_send(now) {
                Verdict::Send(permit) => {
                    let info = PacketInfo { size_bytes: DATA_PATH_BYTES, ecn: flow.ecn(), flow: 0 };
                    forward.push(now_us, flow.next_seq(), info);
                    flow.on_sent(now, permit);
                    observe(Seen::Sent { t_us: now_us });
                }
                Verdict::At(due) => break Some(due),
                Verdict::Closed => break None,
            }
        };
        // Time always moves on: a deadline already due is met a microsecond later.
        now_us = [
            forward.next_wakeup_us(),
            reverse.next_wakeup_us(),
            flow.deadline(now, send_at).map(|deadline| deadline.as_ns().div_ceil(1000)),
        ]
        .into_iter()
        .flatten()
        .min()
        .expect("a full-throttle flow always has something pending")
        .max(now_us + 1);
        forward.poll(now_us, &mut |e| match e {
            Event::Departure { t_us, packet, queued_at_us, marked, .. } => {
                observe(Seen::Departure { t_us, queued_at_us, marked });
                ce_count += u64::from(marked);
                arrived.push((packet, t_us, ce_count));
            }
            Event::Drop { .. } => observe(Seen::Drop),
            Event::LinkArrival { .. } | Event::Opportunity { .. } => {}
        });
        for &(seq, t_us, ce_count) in &arrived {
            reverse.push(t_us, (seq, t_us, ce_count), PacketInfo::plain(ACK_BYTES));
        }
        arrived.clear();
        reverse.poll(now_us, &mut |e| {
            if let Event::Departure { packet, .. } = e {
                acks.push(packet);
            }
        });
    }
}
