//! Behind an AQM, with ECN: what each queue discipline is for, checked in the simulator on the
//! path of the behaviour tests (12 Mbit/s, 20 ms each way, so 1 BDP = 60 kB = 40 datagrams), with
//! the numbers a researcher would read off the report (issue 34 §4):
//!
//! - Cubic behind CoDel (RFC 8289) keeps a short queue where a 5-BDP DropTail queues for
//!   hundreds of ms, at nearly the same throughput;
//! - a sparse flow (a window of one datagram, ~290 kbit/s) beside bulk Cubic is served at once by
//!   FQ-CoDel (RFC 8290 §1.3: sparse flows get priority) and waits behind DropTail's standing queue;
//! - Cubic with ECN behind CoDel is marked instead of dropped: almost no loss;
//! - Prague behind DualPI2 (RFC 9332) holds about a millisecond of queueing while sharing the link
//!   with Cubic within a factor of 2;
//! - DCTCP and Prague without an ECN-capable queue fall back to loss (RFC 9331 §4.3): they still
//!   use the link and lose little behind DropTail.

use pantheon_sim::batch;
use pantheon_sim::metrics::FlowMetrics;
use pantheon_sim::outcome;
use pantheon_sim::scenario::{FlowPlan, Scenario};

const RUN_US: u64 = 20_000_000;
const RATE_MBPS: f64 = 12.0;
const DELAY_MS: f64 = 20.0;

/// The flows' metrics for `flows` (specs, all from the start) over the path with `queue` options.
fn run(flows: &[&str], queue: &[&str]) -> Vec<FlowMetrics> {
    let mut path: Vec<String> = ["--delay", "20"].iter().map(|s| s.to_string()).collect();
    path.extend(queue.iter().map(|s| s.to_string()));
    let paths = batch::parse_path(&path, Some(1)).unwrap();
    let plans = flows.iter().enumerate().map(|(i, cc)| FlowPlan::new(i + 1, cc, 0.0, None, RUN_US).unwrap()).collect();
    outcome::metrics_only(&Scenario::new(plans, RUN_US, paths).unwrap()).unwrap().flows
}

fn queueing_p95_ms(m: &FlowMetrics) -> f64 {
    m.delay_p95_ms.unwrap() - DELAY_MS
}

const DEEP_DROPTAIL: [&str; 4] = ["--uplink-queue", "droptail", "--uplink-queue-bytes", "300000"];

#[test]
fn codel_keeps_cubics_queue_short_where_a_deep_droptail_fills() {
    let codel = &run(&["cubic"], &["--uplink-queue", "codel"])[0];
    let droptail = &run(&["cubic"], &DEEP_DROPTAIL)[0];
    assert!(queueing_p95_ms(droptail) > 150.0, "deep DropTail: {droptail:?}");
    assert!(queueing_p95_ms(codel) < 25.0, "CoDel: {codel:?}");
    assert!(codel.throughput_mbps > 0.8 * RATE_MBPS * 1464.0 / 1500.0, "CoDel: {codel:?}");
    assert_eq!(codel.ce_rate, None, "not ECN-capable: dropped, never marked");
}

#[test]
fn fq_codel_serves_a_sparse_flow_at_once_beside_bulk_cubic() {
    let flows = ["cubic", "fixed:cwnd_packets=1"];
    let fq = run(&flows, &["--uplink-queue", "fq-codel"]);
    let droptail = run(&flows, &DEEP_DROPTAIL);
    assert!(queueing_p95_ms(&fq[1]) < 5.0, "FQ-CoDel, sparse flow: {:?}", fq[1]);
    assert!(queueing_p95_ms(&droptail[1]) > 150.0, "DropTail, sparse flow: {:?}", droptail[1]);
    assert!(fq[0].throughput_mbps > 0.8 * RATE_MBPS * 1464.0 / 1500.0 - fq[1].throughput_mbps, "{:?}", fq[0]);
}

#[test]
fn cubic_with_ecn_behind_codel_is_marked_instead_of_dropped() {
    let m = &run(&["cubic:ecn=1"], &["--uplink-queue", "codel"])[0];
    assert!(m.ce_rate.unwrap() > 0.0, "{m:?}");
    assert!(m.loss_rate.unwrap() < 0.002, "{m:?}");
    assert!(queueing_p95_ms(m) < 25.0, "{m:?}");
    assert!(m.throughput_mbps > 0.8 * RATE_MBPS * 1464.0 / 1500.0, "{m:?}");
}

#[test]
fn prague_behind_dualpi2_keeps_a_millisecond_queue_and_shares_with_cubic() {
    let m = run(&["prague", "cubic"], &["--uplink-queue", "dualpi2"]);
    let (prague, cubic) = (&m[0], &m[1]);
    assert!(queueing_p95_ms(prague) < 5.0, "prague: {prague:?}");
    let ratio = prague.throughput_mbps / cubic.throughput_mbps;
    assert!((0.5..=2.0).contains(&ratio), "prague {prague:?}, cubic {cubic:?}");
    assert!(prague.ce_rate.unwrap() > 0.0 && prague.loss_rate.unwrap() < 0.002, "{prague:?}");
}

#[test]
fn dctcp_and_prague_fall_back_to_loss_without_an_ecn_queue() {
    for cc in ["dctcp", "prague"] {
        let m = &run(&[cc], &["--uplink-queue", "droptail", "--uplink-queue-bytes", "60000"])[0];
        assert_eq!(m.ce_rate, Some(0.0), "{cc}: {m:?}");
        assert!(m.throughput_mbps > 0.7 * RATE_MBPS * 1464.0 / 1500.0, "{cc}: {m:?}");
        assert!(m.loss_rate.unwrap() < 0.05, "{cc}: {m:?}");
    }
}

#[test]
fn dctcp_behind_codel_is_marked_and_keeps_the_link_busy() {
    let m = &run(&["dctcp"], &["--uplink-queue", "codel"])[0];
    assert!(m.ce_rate.unwrap() > 0.0 && m.loss_rate.unwrap() < 0.002, "{m:?}");
    assert!(m.throughput_mbps > 0.8 * RATE_MBPS * 1464.0 / 1500.0, "{m:?}");
}
