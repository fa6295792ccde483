//! The discrete-event simulation of one run, in virtual time: the harness's experiment
//! (docs/harness.md) with the emulator's link model and pantheon-udp's sender logic, and nothing
//! real in between.
//!
//! ```text
//!  flow i sender ─ tunnel ingress ─► uplink Path ─► tunnel egress ─ receiver (acknowledges at once)
//!  (pantheon_cc::flow)   (1464+36 B)   (pantheon_link)                      │
//!         ▲                                                                  ▼
//!         └───── tunnel egress ◄── downlink Path ◄── tunnel ingress ◄── ack (60+36 B)
//! ```
//!
//! - Each flow's sender is `pantheon_cc::flow::Flow`: the same controller
//!   (`flow::controller::build`, `mss_bytes=1464`), bookkeeping, pacer, timers and send rule as
//!   the real sender (transport/src/sender.rs), told virtual time instead of reading a clock. Its
//!   clock starts at the flow's start, as the real sender's does.
//! - Every data datagram is 1464 bytes inside the tunnel and 1500 on the path (docs/tunnel.md:
//!   36 bytes of tunnel overhead); every acknowledgement is 60 inside (32 bytes of UDP payload,
//!   crates/cc/src/flow/datagram.rs) and 96 on the path. The tunnel's UIDs count per flow and direction;
//!   a data datagram's UID is its sequence number, as each data datagram is one tunnel datagram.
//! - All flows share one uplink and one downlink `pantheon_link::Path`, built from the same
//!   configuration and seeds (`PathPair::uplink_seed`) as pantheon-emu builds them.
//! - The receiver acknowledges each data datagram, stamped with the instant it arrived (the
//!   kernel's receive time, as the real receiver reads it); the acknowledgement enters the path a
//!   host's wake-up latency later, and the sender reads it a wake-up latency after it leaves the
//!   path (host.rs: seeded, measured on pantheon-emu runs; without it delay-based and
//!   rate-filtering controllers see a cleaner world than the emulator's). Acknowledgements enter
//!   the downlink, and are read, in the order they were made: a late one holds back those behind
//!   it, which then come together, as after a descheduled thread.
//! - A flow's sender runs from its start to its end; after it, it sends nothing and hears
//!   nothing, but its datagrams in flight still arrive, are acknowledged and logged. The run ends
//!   at `runtime_us`: what is still in flight then is never delivered (lost, as in the harness).
//!
//! Scheduling: the next event is the earliest of a few candidates — each direction's
//! `next_wakeup_us` and each flow's wake-up — found by a scan (a run has a handful of flows, and
//! a scan beats a heap at that size). At one instant the uplink is served first, then the
//! downlink (so an acknowledgement released at t reaches its sender at t), then the senders;
//! a send at t into a path with no delay is served at t by the next round. The order is fixed,
//! so a run is a function of its scenario and seed alone.
//!
//! Time: µs (the link model's unit). The flow's `Instant`s are ns on the flow's clock; a sender
//! asked to wait until ns `d` is woken at µs ⌈d / 1000⌉, and the pacer, which schedules from due
//! times rather than send times (crates/cc/src/flow/pacer.rs), keeps the mean rate exact across that
//! rounding. Nothing is allocated per packet: the paths' and the bookkeeping's queues grow to
//! their high-water marks and are reused.

use std::collections::VecDeque;

use pantheon_cc::flow::datagram::{ACK_BYTES, IP_UDP_HEADER_BYTES, PACKET_BYTES};
use pantheon_cc::flow::{controller, Flow, Instant, Verdict};
use pantheon_cc::indigo::Indigo;
use pantheon_cc::CongestionControl;
use pantheon_format::tunnel_wire::OVERHEAD_BYTES;
use pantheon_link::stalls::Stalls;
use pantheon_link::{Ecn, Event, PacketInfo, Path};

use crate::host::{machine_stalls, HostLatency};
use crate::link_clock::PhasedPath;
use crate::observer::{Direction, LinkDeparture, Observer};
use crate::scenario::Scenario;

/// A data datagram as the sender's tunnel sees it (the IP packet pantheon-udp sends).
pub const DATA_INNER_BYTES: u32 = PACKET_BYTES as u32;
/// An acknowledgement as the receiver's tunnel sees it: IPv4 + UDP + 32 bytes.
pub const ACK_INNER_BYTES: u32 = (IP_UDP_HEADER_BYTES + ACK_BYTES) as u32;
/// The same datagrams on the path, where the emulator's link model counts them.
const DATA_PATH_BYTES: u32 = DATA_INNER_BYTES + OVERHEAD_BYTES as u32;
const ACK_PATH_BYTES: u32 = ACK_INNER_BYTES + OVERHEAD_BYTES as u32;

