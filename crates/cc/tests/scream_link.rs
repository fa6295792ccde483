//! SCReAM (RFC 8298) over the link model in fake time: what its ramp-up limit and its window do
//! to utilization and queueing on a real DropTail queue, checked against the figures worked out
//! from the RFC's constants in docs/cc.md ("SCReAM"). One flow of 1464-byte datagrams, sent by
//! the shipped send rule, the acknowledgements returning over a pure delay (`support::link_loop`).

mod support;

use pantheon_cc::flow::datagram::PACKET_BYTES;
use pantheon_cc::flow::{controller, Flow};
use pantheon_cc::scream::Scream;
use pantheon_link::{Aqm, Delivery, PathConfig, QueueLimit};
use support::link_loop::{self, Seen};
use support::percentile::percentile;

/// What the link model's bottleneck saw of one SCReAM flow.
struct Run {
    /// SCReAM's bytes (its 1464-byte datagrams, the unit of its target bitrate) that left the
    /// bottleneck per second of the run.
    delivered_per_s: Vec<u64>,
    /// Time from entering the bottleneck queue to leaving the link, µs, per packet.
    queue_us: Vec<u64>,
    dropped: u64,
    final_target_bps: f64,
    final_qdelay_target_s: f64,
}

impl Run {
    fn utilization(&self, rate_mbps: f64, from_s: usize, to_s: usize) -> f64 {
        let bytes: u64 = self.delivered_per_s[from_s..to_s].iter().sum();
        bytes as f64 * 8.0 / (rate_mbps * 1e6 * (to_s - from_s) as f64)
    }

    /// The first whole second in which the flow delivered at least `fraction` of the link.
    fn first_second_at(&self, rate_mbps: f64, fraction: f64) -> Option<usize> {
        self.delivered_per_s.iter().position(|&b| b as f64 * 8.0 >= fraction * rate_mbps * 1e6)
    }

    /// p95 queueing delay over the whole run, ms.
    fn queue_p95_ms(&self) -> f64 {
        percentile(&self.queue_us, 95) as f64 / 1000.0
    }
}

/// One SCReAM flow over the link model (pantheon-link): a constant-rate bottleneck with a
/// DropTail queue of `queue_packets`, `one_way_delay_ms` each way, the acknowledgements returning
/// over a pure delay, every event in fake time.
fn run_over_link(rate_mbps: f64, one_way_delay_ms: u64, queue_packets: u64, duration_s: u64) -> Run {
    run_spec_over_link("scream", rate_mbps, one_way_delay_ms, queue_packets, duration_s)
}

fn run_spec_over_link(spec: &str, rate_mbps: f64, one_way_delay_ms: u64, queue_packets: u64, duration_s: u64) -> Run {
    let mut flow = Flow::new(controller::build(spec).unwrap());
    let delay_us = one_way_delay_ms * 1000;
    let forward = PathConfig {
        delay_us,
        loss_probability: 0.0,
        queue: QueueLimit::Packets(queue_packets),
        aqm: Aqm::DropTail,
        delivery: Delivery::Constant { rate_mbps },
        policer: None,
        timing: Default::default(),
    };
    let end_us = duration_s * 1_000_000;
    let mut run = Run {
        delivered_per_s: vec![0; duration_s as usize],
        queue_us: Vec::new(),
        dropped: 0,
        final_target_bps: 0.0,
        final_qdelay_target_s: 0.0,
    };
    link_loop::run(&mut flow, &forward, 1, delay_us, end_us, &mut |seen| match seen {
        Seen::Departure { t_us, queued_at_us, .. } if t_us < end_us => {
            run.delivered_per_s[(t_us / 1_000_000) as usize] += PACKET_BYTES;
            run.queue_us.push(t_us - queued_at_us);
        }
        Seen::Drop => run.dropped += 1,
        _ => {}
    });
    let scream = flow.controller::<Scream>().expect("the flow runs SCReAM");
    run.final_target_bps = scream.target_bitrate_bps();
    run.final_qdelay_target_s = scream.qdelay_target_s();
    run
}

#[test]
fn on_12_mbps_the_ramp_up_limits_utilization_and_no_queue_builds() {
    // 12 Mbit/s, 20 ms each way, a 1-BDP (40-packet, 60 kB) DropTail buffer, 30 s. The target
    // (docs/cc.md) is 417.7 kbit/s at 3 s, then +200 kbit/s per second: 0.818 Mbit/s at 5 s and
    // 5.818 Mbit/s at 30 s, so 5–30 s carries a mean of 3.318 Mbit/s, 27.6% of the link.
    let run = run_over_link(12.0, 20, 40, 30);
    let utilization = run.utilization(12.0, 5, 30);
    eprintln!(
        "scream 12 Mbit/s: utilization 5-30 s {:.1}%, p95 queue {:.2} ms, {} drops, target at 30 s {:.3} Mbit/s",
        utilization * 100.0,
        run.queue_p95_ms(),
        run.dropped,
        run.final_target_bps / 1e6
    );
    assert!((utilization - 0.276).abs() < 0.01, "utilization {utilization}");
    assert!((run.final_target_bps - 5.818e6).abs() < 0.05e6, "target {}", run.final_target_bps);
    // Below the link rate all along: 80% of the link (9.6 Mbit/s) is never reached in 30 s,
    // queueing stays at the packet-service scale (1 ms per packet), nothing is dropped.
    assert_eq!(run.first_second_at(12.0, 0.8), None);
    assert!(run.queue_p95_ms() <= 2.0, "p95 {}", run.queue_p95_ms());
    assert_eq!(run.dropped, 0);
}

