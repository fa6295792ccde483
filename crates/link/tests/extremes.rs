//! Property test over the extremes of what the path options accept (`pantheon_link::bounds`):
//! any accepted configuration, driven with any arrivals for a while, never panics (which, in a
//! debug build, includes every arithmetic overflow) and never wraps around — a packet never leaves
//! before it arrived plus the delay, events come in time order, each flow's packets leave in the
//! order they entered (and, behind DropTail, are dropped in it), none is lost or duplicated, and no
//! event is stamped past the time the driver polled. Every queue discipline is driven, with
//! packets of three flows, each with its own ECN codepoint.
//! Issue 18 found `--delay 1e300` saturating to u64::MAX µs and the sum wrapping, so packets left
//! after ~350 µs; the bounds keep such values out, and this checks that what they let in is safe.

use pantheon_link::bounds::{MAX_BUFFER, MAX_DELAY_US, MAX_RATE_MBPS, MAX_TRACE_MS, MIN_RATE_MBPS};
use pantheon_link::{
    Aqm, Delivery, Ecn, Event, PacketInfo, Path, PathConfig, PolicerConfig, QueueLimit, Timing, Trace,
};
use proptest::prelude::*;

/// Values across the whole accepted range, the ends weighted (where overflow would show).
fn delay_us() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0), Just(MAX_DELAY_US), 0..=MAX_DELAY_US, 0..=100_000u64]
}

fn rate_mbps() -> impl Strategy<Value = f64> {
    prop_oneof![Just(MIN_RATE_MBPS), Just(MAX_RATE_MBPS), MIN_RATE_MBPS..=MAX_RATE_MBPS, 0.1..1000.0f64]
}

fn buffer() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1), Just(MAX_BUFFER), 1..=MAX_BUFFER, 1..=100u64]
}

fn trace() -> impl Strategy<Value = Trace> {
    let timestamps = prop_oneof![Just(MAX_TRACE_MS), 0..=MAX_TRACE_MS, 0..=1000u64];
    prop::collection::vec(timestamps, 1..20).prop_filter_map("ends after 0 ms", |mut ms| {
        ms.sort_unstable();
        Trace::new(ms).ok()
    })
}

/// A Poisson schedule draws every opportunity, idle or not (so that a seed reproduces a run
/// whoever watches, schedule.rs), so its cost is its rate times the time driven: its rate is
/// kept to what a test can step through across the longest delay.
fn delivery() -> impl Strategy<Value = Delivery> {
    prop_oneof![
        Just(Delivery::Unlimited),
        rate_mbps().prop_map(|rate_mbps| Delivery::Constant { rate_mbps }),
        trace().prop_map(Delivery::Trace),
        (MIN_RATE_MBPS..=0.05f64).prop_map(|rate_mbps| Delivery::Poisson { rate_mbps }),
    ]
}

/// Every discipline, with its defaults.
fn aqm() -> impl Strategy<Value = Aqm> {
    prop_oneof![
        Just(Aqm::DropTail),
        Just(Aqm::CoDel(Default::default())),
        Just(Aqm::Pie(Default::default())),
        Just(Aqm::FqCoDel(Default::default())),
        Just(Aqm::Red(Default::default())),
        Just(Aqm::DualPi2(Default::default())),
    ]
}

/// Flow `k`'s codepoint: one of each kind, so DualPI2 sees both of its queues.
const FLOW_ECN: [Ecn; 3] = [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1];

fn config() -> impl Strategy<Value = PathConfig> {
    let queue = prop_oneof![
        Just(QueueLimit::Infinite),
        buffer().prop_map(QueueLimit::Packets),
        buffer().prop_map(QueueLimit::Bytes)
    ];
    let policer = prop::option::of(
        (rate_mbps(), buffer()).prop_map(|(rate_mbps, burst_bytes)| PolicerConfig { rate_mbps, burst_bytes }),
    );
    let loss = prop_oneof![Just(0.0), Just(1.0), 0.0..=1.0f64];
    let timing = prop_oneof![Just(Timing::Microseconds), Just(Timing::Mahimahi)];
    (delay_us(), loss, queue, aqm(), delivery(), policer, timing).prop_map(
        |(delay_us, loss_probability, queue, aqm, delivery, policer, timing)| PathConfig {
            delay_us,
            loss_probability,
            queue,
            aqm,
            delivery,
            policer,
            timing,
        },
    )
}