const NS_PER_US: u64 = 1000;
/// More datagrams than this inside the two directions (1.5 GB of data in flight: a second's
/// worth at 12 Gbit/s) means a sender whose window grows without bound on a path with no rate or
/// queue limit: the run stops with an error instead of exhausting memory.
const MAX_PACKETS_INSIDE: usize = 1_000_000;
/// More rounds than this at one instant means datagrams cross an unlimited path with no delay
/// and come back in no time, so virtual time would never advance.
const MAX_ROUNDS_PER_INSTANT: u64 = 10_000;
/// No wake-up.
const NEVER: u64 = u64::MAX;

/// A datagram crossing one direction of the path.
#[derive(Debug, Clone, Copy)]
struct Packet {
    flow: u32,
    /// The tunnel's UID (per flow and direction).
    uid: u64,
    /// For an acknowledgement, the sequence number of the data it acknowledges; for data, its own.
    seq: u64,
    /// The direction's number for it, in the order datagrams entered (the link log's uid).
    link_uid: u64,
    /// When it entered the path.
    entry_us: u64,
    /// For an acknowledgement, when the receiver got the data (the stamp it carries).
    peer_recv_us: u64,
    /// For data, the ECN codepoint it was sent with; acknowledgements are Not-ECT.
    ecn: Ecn,
    /// For an acknowledgement, the receiver's count of CE-marked data so far (the echo it carries).
    ce_count: u64,
}

impl Packet {
    /// What the link model sees of it: its size on the path, its codepoint, its flow.
    fn info(&self, size_bytes: u32) -> PacketInfo {
        PacketInfo { size_bytes, ecn: self.ecn, flow: u64::from(self.flow) }
    }

    /// Its departure from a direction at `t_us`, as the link log has it.
    fn departure(&self, t_us: u64, bytes: u32, marked: bool) -> LinkDeparture {
        LinkDeparture { t_us, link_uid: self.link_uid, bytes, entry_us: self.entry_us, marked }
    }
}

/// An acknowledgement that left the path, waiting for its sender to read it.
#[derive(Debug, Clone, Copy)]
struct Unread {
    read_us: u64,
    seq: u64,
    peer_recv_us: u64,
    ce_count: u64,
}

struct FlowState {
    /// The sender's decisions, told the flow's own time (from `start_us`).
    sender: Flow,
    start_us: u64,
    end_us: u64,
    /// When the sender must next run (`NEVER`: only an acknowledgement can wake it).
    wake_us: u64,
    /// The receiver's tunnel UID of the next acknowledgement.
    next_ack_uid: u64,
    /// Data datagrams the receiver got marked CE (echoed in every acknowledgement, as
    /// pantheon-udp's receiver does).
    ce_received: u64,
    /// Wake-up latencies of this flow's receiver and sender.
    host: HostLatency,
    /// Acknowledgements arrived but not yet read, in reading order.
    unread: VecDeque<Unread>,
}

/// How much happened, for the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Datagrams entering a path, path events (departures, drops and, where recorded, delivery
    /// opportunities) and sender wake-ups.
    pub events: u64,
}

/// A run in progress: `advance_until` moves it on to any instant, so that a driver can act
/// between instants (the gym steers a window every decision interval, gym.rs); `run` moves it to
/// its end in one go.
pub struct Simulation<O: Observer> {
    /// The two directions, on the link's clock (link_clock.rs).
    uplink: PhasedPath<Packet>,
    downlink: PhasedPath<Packet>,
    flows: Vec<FlowState>,
    observer: O,
    runtime_us: u64,
    next_uplink_uid: u64,
    next_downlink_uid: u64,
    /// When the last acknowledgement entered the downlink (pushes must not go back in time).
    last_ack_entry_us: u64,
    /// The machine's stalls where receivers turn data into acknowledgements, and where senders
    /// read them (host.rs).
    receiver_stalls: Stalls,
    sender_stalls: Stalls,
    /// The instant of the last round, and how many rounds ran at it before (the guard against
    /// time standing still, `MAX_ROUNDS_PER_INSTANT`).
    last_round_us: u64,
    rounds_at_last: u64,
    totals: Totals,
}

