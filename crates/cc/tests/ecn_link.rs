//! ECN in closed loop: one full-throttle flow over the link model behind an ECN-marking AQM
//! (CoDel, crates/link/src/queue/codel.rs, RFC 8289 with `ecn=1`) or a DropTail queue that can
//! only drop, its acknowledgements echoing the receiver's count of CE marks (support/link_loop.rs).
//! What is checked is what the marks are for: a scalable controller (DCTCP, Prague) or a classic
//! one with ECN on keeps the link busy and the queue short on marks alone, without the drops a
//! loss-based controller needs; and without an ECN queue the scalable ones still halve on loss
//! (RFC 9331 §4.3's safe fallback) rather than pushing a DropTail buffer into overflow.
//!
//! The path: 12 Mbit/s, 20 ms each way (a 40-packet BDP), 25 s after a 5 s warm-up.

mod support;

use pantheon_cc::flow::{controller, Flow};
use pantheon_link::{Aqm, Delivery, PathConfig, QueueLimit};
use support::link_loop::{self, Seen, DATA_PATH_BYTES};
use support::percentile::percentile;

const RATE_MBPS: f64 = 12.0;
const ONE_WAY_DELAY_US: u64 = 20_000;
const WARMUP_US: u64 = 5_000_000;
const END_US: u64 = 30_000_000;

#[derive(Debug)]
struct Outcome {
    /// Bytes that left the bottleneck after the warm-up over what it could have sent.
    utilization: f64,
    /// Time from entering the bottleneck queue to leaving the link, after the warm-up, ms.
    mean_queue_ms: f64,
    p95_queue_ms: f64,
    /// Datagrams the queue marked CE, and the marks the flow was told of (whole run).
    marked: u64,
    ce_marks_reported: u64,
    /// Datagrams the queue dropped (whole run).
    dropped: u64,
}

fn run(spec: &str, ecn: bool, aqm: Aqm, queue: QueueLimit) -> Outcome {
    let mut flow = Flow::new(controller::build(spec).unwrap()).with_ecn(ecn);
    let forward = PathConfig {
        delay_us: ONE_WAY_DELAY_US,
        loss_probability: 0.0,
        queue,
        aqm: aqm.clone(),
        delivery: Delivery::Constant { rate_mbps: RATE_MBPS },
        policer: None,
        timing: Default::default(),
    };
    let (mut delivered_bytes, mut marked, mut dropped) = (0u64, 0u64, 0u64);
    let mut queue_us: Vec<u64> = Vec::new();
    link_loop::run(&mut flow, &forward, 1, ONE_WAY_DELAY_US, END_US, &mut |seen| match seen {
        Seen::Departure { t_us, queued_at_us, marked: m } => {
            marked += u64::from(m);
            if (WARMUP_US..=END_US).contains(&t_us) {
                delivered_bytes += u64::from(DATA_PATH_BYTES);
                queue_us.push(t_us - queued_at_us);
            }
        }
        Seen::Drop => dropped += 1,
        Seen::Sent { .. } => {}
    });
    let capacity_bytes = RATE_MBPS * 1e6 / 8.0 * (END_US - WARMUP_US) as f64 / 1e6;
    let outcome = Outcome {
        utilization: delivered_bytes as f64 / capacity_bytes,
        mean_queue_ms: queue_us.iter().sum::<u64>() as f64 / queue_us.len() as f64 / 1000.0,
        p95_queue_ms: percentile(&queue_us, 95) as f64 / 1000.0,
        marked,
        ce_marks_reported: flow.counts().ce_marks,
        dropped,
    };
    eprintln!(
        "{spec:>8} (ecn {ecn}) behind {} {queue:?}: utilization {:.1}%, queueing delay mean {:.2} ms, \
         p95 {:.2} ms, {} marked ({} reported), {} dropped",
        aqm.name(),
        outcome.utilization * 100.0,
        outcome.mean_queue_ms,
        outcome.p95_queue_ms,
        outcome.marked,
        outcome.ce_marks_reported,
        outcome.dropped,
    );
    outcome
}

fn codel() -> Aqm {
    Aqm::CoDel(Default::default())
}

/// CoDel's default limit (1000 packets, tc-codel(8)).
const CODEL_LIMIT: QueueLimit = QueueLimit::Packets(1000);

/// A 1-BDP DropTail buffer.
const DROPTAIL_LIMIT: QueueLimit = QueueLimit::Packets(40);

