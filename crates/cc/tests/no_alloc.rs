//! The hot path allocates nothing: once a flow has warmed up (its window, its sent-packet ring
//! and its RTT filters have reached their working sizes), 100 000 packets' worth of
//! `SentPackets` bookkeeping and controller calls — sends, acknowledgements, losses, decisions —
//! make zero heap allocations, for every controller in the registry.
//!
//! A counting global allocator counts the allocations each thread makes while that thread has
//! counting switched on (per thread, so that tests running side by side do not see each other's).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::VecDeque;

use pantheon_cc::indigo::{Indigo, IndigoConfig, Weights};
use pantheon_cc::{build, CongestionControl, SentPackets};

#[path = "support/indigo_weights.rs"]
mod indigo_weights;
#[path = "support/known_specs.rs"]
mod known_specs;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    if COUNTING.with(Cell::get) {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
    }
}

/// Allocations made by `f` on this thread.
fn allocations_in(f: impl FnOnce()) -> u64 {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        System.alloc(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const PACKET_BYTES: u64 = 1500;
/// One packet per ms (12 Mbit/s) behind a 40 ms RTT and a 100-packet drop-tail queue; every
/// 500th packet is lost besides. The finite queue bounds the flight of a latency-blind
/// controller (Allegro), whose window would otherwise grow for as long as the test runs.
const SERVICE_US: u64 = 1000;
const BASE_RTT_US: u64 = 40_000;
const LOSS_EVERY: u64 = 500;
const QUEUE_US: u64 = 100 * SERVICE_US;

/// Runs `packets` packets of one flow through `cc`; the acknowledgement queue is allocated by the
/// caller so that only the sender and the controller can allocate inside.
fn drive(
    cc: &mut dyn CongestionControl,
    sender: &mut SentPackets,
    acks: &mut VecDeque<(u64, u64, u64)>,
    clock: &mut Clock,
    packets: u64,
) {
    let until_seq = clock.sent + packets;
    while clock.sent < until_seq {
        loop {
            let d = cc.decision();
            let window_open = d.cwnd_bytes.is_none_or(|c| sender.inflight_bytes() + PACKET_BYTES <= c);
            if !window_open || clock.now_us < clock.next_send_us {
                break;
            }
            let sent = sender.on_sent(clock.now_us, PACKET_BYTES);
            cc.on_sent(&sent);
            clock.sent += 1;
            let departure_us = clock.now_us.max(clock.last_departure_us) + SERVICE_US;
            if departure_us <= clock.now_us + QUEUE_US {
                clock.last_departure_us = departure_us;
                if sent.seq % LOSS_EVERY != LOSS_EVERY - 1 {
                    acks.push_back((departure_us + BASE_RTT_US - SERVICE_US, sent.seq, departure_us));
                }
            }
            if let Some(rate_bps) = d.pacing_rate_bps {
                clock.next_send_us = clock.now_us + PACKET_BYTES * 8 * 1_000_000 / rate_bps.max(1);
            }
        }
        let d = cc.decision();
        let window_open = d.cwnd_bytes.is_none_or(|c| sender.inflight_bytes() + PACKET_BYTES <= c);
        let next_us = [
            acks.front().map(|a| a.0),
            (window_open && clock.next_send_us > clock.now_us).then_some(clock.next_send_us),
            sender.loss_deadline_us(),
            d.wake_at_us,
        ]
        .into_iter()
        .flatten()
        .min()
        .expect("something is pending");
        clock.now_us = next_us.max(clock.now_us);
        while acks.front().is_some_and(|a| a.0 <= clock.now_us) {
            let (t_us, seq, peer_recv_us) = acks.pop_front().expect("checked");
            if let Some(acked) = sender.on_ack(t_us, seq, peer_recv_us) {
                cc.on_ack(&acked);
            }
        }
        sender.detect_losses(clock.now_us, &mut |lost| cc.on_loss(lost));
        if d.wake_at_us.is_some_and(|w| w <= clock.now_us) {
            cc.on_timer(clock.now_us);
        }
    }
}

#[derive(Default)]
struct Clock {
    now_us: u64,
    next_send_us: u64,
    last_departure_us: u64,
    sent: u64,
}

#[test]
fn no_allocation_per_packet_after_warm_up() {
    for &name in pantheon_cc::KNOWN {
        // This path's queue has no limit, and Allegro (as its authors ship it) no window: its
        // flight, and the sender's book of it, would grow without end; the window bounds it.
        let spec =
            if name == "allegro" { "allegro:safety_window=true".to_string() } else { known_specs::buildable(name) };
        let mut cc = build(&spec).unwrap();
        let mut sender = SentPackets::new();
        let mut acks = VecDeque::with_capacity(1 << 16);
        let mut clock = Clock::default();
        drive(&mut *cc, &mut sender, &mut acks, &mut clock, 20_000);
        let allocations = allocations_in(|| drive(&mut *cc, &mut sender, &mut acks, &mut clock, 100_000));
        assert_eq!(allocations, 0, "{name}: {allocations} allocations in 100 000 packets");
        // The flow really ran: 100 000 packets at one per ms take about 100 s of fake time.
        assert!(clock.now_us > 100_000_000, "{name}: only {} us", clock.now_us);
    }
}

#[test]
fn tao_records_without_allocating() {
    // record=1 takes the tally's room when the controller is built: uses and up to 64 memories
    // per rule, thinned in place.
    let mut cc = build(&format!("tao:tree={},record=1", known_specs::tao_fixture())).unwrap();
    let mut sender = SentPackets::new();
    let mut acks = VecDeque::with_capacity(1 << 16);
    let mut clock = Clock::default();
    drive(&mut *cc, &mut sender, &mut acks, &mut clock, 20_000);
    let allocations = allocations_in(|| drive(&mut *cc, &mut sender, &mut acks, &mut clock, 100_000));
    assert_eq!(allocations, 0, "tao record=1: {allocations} allocations in 100 000 packets");
}

#[test]
fn indigo_decides_without_allocating() {
    // The network's policy (the registry's loop runs the expert's): a random 128-unit LSTM whose
    // head always picks "+0", so that the window stays put while every decision runs the whole
    // network.
    let weights = Weights::from_bytes(&indigo_weights::indigo_weights(128, 11, 0.01, [0.0, 0.0, 5.0, 0.0, 0.0]));
    let mut cc = Indigo::new(IndigoConfig::default(), weights.unwrap());
    let mut sender = SentPackets::new();
    let mut acks = VecDeque::with_capacity(1 << 16);
    let mut clock = Clock::default();
    drive(&mut cc, &mut sender, &mut acks, &mut clock, 20_000);
    let decisions = cc.decisions();
    let allocations = allocations_in(|| drive(&mut cc, &mut sender, &mut acks, &mut clock, 100_000));
    assert_eq!(allocations, 0, "indigo: {allocations} allocations in 100 000 packets");
    // A window of 10 packets on a 40-ms path: 250 packets/s, their acks 1 ms apart once per
    // round trip, so one decision per 40 ms: 10 000 over the 400 s.
    assert!(cc.decisions() - decisions > 5_000, "only {} decisions", cc.decisions() - decisions);
}

#[test]
fn the_counter_sees_allocations() {
    // A controller built inside the counted region allocates its box and its buffers.
    assert!(allocations_in(|| drop(build("copa").unwrap())) >= 1);
    let mut v: Vec<u64> = Vec::new();
    assert_eq!(allocations_in(|| v.extend(0..100)), 1);
}
