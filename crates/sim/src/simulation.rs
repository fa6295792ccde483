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
//! - Each sender is `pantheon_cc::flow::Flow`: the same controller
//!   (`flow::controller::build`, `mss_bytes=1464`), bookkeeping, pacer, timers and send rule as
//!   the real sender (transport/src/sender.rs), told virtual time instead of reading a clock. Its
//!   clock starts at its start, as the real sender's does: a bulk flow's as late after its plan as
//!   the hosts start it (host.rs, `Scenario::starts_us`). A bulk flow has one sender; a flow with
//!   transfers one per transfer (`pantheon-udp send --bytes`), all through the flow's one tunnel.
//! - Every data datagram is 1464 bytes inside the tunnel and 1500 on the path (docs/tunnel.md:
//!   36 bytes of tunnel overhead); every acknowledgement is 60 inside (32 bytes of UDP payload,
//!   crates/cc/src/flow/datagram.rs) and 96 on the path. The tunnel's UIDs count per flow and
//!   direction, in the order datagrams enter it: with one sender a data datagram's UID is its
//!   sequence number; the senders of a flow with transfers share the count, and each datagram
//!   carries its sender and sequence number so that its acknowledgement finds its way back.
//! - A transfer's sender has a budget of ⌈bytes / 1464⌉ datagrams (`Flow::with_budget_packets`)
//!   and stops once all are acknowledged (`Flow::done`). Its transfer is complete when its
//!   receiver has that many distinct datagrams (the path neither duplicates nor retransmits, so
//!   arrivals are distinct): the `Observer::transfer_complete` instant, transfers.parquet's end.
//! - A flow's extra delay (`FlowPlan::extra_delay_us`) lies outside the bottleneck, between the
//!   tunnel and the path at the sender's side: its data enters the uplink that much after it
//!   entered the tunnel (one FIFO delay line for the run, ordered by due time then entry, which
//!   keeps each flow's order since its delay is constant), and its acknowledgements leave the
//!   tunnel at the sender that much after they left the downlink, and are read a host's wake-up
//!   later. The tunnel's times are where the tunnel takes them, so its one-way delays include it.
//! - All flows share one uplink and one downlink `pantheon_link::Path`, built from the same
//!   configuration and seeds (`PathPair::uplink_seed`) as pantheon-emu builds them — or, over a
//!   topology (topology.rs), each link is such a pair and each flow crosses the links of its
//!   route: its data the uplinks in the route's order, entering the next link `FORWARD_US` after
//!   it leaves one, its acknowledgements the downlinks in reverse order. A datagram marked CE on one
//!   link stays marked on the next. The extra delay lies before the route's first link. Where a
//!   link's downlink takes both acknowledgements made by receivers (flows whose route ends there)
//!   and acknowledgements coming from the next link (flows whose route goes on), those made wait
//!   on the delay line until their instant instead of entering ahead of it, so that every
//!   direction's pushes keep time's order. With one link nothing of this applies: a run without a
//!   topology is a one-link topology, bit for bit (`one_link_topology_is_the_path_bit_for_bit`).
//! - The receiver acknowledges each data datagram, stamped with the instant it arrived (the
//!   kernel's receive time, as the real receiver reads it); the acknowledgement enters the path a
//!   host's wake-up latency later, and the sender reads it a wake-up latency after it leaves the
//!   path (host.rs: seeded, measured on pantheon-emu runs; without it delay-based and
//!   rate-filtering controllers see a cleaner world than the emulator's). Acknowledgements enter
//!   the downlink, and are read, in the order they were made: a late one holds back those behind
//!   it, which then come together, as after a descheduled thread.
//! - A sender runs from its start to its end (or, with a budget, until done); after it, it sends
//!   nothing and hears nothing, but its datagrams in flight still arrive, are acknowledged and
//!   logged. The run ends at `runtime_us`: what is still in flight then is never delivered (lost,
//!   as in the harness).
//!
//! Scheduling: the next event is the earliest of each direction's `next_wakeup_us`, the delay
//! line's first due time and the earliest sender wake-up. Sender wake-ups are kept in a min-heap
//! of (wake µs, sender) with lazy invalidation: an entry counts only while it still equals its
//! sender's `wake_us`, so a sender not started costs its one entry and a finished one nothing,
//! and 10 000 transfers cost no more per event than a handful of flows (docs/sim.md, "Scale").
//! A sender's `Flow` is built at its start and dropped when its transfer is done, so that
//! senders waiting or finished hold no bookkeeping. At one instant the uplinks are served
//! first (in the topology's order), then the delay line releases into them, then the downlinks
//! are served (so an acknowledgement released at t reaches its sender at t), then the senders
//! due, in their order; data entering a path with no delay at t is served at t by the next round.
//! The order is fixed, so a run is a function of its scenario and seed alone.
//!
//! Time: µs (the link model's unit). The flow's `Instant`s are ns on the flow's clock; a sender
//! asked to wait until ns `d` is woken at µs ⌈d / 1000⌉, and the pacer, which schedules from due
//! times rather than send times (crates/cc/src/flow/pacer.rs), keeps the mean rate exact across that
//! rounding. Nothing is allocated per packet: the paths' and the bookkeeping's queues grow to
//! their high-water marks and are reused.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use pantheon_cc::flow::datagram::{ACK_BYTES, IP_UDP_HEADER_BYTES, PACKET_BYTES};
use pantheon_cc::flow::{controller, Flow, Instant, Verdict};
use pantheon_cc::indigo::Indigo;
use pantheon_cc::tao::Tao;
use pantheon_cc::CongestionControl;
use pantheon_format::tunnel_wire::OVERHEAD_BYTES;
use pantheon_link::stalls::Stalls;
use pantheon_link::{Ecn, Event, PacketInfo, Path};