/// Runs `scenario` to its end, telling `observer` everything the real experiment would log; an
/// error when the path lets a sender grow without bound (see `MAX_PACKETS_INSIDE`).
pub fn run<O: Observer>(scenario: &Scenario, observer: &mut O) -> Result<Totals, String> {
    let controllers = scenario
        .flows
        .iter()
        .map(|plan| controller::build(&plan.cc).expect("the scenario checked every spec"))
        .collect();
    let mut sim = Simulation::new(scenario, controllers, observer);
    sim.advance_until(scenario.runtime_us)?;
    sim.finish();
    Ok(sim.totals)
}

/// The run's µs at which a flow started at `start_us` meets `deadline` on its own clock: the
/// first whole µs not before it.
fn wake_time_us(start_us: u64, deadline: Instant) -> u64 {
    start_us.saturating_add(deadline.as_ns().div_ceil(NS_PER_US))
}

impl<O: Observer> Simulation<O> {
    /// The run of `scenario` at its start, flow i driven by `controllers[i]` (whatever the plan's
    /// spec says: `run` builds them from the specs, the gym brings its own).
    pub fn new(scenario: &Scenario, controllers: Vec<Box<dyn CongestionControl + Send>>, observer: O) -> Simulation<O> {
        assert_eq!(controllers.len(), scenario.flows.len(), "one controller per flow");
        let recording = observer.records_link();
        let paths = &scenario.paths;
        let phase_us = scenario.link_phase_us;
        let flows = scenario
            .flows
            .iter()
            .zip(controllers)
            .enumerate()
            .map(|(i, (plan, cc))| FlowState {
                sender: Flow::new(cc).with_ecn(plan.ecn),
                start_us: plan.start_us,
                end_us: plan.end_us,
                wake_us: plan.start_us,
                next_ack_uid: 0,
                ce_received: 0,
                host: HostLatency::new(paths.seed, i),
                unread: VecDeque::with_capacity(1024),
            })
            .collect();
        Simulation {
            uplink: PhasedPath::new(Path::new(&paths.uplink, paths.uplink_seed(), recording), phase_us),
            downlink: PhasedPath::new(Path::new(&paths.downlink, paths.downlink_seed(), recording), phase_us),
            flows,
            observer,
            runtime_us: scenario.runtime_us,
            next_uplink_uid: 0,
            next_downlink_uid: 0,
            last_ack_entry_us: 0,
            receiver_stalls: machine_stalls(paths.seed, 0),
            sender_stalls: machine_stalls(paths.seed, 1),
            last_round_us: 0,
            rounds_at_last: 0,
            totals: Totals::default(),
        }
    }

    pub fn observer_mut(&mut self) -> &mut O {
        &mut self.observer
    }

    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// Has flow `i`'s sender run at `t_us` (or earlier, if it is due earlier): a driver that
    /// changed what its controller decides (a new window) lets it act on the change at once
    /// rather than at its next acknowledgement. Nothing outside the flow's life.
    pub fn wake_sender(&mut self, i: usize, t_us: u64) {
        let flow = &mut self.flows[i];
        if flow.start_us <= t_us && t_us < flow.end_us {
            flow.wake_us = flow.wake_us.min(t_us);
        }
    }

    /// Simulates every instant before `until_us` (and before the run's end): afterwards the run
    /// stands at `until_us`, nothing at it done yet. Moving on in several calls does exactly what
    /// one call does (the `advancing_in_steps_is_one_run` test).
    pub fn advance_until(&mut self, until_us: u64) -> Result<(), String> {
        let until_us = until_us.min(self.runtime_us);
        loop {
            let up_us = self.uplink.next_wakeup_us().unwrap_or(NEVER);
            let down_us = self.downlink.next_wakeup_us().unwrap_or(NEVER);
            let flows_us = self.flows.iter().map(|f| f.wake_us).min().unwrap_or(NEVER);
            let t_us = up_us.min(down_us).min(flows_us);
            if t_us >= until_us {
                return Ok(());
            }
            self.rounds_at_last = if t_us == self.last_round_us { self.rounds_at_last + 1 } else { 0 };
            self.last_round_us = t_us;
            if self.rounds_at_last > MAX_ROUNDS_PER_INSTANT {
                return Err(format!(
                    "simulated time stands still at {t_us} us: datagrams cross an unlimited path without delay in no time; give --delay or a rate"
                ));
            }
            if self.uplink.packets_inside() + self.downlink.packets_inside() > MAX_PACKETS_INSIDE {
                return Err(format!(
                    "more than {MAX_PACKETS_INSIDE} datagrams inside the path at {t_us} us: a window grows without bound on a path without a rate or queue limit; give a rate or a queue limit"
                ));
            }
            if up_us <= t_us {
                self.poll_uplink(t_us);
            }
            if down_us <= t_us {
                self.poll_downlink(t_us);
            }
            if flows_us <= t_us {
                for i in 0..self.flows.len() {
                    if self.flows[i].wake_us <= t_us {
                        self.step_sender(i, t_us);
                    }
                }
            }
        }
    }