/// When the driver's clock starts (an emulator up for months included) and the arrivals after it:
/// gaps in µs and sizes in bytes (up to an IP datagram's largest).
fn arrivals() -> impl Strategy<Value = (u64, Vec<(u64, u32)>)> {
    let start_us = prop_oneof![Just(0), 0..=(1u64 << 44)];
    let gaps = prop::collection::vec((prop_oneof![Just(0), 0..=10_000u64, 0..=10_000_000u64], 1..=65_535u32), 0..150);
    (start_us, gaps)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn accepted_configurations_never_wrap(config in config(), seed in any::<u64>(), (start_us, gaps) in arrivals()) {
        let mut path = Path::new(&config, seed, false);
        let mut events = Vec::new();
        let mut entered_us = Vec::new();
        let mut now_us = start_us;
        for (id, &(gap_us, size_bytes)) in gaps.iter().enumerate() {
            now_us += gap_us;
            path.poll(now_us, &mut |e| events.push((now_us, e)));
            let flow = id % FLOW_ECN.len();
            path.push(now_us, id, PacketInfo { size_bytes, ecn: FLOW_ECN[flow], flow: flow as u64 });
            entered_us.push(now_us);
        }
        // Long enough for a constant link of 1 kbit/s (12 s an opportunity) to send every packet.
        let opportunities: u64 = gaps.iter().map(|&(_, size)| u64::from(size.div_ceil(1500))).sum();
        let drain_us = (opportunities + 1) * 12_000_001;
        let end_us = now_us + config.delay_us + drain_us;
        for poll_us in [now_us + config.delay_us, end_us] {
            path.poll(poll_us, &mut |e| events.push((poll_us, e)));
        }

        let mut last_us = 0;
        // The last packet of each flow to leave, and the last dropped (only DropTail keeps the
        // order of entry in its drops: an AQM may drop at the head after a tail drop).
        let mut last_left = [None; FLOW_ECN.len()];
        let mut last_dropped = None;
        let droptail = config.aqm == Aqm::DropTail;
        let mut gone = vec![false; gaps.len()];
        for (polled_us, event) in &events {
            let (t_us, id) = match event {
                Event::Departure { t_us, packet, queued_at_us, .. } => {
                    prop_assert!(queued_at_us <= t_us, "left at {t_us} before it was queued at {queued_at_us}");
                    let flow = packet % FLOW_ECN.len();
                    prop_assert!(last_left[flow] < Some(*packet), "{packet} left after {:?}", last_left[flow]);
                    last_left[flow] = Some(*packet);
                    (*t_us, Some(*packet))
                }
                Event::Drop { t_us, packet, .. } => {
                    prop_assert!(!droptail || last_dropped < Some(*packet), "{packet} dropped after {last_dropped:?}");
                    last_dropped = Some(*packet);
                    (*t_us, Some(*packet))
                }
                Event::LinkArrival { t_us, .. } | Event::Opportunity { t_us } => (*t_us, None),
            };
            prop_assert!(t_us <= *polled_us, "event at {t_us} reported by a poll at {polled_us}");
            prop_assert!(t_us >= last_us, "event at {t_us} after one at {last_us}");
            last_us = t_us;
            if let Some(id) = id {
                prop_assert!(!gone[id], "packet {id} came out twice");
                gone[id] = true;
                let earliest_us = config.timing.stamp_us(entered_us[id]) + config.delay_us;
                prop_assert!(t_us >= earliest_us, "packet {id} out at {t_us}, before {earliest_us}");
            }
        }
        let out = gone.iter().filter(|&&g| g).count();
        prop_assert_eq!(out + path.packets_inside(), gaps.len(), "every packet is out, dropped or inside");
        if matches!(config.delivery, Delivery::Unlimited | Delivery::Constant { .. }) {
            prop_assert_eq!(path.packets_inside(), 0, "a constant link drains within the drain time");
        }
    }
}