use crate::host::{machine_stalls, HostLatency};
use crate::link_clock::PhasedPath;
use crate::observer::{Direction, Kept, LinkDeparture, Observer};
use crate::scenario::Scenario;
use crate::topology::Topology;

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
    /// The flow (records' number) whose tunnel carries it.
    flow: u32,
    /// The sender it belongs to, or whose data it acknowledges (the scenario's index).
    sender: u32,
    /// The tunnel's UID (per flow and direction).
    uid: u64,
    /// For an acknowledgement, the sequence number of the data it acknowledges; for data, its own
    /// (its sender's numbering).
    seq: u64,
    /// The direction's number for it, in the order datagrams entered (the link log's uid).
    link_uid: u64,
    /// When it entered the tunnel: for data, when its sender sent it (before the extra delay).
    sent_us: u64,
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
    /// What the link model sees of it: its size on the path, its codepoint, its flow (the
    /// tunnel's: one 5-tuple, as a flow queue of the emulator's fq_codel sees it).
    fn info(&self, size_bytes: u32) -> PacketInfo {
        PacketInfo { size_bytes, ecn: self.ecn, flow: u64::from(self.flow) }
    }

    /// Its departure from a direction at `t_us`, as the link log has it.
    fn departure(&self, t_us: u64, bytes: u32, marked: bool) -> LinkDeparture {
        LinkDeparture { t_us, link_uid: self.link_uid, bytes, entry_us: self.entry_us, marked }
    }
}

/// Between two links of a route, how long a datagram takes from leaving one to entering the next:
/// 20 µs, the median over 400 datagrams of a chain of two pantheon-emu (the inner's write to the
/// outer's read, through the kernel's forwarding in the namespace between them; p10 13 µs, p90 39
/// µs; docs/sim.md, "Topologies"). Not 0: with every link on one clock, data entering the next
/// link the instant it left one meets that link's opportunities at the same phase every time, and
/// DropTail queues then drop the long flow of a parking lot selectively (Floyd and Jacobson,
/// 1992), three to six times as often as the emulators do.
pub const FORWARD_US: u64 = 20;

/// A datagram due to enter a link at `due_us`: data on its flow's extra delay, bound for its
/// route's first uplink, a datagram forwarded from the previous link of its route, or an
/// acknowledgement bound for a downlink that takes others from the next link (the module's header).
#[derive(Debug, Clone, Copy)]
struct Delayed {
    due_us: u64,
    /// The run's count of datagrams put on the delay line: ties of due time leave in entry order.
    order: u64,
    packet: Packet,
    /// The link it enters, and which direction: the uplink (data) or the downlink.
    link: u32,
    uplink: bool,
}

impl PartialEq for Delayed {
    fn eq(&self, other: &Self) -> bool {
        (self.due_us, self.order) == (other.due_us, other.order)
    }
}

impl Eq for Delayed {}

impl PartialOrd for Delayed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Delayed {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.due_us, self.order).cmp(&(other.due_us, other.order))
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

/// Where a sender stands in its life.
enum Stage {
    /// Not started: its controller, to become its `Flow` at its start.
    Waiting(Box<dyn CongestionControl + Send>),
    /// Started: its decisions, told its own time (from `start_us`); boxed, as a waiting or
    /// finished sender needs none of its room.
    Running(Box<Flow>),
    /// Its transfer acknowledged in full: nothing left to decide or keep.
    Done,
}

/// One sender and its receiver.
struct FlowState {
    stage: Stage,
    /// The flow (records' number) it belongs to.
    flow: u32,
    ecn: bool,
    /// Its transfer's datagrams, `None` for a bulk flow.
    budget_packets: Option<u64>,
    start_us: u64,
    end_us: u64,
    /// Its flow's extra one-way delay each way, µs.
    extra_delay_us: u64,
    /// The first link of its flow's route.
    first_link: u32,
    /// When the sender must next run (`NEVER`: only an acknowledgement can wake it).
    wake_us: u64,
    /// Data datagrams the receiver got marked CE (echoed in every acknowledgement, as
    /// pantheon-udp's receiver does).
    ce_received: u64,
    /// Data datagrams the receiver got (all distinct: the path never duplicates).
    received_packets: u64,
    /// Wake-up latencies of this sender's receiver and of the sender.
    host: HostLatency,
    /// Acknowledgements arrived but not yet read, in reading order.
    unread: VecDeque<Unread>,
}

/// A flow's tunnel: its UIDs count per direction, whichever sender a datagram belongs to.
#[derive(Debug, Clone, Copy, Default)]
struct Tunnel {
    next_data_uid: u64,
    next_ack_uid: u64,
}

/// One direction of one link: its path on the link's clock (link_clock.rs), its count of datagrams
/// entered (the link log's uid), and whether the observer hears of it.
struct Lane {
    path: PhasedPath<Packet>,
    next_uid: u64,
    /// The link the link logs describe (`Topology::log_link`): its events go to the observer.
    logged: bool,
    /// Its next wake-up, as the instant being simulated began (`NEVER`: none).
    wake_us: u64,
}

impl Lane {
    fn new(config: &pantheon_link::PathConfig, seed: u64, recording: bool, logged: bool, phase_us: u64) -> Lane {
        let path = Path::new(config, seed, recording && logged);
        Lane { path: PhasedPath::new(path, phase_us), next_uid: 0, logged, wake_us: NEVER }
    }
}

/// How much happened, for the summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Datagrams entering a path, path events (departures, drops and, where recorded, delivery
    /// opportunities) and sender wake-ups.
    pub events: u64,
}