// CoDel (target 5 ms, interval 100 ms) marks where it would drop. Measured (deterministic):
// DCTCP 100.0% of the link, queueing delay mean 5.8 ms, p95 8.0 ms, 822 marks; Prague 100.0%,
// 6.7 / 8.3 ms, 1605 marks; Reno with ECN 85.1%, 1.6 / 7.0 ms, 35 marks; Cubic with ECN 93.9%,
// 31 marks; none dropped. Halving at each of CoDel's sparse early marks leaves Reno's window
// short of the pipe; DCTCP's and Prague's small cuts keep it full at the target's queue.

#[test]
fn dctcp_behind_codel_is_controlled_by_marks_alone() {
    let o = run("dctcp", false, codel(), CODEL_LIMIT);
    assert!(o.marked > 0, "{o:?}");
    assert_eq!(o.ce_marks_reported, o.marked, "every mark reaches the flow: {o:?}");
    assert_eq!(o.dropped, 0, "{o:?}");
    assert!(o.utilization >= 0.95, "{o:?}");
    assert!(o.p95_queue_ms <= 10.0, "{o:?}");
}

#[test]
fn prague_behind_codel_is_controlled_by_marks_alone() {
    let o = run("prague", false, codel(), CODEL_LIMIT);
    assert!(o.marked > 0, "{o:?}");
    assert_eq!(o.dropped, 0, "{o:?}");
    assert!(o.utilization >= 0.95, "{o:?}");
    assert!(o.p95_queue_ms <= 10.0, "{o:?}");
}

#[test]
fn a_classic_controller_with_ecn_is_marked_where_without_it_is_dropped() {
    for spec in ["reno", "cubic"] {
        let with = run(spec, true, codel(), CODEL_LIMIT);
        assert!(with.marked > 0, "{spec}: {with:?}");
        assert_eq!(with.dropped, 0, "{spec}: {with:?}");
        assert!(with.utilization >= 0.8, "{spec}: {with:?}");
        let without = run(spec, false, codel(), CODEL_LIMIT);
        assert_eq!(without.marked, 0, "{spec}: {without:?}");
        assert!(without.dropped > 0, "{spec}: {without:?}");
    }
}

#[test]
fn without_an_ecn_queue_dctcp_and_prague_halve_on_loss_as_reno() {
    // RFC 9331 §4.3: behind a DropTail queue there are no marks, only drops, and a scalable
    // controller must respond to them as Reno does. One that did not would keep the buffer full
    // and lose a packet at nearly every opportunity; these lose as often as Reno (measured: Reno
    // and DCTCP 105 drops, the same run to the packet, Prague 107; 98.8–99.9% of the link).
    let reno = run("reno", false, Aqm::DropTail, DROPTAIL_LIMIT);
    for spec in ["dctcp", "prague"] {
        let o = run(spec, false, Aqm::DropTail, DROPTAIL_LIMIT);
        assert_eq!(o.marked, 0, "{spec}: {o:?}");
        assert!(o.dropped > 0, "{spec}: {o:?}");
        assert!(o.dropped <= 2 * reno.dropped, "{spec}: {o:?} against reno's {reno:?}");
        assert!(o.utilization >= 0.85, "{spec}: {o:?}");
    }
}

#[test]
fn every_controller_runs_with_ecn_on_behind_codel() {
    // ECN on for all of them (a no-op for the scalable ones): whatever each does with a mark,
    // none stalls, and the flow hears of every mark the queue set that came back in time.
    // (Allegro fills CoDel's 1000-packet limit with ECN or without: mean queue 1000 ms with,
    // 457 ms without; its utility tolerates a few percent of loss, and marked packets, unlike
    // dropped ones, stay in the queue.)
    // `cbr`, `fixed`, `indigo` and `tao` need parameters (and ignore marks as they ignore loss).
    let left_out = ["cbr", "fixed", "indigo", "tao"];
    for spec in pantheon_cc::KNOWN.iter().copied().filter(|name| !left_out.contains(name)) {
        let o = run(spec, true, codel(), CODEL_LIMIT);
        assert!(o.utilization >= 0.2, "{spec}: {o:?}");
        assert!(o.ce_marks_reported <= o.marked, "{spec}: {o:?}");
        // Marks on datagrams still queued or in flight at the end are not reported yet.
        assert!(o.marked - o.ce_marks_reported <= 2 + o.marked / 100, "{spec}: {o:?}");
    }
}