    /// Ends the run (after `advance_until` its end): an idle link has no wake-ups, but its
    /// opportunities up to the end belong in the logs, and so do the controllers' decision records.
    pub fn finish(&mut self) {
        if let Some(last_us) = self.runtime_us.checked_sub(1) {
            self.poll_uplink(last_us);
            self.poll_downlink(last_us);
        }
        for (i, flow) in self.flows.iter_mut().enumerate() {
            // Indigo alone keeps per-decision records (`record=1`), for its trainer.
            if let Some(records) = flow.sender.controller_mut::<Indigo>().and_then(Indigo::take_records) {
                self.observer.decisions(i, &records);
            }
        }
    }

    /// Serves the uplink through `t_us`: data reaches its receiver, which acknowledges it.
    fn poll_uplink(&mut self, t_us: u64) {
        let Simulation {
            uplink,
            downlink,
            flows,
            observer,
            next_downlink_uid,
            last_ack_entry_us,
            receiver_stalls,
            totals,
            ..
        } = self;
        uplink.poll(t_us, &mut |event| {
            totals.events += 1;
            match event {
                Event::Departure { t_us, packet, size_bytes, marked, .. } => {
                    observer.link_departure(Direction::Uplink, packet.departure(t_us, size_bytes, marked));
                    let f = packet.flow as usize;
                    let arrived_ecn = if marked { Ecn::Ce } else { packet.ecn };
                    observer.data_received(f, packet.uid, t_us, packet.entry_us, arrived_ecn);
                    let flow = &mut flows[f];
                    flow.ce_received += u64::from(arrived_ecn == Ecn::Ce);
                    let sent_us = (receiver_stalls.resume_us(t_us) + flow.host.next_us()).max(*last_ack_entry_us);
                    *last_ack_entry_us = sent_us;
                    let ack = Packet {
                        flow: packet.flow,
                        uid: flow.next_ack_uid,
                        seq: packet.uid,
                        link_uid: *next_downlink_uid,
                        entry_us: sent_us,
                        peer_recv_us: t_us,
                        ecn: Ecn::NotEct,
                        ce_count: flow.ce_received,
                    };
                    flow.next_ack_uid += 1;
                    *next_downlink_uid += 1;
                    observer.ack_sent(f, ack.uid, sent_us);
                    observer.link_entry(Direction::Downlink, sent_us, ack.link_uid, ACK_PATH_BYTES);
                    downlink.push(sent_us, ack, ack.info(ACK_PATH_BYTES));
                    totals.events += 1;
                }
                Event::Drop { t_us, packet, size_bytes, cause } => {
                    observer.link_drop(Direction::Uplink, t_us, packet.link_uid, size_bytes, cause)
                }
                Event::Opportunity { t_us } => observer.link_opportunity(Direction::Uplink, t_us),
                Event::LinkArrival { .. } => {}
            }
        });
    }

    /// Serves the downlink through `t_us`: acknowledgements reach their senders.
    fn poll_downlink(&mut self, t_us: u64) {
        let Simulation { downlink, flows, observer, sender_stalls, totals, .. } = self;
        downlink.poll(t_us, &mut |event| {
            totals.events += 1;
            match event {
                Event::Departure { t_us, packet, size_bytes, marked, .. } => {
                    observer.link_departure(Direction::Downlink, packet.departure(t_us, size_bytes, marked));
                    let f = packet.flow as usize;
                    observer.ack_received(f, packet.uid, t_us);
                    let flow = &mut flows[f];
                    if flow.start_us <= t_us && t_us < flow.end_us {
                        let after_us = flow.unread.back().map_or(0, |u| u.read_us);
                        let read_us = (sender_stalls.resume_us(t_us) + flow.host.next_us()).max(after_us);
                        let ack = Unread {
                            read_us,
                            seq: packet.seq,
                            peer_recv_us: packet.peer_recv_us,
                            ce_count: packet.ce_count,
                        };
                        flow.unread.push_back(ack);
                        flow.wake_us = flow.wake_us.min(read_us);
                    }
                }
                Event::Drop { t_us, packet, size_bytes, cause } => {
                    observer.link_drop(Direction::Downlink, t_us, packet.link_uid, size_bytes, cause)
                }
                Event::Opportunity { t_us } => observer.link_opportunity(Direction::Downlink, t_us),
                Event::LinkArrival { .. } => {}
            }
        });
    }