/// The senders' wake-ups: a min-heap of (wake µs, sender), each entry valid while it equals its
/// sender's `wake_us` (lazy invalidation: a changed wake-up pushes a new entry and leaves the
/// old one to be discarded when it comes up).
#[derive(Default)]
struct Wakeups {
    heap: BinaryHeap<Reverse<(u64, u32)>>,
}

impl Wakeups {
    /// Sets sender `i`'s wake-up.
    fn set(&mut self, i: usize, flow: &mut FlowState, wake_us: u64) {
        flow.wake_us = wake_us;
        if wake_us != NEVER {
            self.heap.push(Reverse((wake_us, i as u32)));
        }
    }

    /// The earliest wake-up of any sender, discarding stale entries on the way.
    fn earliest_us(&mut self, flows: &[FlowState]) -> u64 {
        while let Some(&Reverse((wake_us, i))) = self.heap.peek() {
            if flows[i as usize].wake_us == wake_us {
                return wake_us;
            }
            self.heap.pop();
        }
        NEVER
    }

    /// Takes the senders due by `t_us` into `due`, in their order, each once.
    fn take_due(&mut self, t_us: u64, flows: &[FlowState], due: &mut Vec<u32>) {
        due.clear();
        while let Some(&Reverse((wake_us, i))) = self.heap.peek() {
            if wake_us > t_us {
                break;
            }
            self.heap.pop();
            if flows[i as usize].wake_us == wake_us {
                due.push(i);
            }
        }
        due.sort_unstable();
        due.dedup();
    }
}

