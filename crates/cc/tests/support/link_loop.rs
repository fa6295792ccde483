//! A closed loop over the link model in fake time: one full-throttle flow whose controller, fed
//! by the shared `SentPackets` bookkeeping, sends over a `pantheon_link::Path` and hears its
//! acknowledgements back over a second, pure-delay path. The algorithms' behaviour tests use it
//! (closed_loop.rs, pcc_random_loss.rs, scream_link.rs) to check what a researcher reads
//! off Pantheon's report — utilization, queueing delay — against a real queue.
//!
//! It is the smallest driver that closes the loop, not the simulator (crates/sim adds several
//! flows, the tunnel's sizes, the hosts' timing and the harness's logs): the send rule is the
//! driver contract of lib.rs — a packet leaves while `inflight + size ≤ cwnd` and no earlier than
//! one packet time at the pacing rate after the previous one — and each acknowledgement carries
//! the instant its packet left the bottleneck as the receiver's time.

use pantheon_link::{Delivery, Event, Path, PathConfig, QueueLimit};

use pantheon_cc::{CongestionControl, SentPackets};

/// An acknowledgement's size on the return path (an IPv4 + TCP header).
const ACK_BYTES: u32 = 40;

/// What the loop shows the test, in time order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// A packet of `bytes` entered the forward path.
    Sent { t_us: u64, bytes: u64 },
    /// A packet left the bottleneck after waiting `t_us - queued_at_us` in its queue.
    Departure { t_us: u64, size_bytes: u32, queued_at_us: u64 },
    /// The forward path dropped a packet (queue full, random loss or policer).
    Drop,
}

/// Runs `cc` for `duration_us` of fake time: packets of `packet_bytes` over `forward` (its RNG
/// seeded with `seed`), acknowledgements back after `ack_delay_us`. The last step may run past
/// `duration_us` to the next event; observers that count per interval filter by time.
pub fn run(
    cc: &mut dyn CongestionControl,
    forward: &PathConfig,
    seed: u64,
    ack_delay_us: u64,
    packet_bytes: u64,
    duration_us: u64,
    observe: &mut dyn FnMut(Seen),
) {
    let mut book = SentPackets::new();
    let mut forward: Path<u64> = Path::new(forward, seed, false);
    let reverse_config = PathConfig {
        delay_us: ack_delay_us,
        loss_probability: 0.0,
        queue: QueueLimit::Infinite,
        delivery: Delivery::Unlimited,
        policer: None,
        timing: Default::default(),
    };
    // Acknowledgements carry (seq, the receiver's clock at arrival).
    let mut reverse: Path<(u64, u64)> = Path::new(&reverse_config, seed + 1, false);
    let (mut now_us, mut next_send_us) = (0u64, 0u64);
    let mut arrived: Vec<(u64, u64)> = Vec::new();
    let mut acks: Vec<(u64, u64, u64)> = Vec::new();
    while now_us < duration_us {
        loop {
            let d = cc.decision();
            let window_open = d.cwnd_bytes.is_none_or(|cwnd_bytes| book.inflight_bytes() + packet_bytes <= cwnd_bytes);
            if !window_open || now_us < next_send_us {
                break;
            }
            let sent = book.on_sent(now_us, packet_bytes);
            cc.on_sent(&sent);
            forward.push(now_us, sent.seq, packet_bytes as u32);
            observe(Seen::Sent { t_us: now_us, bytes: packet_bytes });
            if let Some(rate_bps) = d.pacing_rate_bps {
                next_send_us = now_us + packet_bytes * 8 * 1_000_000 / rate_bps.max(1);
            }
        }
        let d = cc.decision();
        let window_open = d.cwnd_bytes.is_none_or(|cwnd_bytes| book.inflight_bytes() + packet_bytes <= cwnd_bytes);
        now_us = [
            forward.next_wakeup_us(),
            reverse.next_wakeup_us(),
            (window_open && next_send_us > now_us).then_some(next_send_us),
            book.loss_deadline_us(),
            d.wake_at_us,
        ]
        .into_iter()
        .flatten()
        .min()
        .expect("a full-throttle flow always has something pending")
        .max(now_us);
        forward.poll(now_us, &mut |e| match e {
            Event::Departure { t_us, packet, size_bytes, queued_at_us } => {
                observe(Seen::Departure { t_us, size_bytes, queued_at_us });
                arrived.push((packet, t_us));
            }
            Event::Drop { .. } => observe(Seen::Drop),
            Event::LinkArrival { .. } | Event::Opportunity { .. } => {}
        });
        for &(seq, t_us) in &arrived {
            reverse.push(t_us, (seq, t_us), ACK_BYTES);
        }
        arrived.clear();
        reverse.poll(now_us, &mut |e| {
            if let Event::Departure { t_us, packet: (seq, peer_recv_us), .. } = e {
                acks.push((t_us, seq, peer_recv_us));
            }
        });
        for &(t_us, seq, peer_recv_us) in &acks {
            if let Some(acked) = book.on_ack(t_us, seq, peer_recv_us) {
                cc.on_ack(&acked);
            }
        }
        acks.clear();
        book.detect_losses(now_us, &mut |lost| cc.on_loss(lost));
        if cc.decision().wake_at_us.is_some_and(|w| w <= now_us) {
            cc.on_timer(now_us);
        }
    }
}