#[test]
fn on_12_mbps_80_percent_of_the_link_takes_about_49_seconds() {
    // 9.6 Mbit/s = 417.7k + 200k·(t − 3): t ≈ 48.9 s; the first whole second at 80% is the
    // one that ends after that.
    let run = run_over_link(12.0, 20, 40, 55);
    let second = run.first_second_at(12.0, 0.8).expect("reaches 80% within 55 s");
    assert!((48..=50).contains(&second), "first second at 80%: {second}");
    assert_eq!(run.dropped, 0);
}

#[test]
fn on_a_faster_longer_path_utilization_is_the_ramp_not_the_link() {
    // The closed-loop suite's 48 Mbit/s × 100 ms path (SCReAM is excluded from its ≥70% check):
    // over 10–30 s the target runs from 1.818 to 5.818 Mbit/s, a mean of 3.818 Mbit/s, 8.0%.
    let run = run_over_link(48.0, 50, 400, 30);
    let utilization = run.utilization(48.0, 10, 30);
    assert!((utilization - 0.0795).abs() < 0.005, "utilization {utilization}");
    assert_eq!(run.dropped, 0);
}

#[test]
fn on_a_link_slower_than_the_ramp_the_window_holds_the_queue_at_the_target() {
    // 2 Mbit/s, 20 ms each way, a deep 300-packet (1.8 s) buffer, 60 s: the target passes
    // 2 Mbit/s near 11 s; from then on the target follows what the link carries (header,
    // deviation 9) and the window keeps qdelay below qdelay_target. With §4.1.2.2 off the target
    // stays QDELAY_TARGET_LO = 100 ms.
    //
    // Utilization is SCReAM's own bits (1464-byte datagrams) over the link's rate, which counts
    // 1500-byte delivery opportunities: a link kept busy shows 97.6%. Measured: 92.6% with the
    // flow's send rule (94.9% of the opportunities used). The copy of the send rule this loop
    // used to carry measured 95.8% with 1500-byte packets and 94.1% with 1464-byte ones, so the
    // bound is 92%, not the 95% written against that copy.
    let run = run_spec_over_link("scream:competing_flows=false", 2.0, 20, 300, 60);
    let late_p95_ms = late_queue_p95_ms(&run);
    eprintln!(
        "scream (competing_flows=false) 2 Mbit/s: utilization 20-60 s {:.1}%, late p95 queue {late_p95_ms:.1} ms",
        run.utilization(2.0, 20, 60) * 100.0
    );
    assert!(run.utilization(2.0, 20, 60) >= 0.92, "utilization {}", run.utilization(2.0, 20, 60));
    assert!(late_p95_ms <= 115.0, "late p95 queue {late_p95_ms} ms");
    assert_eq!(run.dropped, 0);
    assert_eq!(run.final_qdelay_target_s, 0.1);
    // With §4.1.2.2 on (the default) the competing-flows detector stays quiet: SCReAM's own
    // queue is short and steady. (With the RFC text's delta_rate it held a queue near 100 ms,
    // which a low variance took for a competing flow's, and qdelay_target rose to 169 ms.)
    let run = run_over_link(2.0, 20, 300, 60);
    let late_p95_ms = late_queue_p95_ms(&run);
    eprintln!(
        "scream 2 Mbit/s: utilization 20-60 s {:.1}%, late p95 queue {late_p95_ms:.1} ms, qdelay_target {:.3} s",
        run.utilization(2.0, 20, 60) * 100.0,
        run.final_qdelay_target_s
    );
    assert!(run.final_qdelay_target_s < 0.12, "qdelay_target {} s", run.final_qdelay_target_s);
    assert!(late_p95_ms <= 115.0, "late p95 queue {late_p95_ms} ms");
    assert!(run.utilization(2.0, 20, 60) >= 0.92, "utilization {}", run.utilization(2.0, 20, 60));
}

/// p95 queueing delay of the second half of the run's packets, ms.
fn late_queue_p95_ms(run: &Run) -> f64 {
    percentile(&run.queue_us[run.queue_us.len() / 2..], 95) as f64 / 1000.0
}

#[test]
fn where_the_link_is_the_bottleneck_the_target_tracks_it() {
    // 2 Mbit/s, 20 ms each way, 300-packet buffer: past ~11 s the link, not the ramp, limits
    // the flow. Ericsson's delta_rate (the current rate less the target) holds the target near
    // what the link carries; RFC 8298's text (the current rate itself) kept adding the whole
    // ramp until the RTP queue's backlog cut it by 5% (header, deviation 9).
    let targets_mbps: Vec<f64> =
        (20..=60).step_by(2).map(|duration_s| run_over_link(2.0, 20, 300, duration_s).final_target_bps / 1e6).collect();
    let mean_mbps = targets_mbps.iter().sum::<f64>() / targets_mbps.len() as f64;
    let max_mbps = targets_mbps.iter().copied().fold(0.0, f64::max);
    eprintln!("scream 2 Mbit/s, target at 20, 22, ..., 60 s: mean {mean_mbps:.3}, max {max_mbps:.3} Mbit/s");
    assert!(mean_mbps <= 2.0 && max_mbps < 2.1, "mean {mean_mbps}, max {max_mbps} Mbit/s on a 2 Mbit/s link");
}