/// A run in progress: `advance_until` moves it on to any instant, so that a driver can act
/// between instants (the gym steers a window every decision interval, gym.rs); `run` moves it to
/// its end in one go.
pub struct Simulation<O: Observer> {
    /// Each link's two directions, in the topology's order: its uplink carries data, its
    /// downlink acknowledgements.
    uplinks: Vec<Lane>,
    downlinks: Vec<Lane>,
    /// Per flow, the links of its route (indices into `uplinks` and `downlinks`).
    routes: Vec<Box<[u32]>>,
    /// Per link, whether acknowledgements made for its downlink wait on the delay line (it takes
    /// others from the next link too).
    acks_wait: Vec<bool>,
    /// Data on its flow's extra delay, to enter its first uplink, datagrams on their way from one
    /// link to the next, and acknowledgements waiting to enter a downlink (earliest due first).
    delay_line: BinaryHeap<Reverse<Delayed>>,
    /// Datagrams put on the delay line so far (each one's `Delayed::order`).
    delayed_count: u64,
    /// The senders, in the scenario's order.
    flows: Vec<FlowState>,
    /// Per flow (records' number), its tunnel's counts.
    tunnels: Vec<Tunnel>,
    wakeups: Wakeups,
    /// The senders due at the instant being simulated (kept to reuse its room).
    due: Vec<u32>,
    observer: O,
    runtime_us: u64,
    /// When the receivers made the last acknowledgement (pushes must not go back in time).
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
    /// The run of `scenario` at its start, sender i driven by `controllers[i]` (whatever the
    /// plan's spec says: `run` builds them from the specs, the gym brings its own).
    pub fn new(scenario: &Scenario, controllers: Vec<Box<dyn CongestionControl + Send>>, observer: O) -> Simulation<O> {
        assert_eq!(controllers.len(), scenario.flows.len(), "one controller per sender");
        let recording = observer.records_link();
        let topology = &scenario.topology;
        let seed = topology.seed();
        let phase_us = scenario.link_phase_us;
        let routes: Vec<Box<[u32]>> =
            topology.routes.iter().map(|route| route.iter().map(|&k| k as u32).collect()).collect();
        let mut wakeups = Wakeups::default();
        let flows = scenario
            .flows
            .iter()
            .zip(controllers)
            .enumerate()
            .map(|(i, (plan, cc))| {
                let start_us = scenario.starts_us[i];
                let mut flow = FlowState {
                    stage: Stage::Waiting(cc),
                    flow: plan.flow as u32,
                    ecn: plan.ecn,
                    budget_packets: plan.budget_packets(),
                    start_us,
                    end_us: plan.end_us,
                    extra_delay_us: plan.extra_delay_us,
                    first_link: routes[plan.flow][0],
                    wake_us: NEVER,
                    ce_received: 0,
                    received_packets: 0,
                    host: HostLatency::new(seed, i),
                    unread: VecDeque::new(),
                };
                wakeups.set(i, &mut flow, start_us);
                flow
            })
            .collect();
        let lanes = |uplink: bool| {
            let lane = |(k, link): (usize, &crate::topology::Link)| {
                let logged = k == topology.log_link;
                let paths = &link.paths;
                match uplink {
                    true => Lane::new(&paths.uplink, paths.uplink_seed(), recording, logged, phase_us),
                    false => Lane::new(&paths.downlink, paths.downlink_seed(), recording, logged, phase_us),
                }
            };
            topology.links.iter().enumerate().map(lane).collect()
        };
        Simulation {
            uplinks: lanes(true),
            downlinks: lanes(false),
            acks_wait: acks_wait(topology),
            routes,
            delay_line: BinaryHeap::new(),
            delayed_count: 0,
            flows,
            tunnels: vec![Tunnel::default(); scenario.flow_count],
            wakeups,
            due: Vec::new(),
            observer,
            runtime_us: scenario.runtime_us,
            last_ack_entry_us: 0,
            receiver_stalls: machine_stalls(seed, 0),
            sender_stalls: machine_stalls(seed, 1),
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

    /// Has sender `i` run at `t_us` (or earlier, if it is due earlier): a driver that changed
    /// what its controller decides (a new window) lets it act on the change at once rather than
    /// at its next acknowledgement. Nothing outside the sender's life.
    pub fn wake_sender(&mut self, i: usize, t_us: u64) {
        let flow = &mut self.flows[i];
        if flow.start_us <= t_us && t_us < flow.end_us && t_us < flow.wake_us {
            self.wakeups.set(i, flow, t_us);
        }
    }

    /// Simulates every instant before `until_us` (and before the run's end): afterwards the run
    /// stands at `until_us`, nothing at it done yet. Moving on in several calls does exactly what
    /// one call does (the `advancing_in_steps_is_one_run` test).
    pub fn advance_until(&mut self, until_us: u64) -> Result<(), String> {
        match self.uplinks.len() {
            1 => self.advance::<false>(until_us),
            _ => self.advance::<true>(until_us),
        }
    }

    /// `advance_until`, `ROUTED` when the topology has more than one link: with one, the loop
    /// and the links' code carry no route look-up, no forwarding and no test of which link logs
    /// (2.3% fewer instructions per event than one code for both: callgrind, 1 Gbit/s, Cubic).
    fn advance<const ROUTED: bool>(&mut self, until_us: u64) -> Result<(), String> {
        let until_us = until_us.min(self.runtime_us);
        let links = if ROUTED { self.uplinks.len() } else { 1 };
        loop {
            let delayed_us = self.delay_line.peek().map_or(NEVER, |d| d.0.due_us);
            let mut links_us = NEVER;
            let mut on_links = 0;
            for lane in &mut self.uplinks {
                lane.wake_us = lane.path.next_wakeup_us().unwrap_or(NEVER);
                links_us = links_us.min(lane.wake_us);
                on_links += lane.path.packets_inside();
            }
            for lane in &mut self.downlinks {
                lane.wake_us = lane.path.next_wakeup_us().unwrap_or(NEVER);
                links_us = links_us.min(lane.wake_us);
                on_links += lane.path.packets_inside();
            }
            let flows_us = self.wakeups.earliest_us(&self.flows);
            let t_us = delayed_us.min(links_us).min(flows_us);
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
            let inside = on_links + self.delay_line.len();
            if inside > MAX_PACKETS_INSIDE {
                return Err(format!(
                    "more than {MAX_PACKETS_INSIDE} datagrams inside the path at {t_us} us: a window grows without bound on a path without a rate or queue limit; give a rate or a queue limit"
                ));
            }
            for k in 0..links {
                if self.uplinks[k].wake_us <= t_us {
                    self.poll_uplink::<ROUTED>(k, t_us);
                }
            }
            if delayed_us <= t_us {
                self.release_delayed(t_us);
            }
            for k in 0..links {
                if self.downlinks[k].wake_us <= t_us {
                    self.poll_downlink::<ROUTED>(k, t_us);
                }
            }
            if flows_us <= t_us {
                let mut due = std::mem::take(&mut self.due);
                self.wakeups.take_due(t_us, &self.flows, &mut due);
                for &i in &due {
                    self.step_sender(i as usize, t_us);
                }
                self.due = due;
            }
        }
    }

    /// Ends the run (after `advance_until` its end): an idle link has no wake-ups, but its
    /// opportunities up to the end belong in the logs, and so do the controllers' decision records.
    pub fn finish(&mut self) {
        if let Some(last_us) = self.runtime_us.checked_sub(1) {
            for k in 0..self.uplinks.len() {
                self.serve_uplink(k, last_us);
            }
            for k in 0..self.downlinks.len() {
                self.serve_downlink(k, last_us);
            }
        }
        for flow in &mut self.flows {
            if let Stage::Running(sender) = &mut flow.stage {
                keep_records(&mut self.observer, flow.flow, sender);
            }
        }
    }

    /// Puts the datagrams due by `t_us` off the delay line into their links: data off its flow's
    /// extra delay into its first uplink, datagrams forwarded from the previous link of their route,
    /// acknowledgements into their downlink.
    fn release_delayed(&mut self, t_us: u64) {
        while let Some(&Reverse(delayed)) = self.delay_line.peek() {
            if delayed.due_us > t_us {
                break;
            }
            self.delay_line.pop();
            let (lanes, direction, bytes) = match delayed.uplink {
                true => (&mut self.uplinks, Direction::Uplink, DATA_PATH_BYTES),
                false => (&mut self.downlinks, Direction::Downlink, ACK_PATH_BYTES),
            };
            let lane = &mut lanes[delayed.link as usize];
            let mut packet = delayed.packet;
            packet.link_uid = lane.next_uid;
            packet.entry_us = delayed.due_us;
            lane.next_uid += 1;
            if lane.logged {
                self.observer.link_entry(direction, packet.entry_us, packet.link_uid, bytes);
            }
            lane.path.push(packet.entry_us, packet, packet.info(bytes));
            self.totals.events += 1;
        }
    }

    /// Serves link `k`'s uplink through `t_us` (`finish`'s call: `advance` calls the variant
    /// for its topology).
    fn serve_uplink(&mut self, k: usize, t_us: u64) {
        match self.uplinks.len() {
            1 => self.poll_uplink::<false>(k, t_us),
            _ => self.poll_uplink::<true>(k, t_us),
        }
    }

    /// As `serve_uplink`, for the downlink.
    fn serve_downlink(&mut self, k: usize, t_us: u64) {
        match self.downlinks.len() {
            1 => self.poll_downlink::<false>(k, t_us),
            _ => self.poll_downlink::<true>(k, t_us),
        }
    }

    /// Serves link `k`'s uplink through `t_us`: data goes on to the next link of its route, or
    /// reaches its receiver, which acknowledges it. Without `ROUTED` (one link) every route is
    /// that link, every event is logged and no acknowledgement waits.
    fn poll_uplink<const ROUTED: bool>(&mut self, k: usize, t_us: u64) {
        let Simulation {
            uplinks,
            downlinks,
            routes,
            acks_wait,
            delay_line,
            delayed_count,
            flows,
            tunnels,
            observer,
            last_ack_entry_us,
            receiver_stalls,
            totals,
            ..
        } = self;
        let (uplink, downlink) = (&mut uplinks[k], &mut downlinks[k]);
        let (logged, acks_wait) = (uplink.logged, acks_wait[k]);
        uplink.path.poll(t_us, &mut |event| {
            totals.events += 1;
            match event {
                Event::Departure { t_us, packet, size_bytes, marked, .. } => {
                    if !ROUTED || logged {
                        observer.link_departure(Direction::Uplink, packet.departure(t_us, size_bytes, marked));
                    }
                    let arrived_ecn = if marked { Ecn::Ce } else { packet.ecn };
                    if let Some(next) = ROUTED.then(|| next_link(&routes[packet.flow as usize], k, true)).flatten() {
                        let packet = Packet { ecn: arrived_ecn, ..packet };
                        forward(delay_line, delayed_count, packet, next, true, t_us);
                        return;
                    }
                    let f = packet.flow as usize;
                    observer.data_received(f, packet.uid, t_us, packet.sent_us, arrived_ecn);
                    let sender = packet.sender as usize;
                    let flow = &mut flows[sender];
                    flow.ce_received += u64::from(arrived_ecn == Ecn::Ce);
                    flow.received_packets += 1;
                    if flow.budget_packets == Some(flow.received_packets) {
                        observer.transfer_complete(sender, t_us);
                    }
                    let sent_us = (receiver_stalls.resume_us(t_us) + flow.host.next_us()).max(*last_ack_entry_us);
                    *last_ack_entry_us = sent_us;
                    let tunnel = &mut tunnels[f];
                    let waits = ROUTED && acks_wait;
                    let ack = Packet {
                        flow: packet.flow,
                        sender: packet.sender,
                        uid: tunnel.next_ack_uid,
                        seq: packet.seq,
                        // Numbered when it enters the downlink, now or off the delay line.
                        link_uid: if waits { 0 } else { downlink.next_uid },
                        sent_us,
                        entry_us: sent_us,
                        peer_recv_us: t_us,
                        ecn: Ecn::NotEct,
                        ce_count: flow.ce_received,
                    };
                    tunnel.next_ack_uid += 1;
                    observer.ack_sent(f, ack.uid, sent_us);
                    if waits {
                        let delayed = Delayed {
                            due_us: sent_us,
                            order: *delayed_count,
                            packet: ack,
                            link: k as u32,
                            uplink: false,
                        };
                        delay_line.push(Reverse(delayed));
                        *delayed_count += 1;
                        return;
                    }
                    downlink.next_uid += 1;
                    if !ROUTED || downlink.logged {
                        observer.link_entry(Direction::Downlink, sent_us, ack.link_uid, ACK_PATH_BYTES);
                    }
                    downlink.path.push(sent_us, ack, ack.info(ACK_PATH_BYTES));
                    totals.events += 1;
                }
                Event::Drop { t_us, packet, size_bytes, cause } => {
                    if !ROUTED || logged {
                        observer.link_drop(Direction::Uplink, t_us, packet.link_uid, size_bytes, cause)
                    }
                    observer.data_lost(packet.flow as usize, packet.uid);
                }
                Event::Opportunity { t_us } => observer.link_opportunity(Direction::Uplink, t_us),
                Event::LinkArrival { .. } => {}
            }
        });
    }

    /// Serves link `k`'s downlink through `t_us`: acknowledgements go on to the previous link of
    /// their route, or reach their senders, after their flow's extra delay.
    fn poll_downlink<const ROUTED: bool>(&mut self, k: usize, t_us: u64) {
        let Simulation {
            downlinks,
            routes,
            delay_line,
            delayed_count,
            flows,
            wakeups,
            observer,
            sender_stalls,
            totals,
            runtime_us,
            ..
        } = self;
        let Lane { path, logged, .. } = &mut downlinks[k];
        let logged = *logged;
        path.poll(t_us, &mut |event| {
            totals.events += 1;
            match event {
                Event::Departure { t_us, packet, size_bytes, marked, .. } => {
                    if !ROUTED || logged {
                        observer.link_departure(Direction::Downlink, packet.departure(t_us, size_bytes, marked));
                    }
                    if let Some(next) = ROUTED.then(|| next_link(&routes[packet.flow as usize], k, false)).flatten() {
                        forward(delay_line, delayed_count, packet, next, false, t_us);
                        return;
                    }
                    let sender = packet.sender as usize;
                    let flow = &mut flows[sender];
                    // It leaves the tunnel at the sender's side after the flow's extra delay;
                    // after the run's end it never does.
                    let arrived_us = t_us + flow.extra_delay_us;
                    if arrived_us >= *runtime_us {
                        observer.ack_lost(packet.flow as usize, packet.uid);
                        return;
                    }
                    observer.ack_received(packet.flow as usize, packet.uid, arrived_us);
                    if flow.start_us <= arrived_us && arrived_us < flow.end_us {
                        let after_us = flow.unread.back().map_or(0, |u| u.read_us);
                        let read_us = (sender_stalls.resume_us(arrived_us) + flow.host.next_us()).max(after_us);
                        let ack = Unread {
                            read_us,
                            seq: packet.seq,
                            peer_recv_us: packet.peer_recv_us,
                            ce_count: packet.ce_count,
                        };
                        flow.unread.push_back(ack);
                        if read_us < flow.wake_us {
                            wakeups.set(sender, flow, read_us);
                        }
                    }
                }
                Event::Drop { t_us, packet, size_bytes, cause } => {
                    if !ROUTED || logged {
                        observer.link_drop(Direction::Downlink, t_us, packet.link_uid, size_bytes, cause)
                    }
                    observer.ack_lost(packet.flow as usize, packet.uid);
                }
                Event::Opportunity { t_us } => observer.link_opportunity(Direction::Downlink, t_us),
                Event::LinkArrival { .. } => {}
            }
        });
    }

    /// Runs sender `i` at `t_us`: its timers, then every send the rule allows, then when it
    /// must run next.
    fn step_sender(&mut self, i: usize, t_us: u64) {
        let Simulation { uplinks, delay_line, delayed_count, flows, tunnels, wakeups, observer, totals, .. } = self;
        let flow = &mut flows[i];
        totals.events += 1;
        if t_us >= flow.end_us {
            flow.wake_us = NEVER;
            return;
        }
        flow.stage = match std::mem::replace(&mut flow.stage, Stage::Done) {
            Stage::Waiting(cc) => {
                Stage::Running(Box::new(Flow::new(cc).with_ecn(flow.ecn).with_budget_packets(flow.budget_packets)))
            }
            stage => stage,
        };
        let Stage::Running(sender) = &mut flow.stage else {
            flow.wake_us = NEVER;
            return;
        };
        let now = Instant::from_us(t_us - flow.start_us);
        while let Some(ack) = flow.unread.front().copied().filter(|u| u.read_us <= t_us) {
            flow.unread.pop_front();
            // The receiver's clock is the run's: only its differences matter.
            sender.on_ack(now, ack.seq, ack.peer_recv_us, ack.ce_count);
            sender.detect_losses(now);
        }
        if sender.done() {
            // The transfer is acknowledged: the sender exits, as pantheon-udp's does.
            keep_records(observer, flow.flow, sender);
            flow.stage = Stage::Done;
            flow.end_us = t_us;
            flow.wake_us = NEVER;
            flow.unread = VecDeque::new();
            return;
        }
        sender.run_timers(now);
        let tunnel = &mut tunnels[flow.flow as usize];
        let send_at = loop {
            match sender.next_send(now) {
                Verdict::Send(permit) => {
                    let seq = sender.next_seq();
                    let mut packet = Packet {
                        flow: flow.flow,
                        sender: i as u32,
                        uid: tunnel.next_data_uid,
                        seq,
                        link_uid: 0,
                        sent_us: t_us,
                        entry_us: t_us,
                        peer_recv_us: 0,
                        ecn: sender.ecn(),
                        ce_count: 0,
                    };
                    tunnel.next_data_uid += 1;
                    observer.data_sent(flow.flow as usize, packet.uid, t_us, packet.ecn);
                    if flow.extra_delay_us == 0 {
                        let uplink = &mut uplinks[flow.first_link as usize];
                        packet.link_uid = uplink.next_uid;
                        uplink.next_uid += 1;
                        if uplink.logged {
                            observer.link_entry(Direction::Uplink, t_us, packet.link_uid, DATA_PATH_BYTES);
                        }
                        uplink.path.push(t_us, packet, packet.info(DATA_PATH_BYTES));
                        totals.events += 1;
                    } else {
                        // It enters the path, and counts as an event, when the delay line lets it.
                        let due_us = t_us + flow.extra_delay_us;
                        let order = *delayed_count;
                        delay_line.push(Reverse(Delayed {
                            due_us,
                            order,
                            packet,
                            link: flow.first_link,
                            uplink: true,
                        }));
                        *delayed_count += 1;
                    }
                    sender.on_sent(now, permit);
                }
                Verdict::At(due) => break Some(due),
                Verdict::Closed => break None,
            }
        };
        let mut wake_us = match sender.deadline(now, send_at) {
            // Real time always moves on: a deadline already due is met a microsecond later.
            Some(deadline) => wake_time_us(flow.start_us, deadline).max(t_us + 1),
            None => NEVER,
        };
        if let Some(ack) = flow.unread.front() {
            wake_us = wake_us.min(ack.read_us);
        }
        if wake_us >= flow.end_us {
            // Nothing it could do after its end matters; the end itself needs no wake-up.
            wake_us = NEVER;
        }
        wakeups.set(i, flow, wake_us);
    }
}

/// Puts a datagram that left a link at `left_us` on the delay line, to enter `next` (its uplink if
/// `uplink`) `FORWARD_US` later.
fn forward(
    delay_line: &mut BinaryHeap<Reverse<Delayed>>,
    delayed_count: &mut u64,
    packet: Packet,
    next: u32,
    uplink: bool,
    left_us: u64,
) {
    delay_line.push(Reverse(Delayed {
        due_us: left_us + FORWARD_US,
        order: *delayed_count,
        packet,
        link: next,
        uplink,
    }));
    *delayed_count += 1;
}

/// The link after link `k` on `route` (`forwards`: data's way) or before it (acknowledgements'),
/// if any. A route holds a link at most once, and a datagram crosses only its route's links.
fn next_link(route: &[u32], k: usize, forwards: bool) -> Option<u32> {
    let at = route.iter().position(|&link| link as usize == k).expect("a datagram crosses its route's links");
    match forwards {
        true => route.get(at + 1).copied(),
        false => at.checked_sub(1).map(|before| route[before]),
    }
}

/// Per link, whether its downlink takes both acknowledgements its receivers make (a route ends
/// there) and acknowledgements from the next link (a route goes on from there): then those made
/// wait on the delay line for their instant (the module's header). Never with one link.
fn acks_wait(topology: &Topology) -> Vec<bool> {
    let mut ends = vec![false; topology.links.len()];
    let mut goes_on = vec![false; topology.links.len()];
    for route in &topology.routes {
        let (&last, before) = route.split_last().expect("a route has a link");
        ends[last] = true;
        for &k in before {
            goes_on[k] = true;
        }
    }
    ends.iter().zip(goes_on).map(|(&end, on)| end && on).collect()
}

/// Hands the observer what `sender`'s controller kept for its trainer, if anything: Indigo's
/// decision records and Tao's rule tally (`record=1`).
fn keep_records<O: Observer>(observer: &mut O, flow: u32, sender: &mut Flow) {
    let kept = if let Some(indigo) = sender.controller_mut::<Indigo>() {
        indigo.take_records().map(Kept::Decisions)
    } else {
        sender.controller_mut::<Tao>().and_then(Tao::take_tally).map(Kept::Rules)
    };
    if let Some(kept) = kept {
        observer.kept(flow as usize, &kept);
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

    /// `scenario` run to its end by `advance_until` calls `step_us` apart, as the gym drives it.
    pub(super) fn run_in_steps<O: Observer>(scenario: &Scenario, observer: O, step_us: u64) -> Simulation<O> {
        let controllers = scenario.flows.iter().map(|p| controller::build(&p.cc).unwrap()).collect();
        let mut stepped = Simulation::new(scenario, controllers, observer);
        let mut t_us = 0;
        while t_us < scenario.runtime_us {
            t_us = (t_us + step_us).min(scenario.runtime_us);
            stepped.advance_until(t_us).unwrap();
        }
        stepped.finish();
        stepped
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
        let mut whole = Metrics::new(2);
        let totals = run(&scenario, &mut whole).unwrap();
        // Intervals of the gym's 10 ms and of an odd 3.333 ms.
        for step_us in [10_000, 3_333] {
            let stepped = run_in_steps(&scenario, Metrics::new(2), step_us);
            assert_eq!(stepped.totals(), totals);
            let Simulation { observer, .. } = stepped;
            assert_eq!(observer.finish(), Metrics { flows: whole.flows.clone() }.finish());
        }
    }

    #[test]
    fn transfers_with_extra_delay_advance_in_steps_as_one_run_and_stop_when_acknowledged() {
        let words: Vec<String> =
            ["--delay", "5", "--uplink-rate", "24", "--uplink-queue-bytes", "30000"].map(String::from).to_vec();
        let paths = PathArgs::validate_words(&words).unwrap();
        // BBR's start-up overflows the 20-packet queue: the transfers lose datagrams, which the
        // budget replaces, and finish by 1.8 s.
        let runtime_us = 3_000_000;
        let transfer = |start_s: f64, bytes: u64| {
            FlowPlan::new(2, "cubic", start_s, None, runtime_us).unwrap().with_bytes(bytes).with_extra_delay_us(7_000)
        };
        let flows = vec![
            FlowPlan::new(1, "bbr", 0.0, None, runtime_us).unwrap(),
            transfer(0.1, 50_000),
            transfer(0.1, 3_000),
            transfer(0.3, 400_000),
        ];
        let scenario = Scenario::new(flows, runtime_us, paths).unwrap();
        let mut whole = (Metrics::new(2), crate::transfers::Transfers::new(&scenario).unwrap());
        let totals = run(&scenario, &mut whole).unwrap();
        let ends: Vec<_> = whole.1.rows.iter().map(|r| r.end_us).collect();
        assert!(ends.iter().all(Option::is_some), "{ends:?}");
        for step_us in [10_000, 3_333] {
            let observer = (Metrics::new(2), crate::transfers::Transfers::new(&scenario).unwrap());
            let stepped = run_in_steps(&scenario, observer, step_us);
            assert_eq!(stepped.totals(), totals);
            // Every transfer's sender is done: it holds no bookkeeping and has no wake-up.
            for flow in &stepped.flows[1..] {
                assert!(matches!(flow.stage, Stage::Done) && flow.wake_us == NEVER);
            }
            let Simulation { observer: (metrics, transfers), .. } = stepped;
            assert_eq!(transfers.rows.iter().map(|r| r.end_us).collect::<Vec<_>>(), ends);
            assert_eq!(metrics.finish(), Metrics { flows: whole.0.flows.clone() }.finish());
        }
    }
}

#[cfg(test)]
mod topology_tests {
    use super::*;
    use crate::metrics::Metrics;
    use crate::records::Records;
    use crate::scenario::FlowPlan;
    use crate::topology::TopologySpec;
    use pantheon_cli::path_options::PathArgs;

    const RUN_US: u64 = 20_000_000;

    fn topology(text: &str, seed: u64) -> Topology {
        TopologySpec::parse_toml(text).unwrap().build(seed, None).unwrap()
    }

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    /// Each flow's metrics and the run's totals over `scenario`.
    fn metrics(scenario: &Scenario) -> (Vec<crate::metrics::FlowMetrics>, Totals) {
        let mut metrics = Metrics::new(scenario.flow_count);
        let totals = run(scenario, &mut metrics).unwrap();
        (metrics.finish(), totals)
    }

    #[test]
    fn one_link_topology_is_the_path_bit_for_bit() {
        let path = "--delay 20 --uplink-rate 12 --downlink-rate 12 --uplink-queue droptail --uplink-queue-bytes 60000 --uplink-loss 0.001";
        let text = format!(
            "routes = [[\"path\"], [\"path\"]]\n[[link]]\nname = \"path\"\npath = [{}]\n",
            words(path).iter().map(|w| format!("\"{w}\"")).collect::<Vec<_>>().join(", ")
        );
        let flows = vec![
            FlowPlan::new(1, "cubic", 0.0, None, RUN_US).unwrap(),
            FlowPlan::new(2, "vegas", 0.5, Some(10.0), RUN_US).unwrap().with_extra_delay_us(15_000),
        ];
        let mut path_words = words(path);
        path_words.extend(words("--seed 3"));
        let plain = Scenario::new(flows.clone(), RUN_US, PathArgs::validate_words(&path_words).unwrap()).unwrap();
        let routed = Scenario::over(flows, RUN_US, topology(&text, 3)).unwrap();
        let observed = |scenario: &Scenario| {
            let mut observer = (Records::new(2), Metrics::new(2));
            let totals = run(scenario, &mut observer).unwrap();
            (observer.0.finish(), observer.1.finish(), totals)
        };
        assert_eq!(observed(&routed), observed(&plain));
    }

    #[test]
    fn a_chain_delivers_at_its_slowest_links_rate() {
        // 24 then 6 Mbit/s: the second link is the bottleneck, its 30 kB queue the one that fills;
        // a flow's base one-way delay is the two links' 10 + 15 ms.
        let text = r#"
            routes = [["fast", "slow"]]
            [[link]]
            name = "fast"
            path = ["--delay", "10", "--uplink-rate", "24", "--uplink-queue-bytes", "60000"]
            [[link]]
            name = "slow"
            path = ["--delay", "15", "--uplink-rate", "6", "--uplink-queue-bytes", "30000"]
        "#;
        let flows = vec![FlowPlan::new(1, "cubic", 0.0, None, RUN_US).unwrap()];
        let (flows, _) = metrics(&Scenario::over(flows, RUN_US, topology(text, 1)).unwrap());
        let flow = &flows[0];
        // 6 Mbit/s of 1500-byte datagrams on the path is 5.86 of 1464-byte ones inside.
        assert!((5.6..5.86).contains(&flow.throughput_mbps), "{flow:?}");
        // 25 ms of propagation and at most the slow link's 20 datagrams of queue (40 ms).
        let p95_ms = flow.delay_p95_ms.unwrap();
        assert!((25.0..66.0).contains(&p95_ms), "{flow:?}");
        // The same link order reversed puts the queue first: the same rate comes out.
        let reversed = text.replace("[[\"fast\", \"slow\"]]", "[[\"slow\", \"fast\"]]");
        let flows = vec![FlowPlan::new(1, "cubic", 0.0, None, RUN_US).unwrap()];
        let (flows, _) = metrics(&Scenario::over(flows, RUN_US, topology(&reversed, 1)).unwrap());
        assert!((5.6..5.86).contains(&flows[0].throughput_mbps), "{:?}", flows[0]);
    }

    #[test]
    fn a_parking_lots_long_flow_gets_less_than_each_cross_flow() {
        let hop = r#"path = ["--delay", "10", "--uplink-rate", "12", "--uplink-queue-bytes", "60000"]"#;
        let text = format!(
            "routes = [[\"hop1\", \"hop2\"], [\"hop1\"], [\"hop2\"]]\n\
             [[link]]\nname = \"hop1\"\n{hop}\n[[link]]\nname = \"hop2\"\n{hop}\n"
        );
        let flows: Vec<_> = (1..=3).map(|i| FlowPlan::new(i, "cubic", 0.0, None, RUN_US).unwrap()).collect();
        let scenario = Scenario::over(flows, RUN_US, topology(&text, 2)).unwrap();
        let (flows, totals) = metrics(&scenario);
        let rates: Vec<f64> = flows.iter().map(|f| f.throughput_mbps).collect();
        // Each hop carries at most its 12 Mbit/s (11.71 inside the tunnel) ...
        assert!(rates[0] + rates[1] < 11.72 && rates[0] + rates[2] < 11.72, "{rates:?}");
        // ... and is kept busy, the long flow (two queues, twice the RTT) getting least.
        assert!(rates[0] + rates[1] > 10.5 && rates[0] + rates[2] > 10.5, "{rates:?}");
        assert!(rates[0] < rates[1] && rates[0] < rates[2], "{rates:?}");
        // Stepped as the gym steps a run, a topology runs as one run does.
        let stepped = super::tests::run_in_steps(&scenario, Metrics::new(3), 7_777);
        assert_eq!(stepped.totals(), totals);
        let Simulation { observer, .. } = stepped;
        assert_eq!(observer.finish(), flows);
    }

    #[test]
    fn acknowledgements_wait_only_where_routes_both_end_and_go_on() {
        let hop = r#"path = ["--delay", "1"]"#;
        let text = format!(
            "routes = [[\"a\", \"b\", \"c\"], [\"a\"], [\"b\", \"c\"]]\n\
             [[link]]\nname = \"a\"\n{hop}\n[[link]]\nname = \"b\"\n{hop}\n[[link]]\nname = \"c\"\n{hop}\n"
        );
        // a: flow 1 ends there, flow 0 goes on; b: only goes on; c: only ends.
        assert_eq!(acks_wait(&topology(&text, 0)), [true, false, false]);
        assert_eq!(next_link(&[2, 0, 1], 0, true), Some(1));
        assert_eq!(next_link(&[2, 0, 1], 0, false), Some(2));
        assert_eq!((next_link(&[2, 0, 1], 1, true), next_link(&[2, 0, 1], 2, false)), (None, None));
    }
}