    /// Runs sender `i` at `t_us`: its timers, then every send the rule allows, then when it
    /// must run next.
    fn step_sender(&mut self, i: usize, t_us: u64) {
        let Simulation { uplink, flows, observer, next_uplink_uid, totals, .. } = self;
        let flow = &mut flows[i];
        totals.events += 1;
        if t_us >= flow.end_us {
            flow.wake_us = NEVER;
            return;
        }
        let now = Instant::from_us(t_us - flow.start_us);
        while let Some(ack) = flow.unread.front().copied().filter(|u| u.read_us <= t_us) {
            flow.unread.pop_front();
            // The receiver's clock is the run's: only its differences matter.
            flow.sender.on_ack(now, ack.seq, ack.peer_recv_us, ack.ce_count);
            flow.sender.detect_losses(now);
        }
        flow.sender.run_timers(now);
        let send_at = loop {
            match flow.sender.next_send(now) {
                Verdict::Send(permit) => {
                    let seq = flow.sender.next_seq();
                    let packet = Packet {
                        flow: i as u32,
                        uid: seq,
                        seq,
                        link_uid: *next_uplink_uid,
                        entry_us: t_us,
                        peer_recv_us: 0,
                        ecn: flow.sender.ecn(),
                        ce_count: 0,
                    };
                    *next_uplink_uid += 1;
                    observer.data_sent(i, seq, t_us, packet.ecn);
                    observer.link_entry(Direction::Uplink, t_us, packet.link_uid, DATA_PATH_BYTES);
                    uplink.push(t_us, packet, packet.info(DATA_PATH_BYTES));
                    flow.sender.on_sent(now, permit);
                    totals.events += 1;
                }
                Verdict::At(due) => break Some(due),
                Verdict::Closed => break None,
            }
        };
        flow.wake_us = match flow.sender.deadline(now, send_at) {
            // Real time always moves on: a deadline already due is met a microsecond later.
            Some(deadline) => wake_time_us(flow.start_us, deadline).max(t_us + 1),
            None => NEVER,
        };
        if let Some(ack) = flow.unread.front() {
            flow.wake_us = flow.wake_us.min(ack.read_us);
        }
        if flow.wake_us >= flow.end_us {
            // Nothing it could do after its end matters; the end itself needs no wake-up.
            flow.wake_us = NEVER;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use crate::scenario::FlowPlan;
    use pantheon_cli::path_options::PathArgs;

    #[test]
    fn datagram_sizes_are_the_tunnels() {
        assert_eq!((DATA_INNER_BYTES, DATA_PATH_BYTES), (1464, 1500));
        assert_eq!((ACK_INNER_BYTES, ACK_PATH_BYTES), (60, 96));
    }

    #[test]
    fn a_wait_in_nanoseconds_wakes_at_the_next_microsecond() {
        assert_eq!(wake_time_us(1_000, Instant::from_ns(11_712)), 1_012);
        assert_eq!(wake_time_us(1_000, Instant::from_ns(12_000)), 1_012);
        assert_eq!(wake_time_us(0, Instant::ZERO), 0);
    }

    #[test]
    fn advancing_in_steps_is_one_run() {
        let words: Vec<String> =
            ["--delay", "15", "--uplink-rate", "12", "--uplink-queue", "droptail", "--uplink-queue-bytes", "30000"]
                .map(String::from)
                .to_vec();
        let paths = PathArgs::validate_words(&words).unwrap();
        let runtime_us = 2_000_000;
        let flows = vec![
            FlowPlan::new(1, "cubic", 0.0, None, runtime_us).unwrap(),
            FlowPlan::new(2, "vegas", 0.5, Some(1.0), runtime_us).unwrap(),
        ];
        let scenario = Scenario::new(flows, runtime_us, paths).unwrap();
        let mut whole = Metrics::new(2, 16);
        let totals = run(&scenario, &mut whole).unwrap();
        // Intervals of the gym's 10 ms and of an odd 3.333 ms.
        for step_us in [10_000, 3_333] {
            let controllers = scenario.flows.iter().map(|p| controller::build(&p.cc).unwrap()).collect();
            let mut stepped = Simulation::new(&scenario, controllers, Metrics::new(2, 16));
            let mut t_us = 0;
            while t_us < runtime_us {
                t_us = (t_us + step_us).min(runtime_us);
                stepped.advance_until(t_us).unwrap();
            }
            stepped.finish();
            assert_eq!(stepped.totals(), totals);
            let Simulation { observer, .. } = stepped;
            assert_eq!(observer.finish(), Metrics { flows: whole.flows.clone() }.finish());
        }
    }
}
