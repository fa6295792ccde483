//! PCC under random loss, over the link model in fake time: the claim of both PCC papers
//! (Allegro NSDI 2015 §4.1.3, Vivace NSDI 2018 §5) that a utility-driven sender keeps using a
//! link that loses packets at random, where TCP's loss-driven window halves on every loss.
//!
//! One full-throttle flow over 12 Mbit/s, 20 ms each way (a 40-packet BDP), a DropTail buffer
//! of 100 or 40 packets, and 1% of packets lost at random before the queue (the emulator's
//! `--uplink-loss 0.01`); acknowledgements return over a pure delay (`support::link_loop`).
//! Utilization is what left the bottleneck over 25 s after a 5 s warm-up, over the link's capacity.

mod support;

use pantheon_cc::flow::{controller, Flow};
use pantheon_link::{Aqm, Delivery, PathConfig, QueueLimit};
use support::link_loop::{self, Seen, DATA_PATH_BYTES};
use support::percentile::percentile;

const RATE_MBPS: f64 = 12.0;
const ONE_WAY_DELAY_US: u64 = 20_000;
const DURATION_US: u64 = 30_000_000;
const WARMUP_US: u64 = 5_000_000;

struct Outcome {
    utilization: f64,
    /// 95th percentile of the time packets spent in the bottleneck queue, ms.
    p95_queue_ms: f64,
    /// Bytes sent after the warm-up (as the path carries them) over the link's capacity.
    sent_over_capacity: f64,
}

fn run(spec: &str, loss_probability: f64, queue_packets: u64, seed: u64) -> Outcome {
    let mut flow = Flow::new(controller::build(spec).unwrap());
    let forward = PathConfig {
        delay_us: ONE_WAY_DELAY_US,
        loss_probability,
        queue: QueueLimit::Packets(queue_packets),
        aqm: Aqm::DropTail,
        delivery: Delivery::Constant { rate_mbps: RATE_MBPS },
        policer: None,
        timing: Default::default(),
    };
    let (mut delivered_bytes, mut sent_bytes) = (0u64, 0u64);
    let mut queue_us: Vec<u64> = Vec::new();
    link_loop::run(&mut flow, &forward, seed, ONE_WAY_DELAY_US, DURATION_US, &mut |seen| match seen {
        Seen::Sent { t_us } if t_us >= WARMUP_US => sent_bytes += u64::from(DATA_PATH_BYTES),
        Seen::Departure { t_us, queued_at_us, .. } if (WARMUP_US..=DURATION_US).contains(&t_us) => {
            delivered_bytes += u64::from(DATA_PATH_BYTES);
            queue_us.push(t_us - queued_at_us);
        }
        _ => {}
    });
    let capacity_bytes = RATE_MBPS * 1e6 / 8.0 * (DURATION_US - WARMUP_US) as f64 / 1e6;
    let outcome = Outcome {
        utilization: delivered_bytes as f64 / capacity_bytes,
        p95_queue_ms: percentile(&queue_us, 95) as f64 / 1000.0,
        sent_over_capacity: sent_bytes as f64 / capacity_bytes,
    };
    eprintln!(
        "{spec:>8}, {:.0}% random loss, {queue_packets}-packet buffer: utilization {:.1}%, sent {:.1}% of \
         capacity, p95 queueing delay {:.1} ms",
        loss_probability * 100.0,
        outcome.utilization * 100.0,
        outcome.sent_over_capacity * 100.0,
        outcome.p95_queue_ms
    );
    outcome
}

#[test]
fn pcc_keeps_using_a_link_with_one_percent_random_loss_where_tcp_does_not() {
    let mut tcp = Vec::new();
    for spec in ["reno", "cubic"] {
        let o = run(spec, 0.01, 100, 7);
        // Halving on every loss, one loss per 100 packets: the window stays near the
        // Mathis et al. bound of 1.22/√p ≈ 12 packets, a third of the 40-packet BDP.
        assert!(o.utilization < 0.6, "{spec}: {:.3}", o.utilization);
        tcp.push(o.utilization);
    }
    for spec in ["allegro", "vivace"] {
        let o = run(spec, 0.01, 100, 7);
        assert!(o.utilization >= 0.8, "{spec}: {:.3}", o.utilization);
        assert!(tcp.iter().all(|&u| o.utilization > u + 0.25), "{spec}: {:.3} vs {tcp:?}", o.utilization);
    }
}

#[test]
fn vivace_keeps_the_queue_short_where_allegro_fills_it() {
    // Without random loss, Allegro's only signal is loss, which a DropTail queue gives only
    // when full; Vivace's RTT-gradient term stops it while the queue is still short.
    let allegro = run("allegro", 0.0, 100, 7);
    let vivace = run("vivace", 0.0, 100, 7);
    assert!(allegro.utilization >= 0.9 && vivace.utilization >= 0.85);
    assert!(allegro.p95_queue_ms > 50.0, "allegro p95 {:.1} ms", allegro.p95_queue_ms);
    assert!(vivace.p95_queue_ms < allegro.p95_queue_ms / 2.0, "vivace p95 {:.1} ms", vivace.p95_queue_ms);
    // A queue growing by 5% of the link rate is an RTT gradient of 0.05, which b = 900 prices
    // at 45 utility per Mbit/s: the upper probe's queue drains before it reaches 10 ms.
    assert!(vivace.p95_queue_ms < 10.0, "vivace p95 {:.1} ms", vivace.p95_queue_ms);
}

#[test]
fn vivace_over_a_one_bdp_buffer_with_random_loss_sends_about_what_the_link_carries() {
    // The emulator's 60 kB buffer (40 datagrams of 1464 bytes plus tunnel overhead) with 1%
    // loss. A safety window of 2 × rate × min RTT used to bind here once the queue was full: the
    // sender went ack-clocked and bursty, its MIs' RTT slopes stopped reflecting their rates,
    // and it settled at over twice the link rate with half its packets dropped.
    for seed in [1, 7] {
        let o = run("vivace", 0.01, 40, seed);
        assert!(o.utilization >= 0.8, "{:.3}", o.utilization);
        assert!(o.sent_over_capacity < 1.1, "sent {:.3} of capacity", o.sent_over_capacity);
        // Random loss does not blind the RTT term: the queue stays short.
        assert!(o.p95_queue_ms < 10.0, "p95 {:.1} ms", o.p95_queue_ms);
    }
}
