//! FQ-CoDel, Flow Queue CoDel (RFC 8290): packets are hashed by flow into `flows` queues, each
//! under its own CoDel (codel.rs), and a deficit round robin (DRR) scheduler takes turns between
//! the queues that hold packets, `quantum` bytes a turn. Queues that have just become active (new
//! flows) are served before the others (old flows), so a sparse flow — a DNS lookup, an ACK
//! stream, a video call's frames — passes a backlogged bulk flow without waiting behind it, while
//! every backlogged flow gets an equal share of bytes and CoDel keeps each one's queue short.
//!
//! Implemented, in model time (`t_us`):
//! - §4.1 enqueue: the flow key (`PacketInfo::flow`) picks one of `flows` queues (below). A queue
//!   on neither list joins the tail of the new list with a deficit of one quantum. The limit counts
//!   every queue together; while the arriving packet does not fit, the head packet of the queue
//!   with the most bytes (the arriving packet counted in its own queue, as the RFC enqueues first)
//!   is dropped (`DropCause::Queue`). So the arriving packet is kept, unless its own queue, holding
//!   nothing else, is the fattest: then it is that queue's head and is dropped.
//! - §4.2 dequeue: take the first queue of the new list, else of the old list. A queue whose deficit
//!   is spent (≤ 0) gets another quantum and goes to the tail of the old list, and the search starts
//!   again. Otherwise CoDel dequeues from it (and may drop on the way); the packet's bytes come off
//!   the deficit. A queue that turns out empty leaves its list — except that an empty queue from
//!   the new list goes to the tail of the old list (§4.2), so that a flow sending one packet each
//!   time its queue empties cannot stay new forever and starve the old flows.
//! - Each queue's CoDel is RFC 8289's with the flow queue as its queue: sojourn times and the
//!   one-MTU floor are per flow, as in Linux.
//!
//! The flow hash: the key is already a hash (the emulator's, of the 5-tuple) or a small flow id
//! (the simulator's: 0, 1, 2 ...), so it is mixed by Fibonacci hashing (Knuth, TAOCP §6.4:
//! multiply by 2^64/φ, keep the top bits, scaled to `flows`), which spreads consecutive ids far
//! apart: ids 0 to 609 all have queues of their own among 1024 (610, a Fibonacci number, is the
//! first to share, with 0).
//!
//! Parameters (`--uplink-queue-args`, times in ms; RFC 8290 §5.2 and Linux's defaults): CoDel's
//! `target=5`, `interval=100`, `ecn=1`, `ce_threshold` unset (codel.rs); `flows=1024` (1 to
//! 65536, Linux's bounds) and `quantum=1514` bytes (a 1500-byte packet in an Ethernet frame; 256
//! to 1 MiB); limit `packets=10240` when none is given (tc-fq_codel(8)).
//!
//! Deviations:
//! - An overflow drops one packet at a time, as the RFC's text; Linux drops a batch of up to 64
//!   from the fattest queue (until half its bytes are gone), which sheds an overload in fewer,
//!   larger bursts.
//! - The hash has no random perturbation (Linux's jhash takes one per qdisc): a run is
//!   reproducible, and two flow keys that share a queue share it in every run.
//! - A quantum below 256 bytes is refused; Linux raises it to 256 silently.

use std::collections::VecDeque;
use std::fmt;

use super::codel::{CoDelParams, CoDelQueue};
use super::{Discipline, Dropper, QueueArgs, QueueLimit, Queued};
use crate::event::DropCause;

/// The limit when the command line gives none: Linux's, tc-fq_codel(8).
pub const DEFAULT_LIMIT: QueueLimit = QueueLimit::Packets(10240);

/// 2^64/φ, odd: Fibonacci hashing's multiplier.
const FIBONACCI: u64 = 0x9E37_79B9_7F4A_7C15;

#[derive(Debug, Clone, PartialEq)]
pub struct FqCoDelParams {
    /// Each flow queue's CoDel.
    pub codel: CoDelParams,
    /// How many queues flows are hashed into (RFC 8290 §5.2: 1024).
    pub flows: u32,
    /// Bytes a queue may send per round of the scheduler (§5.2: 1514, one full Ethernet frame).
    pub quantum_bytes: u32,
}

impl Default for FqCoDelParams {
    fn default() -> Self {
        FqCoDelParams { codel: CoDelParams::default(), flows: 1024, quantum_bytes: 1514 }
    }
}

impl FqCoDelParams {
    /// CoDel's keys, `flows` and `quantum` (bytes); defaults for those absent.
    pub fn from_args(args: &mut QueueArgs) -> Result<Self, String> {
        let d = FqCoDelParams::default();
        let codel = CoDelParams::from_args(args)?;
        let flows = args.count("flows", u64::from(d.flows), 1, 65_536)? as u32;
        let quantum_bytes = args.count("quantum", u64::from(d.quantum_bytes), 256, 1 << 20)? as u32;
        Ok(FqCoDelParams { codel, flows, quantum_bytes })
    }
}

impl fmt::Display for FqCoDelParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},flows={},quantum={}", self.codel, self.flows, self.quantum_bytes)
    }
}

/// Which of the scheduler's lists a flow queue is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

#[derive(Debug)]
struct Flow<P> {
    queue: CoDelQueue<P>,
    /// Bytes the queue may still send this round; negative after a packet larger than what was
    /// left.
    deficit_bytes: i64,
    list: List,
}

#[derive(Debug)]
pub struct FqCoDel<P> {
    limit: QueueLimit,
    params: FqCoDelParams,
    flows: Vec<Flow<P>>,
    /// Indices into `flows` of the queues that became active since they were last served dry.
    new_flows: VecDeque<usize>,
    /// Indices of the other active queues.
    old_flows: VecDeque<usize>,
    /// Packets in every queue.
    packets: usize,
    /// Bytes in every queue.
    bytes: u64,
}

impl<P> FqCoDel<P> {
    pub fn new(limit: QueueLimit, params: FqCoDelParams) -> Self {
        let n = params.flows as usize;
        let flows = (0..n).map(|_| Flow { queue: CoDelQueue::default(), deficit_bytes: 0, list: List::None }).collect();
        FqCoDel {
            limit,
            params,
            flows,
            new_flows: VecDeque::with_capacity(n),
            old_flows: VecDeque::with_capacity(n),
            packets: 0,
            bytes: 0,
        }
    }

    /// The queue of flow key `flow`: Fibonacci hashing, the product's top bits scaled to the
    /// number of queues.
    fn bucket(&self, flow: u64) -> usize {
        let mixed = flow.wrapping_mul(FIBONACCI);
        ((u128::from(mixed) * self.flows.len() as u128) >> 64) as usize
    }

    /// The queue with the most bytes (then the most packets), counting a packet of `size_bytes`
    /// in queue `arriving`.
    fn fattest(&self, arriving: usize, size_bytes: u32) -> usize {
        let weight = |i: usize| {
            let q = &self.flows[i].queue;
            let extra = if i == arriving { (u64::from(size_bytes), 1) } else { (0, 0) };
            (q.len_bytes() + extra.0, q.len_packets() + extra.1)
        };
        (0..self.flows.len()).max_by_key(|&i| (weight(i), std::cmp::Reverse(i))).unwrap_or(arriving)
    }
}

impl<P: Send + fmt::Debug> Discipline<P> for FqCoDel<P> {
    fn enqueue(&mut self, _t_us: u64, item: Queued<P>, drop: &mut Dropper<'_, P>) {
        let size_bytes = item.size_bytes();
        if !self.limit.admits(0, 0, size_bytes) {
            drop(item, DropCause::Queue);
            return;
        }
        let arriving = self.bucket(item.info.flow);
        while !self.limit.admits(self.packets, self.bytes, size_bytes) {
            let fattest = self.fattest(arriving, size_bytes);
            let Some(head) = self.flows[fattest].queue.pop_front() else {
                // The arriving packet's own empty queue is the fattest: it is that queue's head.
                drop(item, DropCause::Queue);
                return;
            };
            self.packets -= 1;
            self.bytes -= u64::from(head.size_bytes());
            drop(head, DropCause::Queue);
        }
        let flow = &mut self.flows[arriving];
        flow.queue.push_back(item);
        self.packets += 1;
        self.bytes += u64::from(size_bytes);
        if flow.list == List::None {
            flow.list = List::New;
            flow.deficit_bytes = i64::from(self.params.quantum_bytes);
            self.new_flows.push_back(arriving);
        }
    }

    fn dequeue(&mut self, t_us: u64, drop: &mut Dropper<'_, P>) -> Option<Queued<P>> {
        loop {
            let (index, from_new) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (i, true),
                (None, Some(&i)) => (i, false),
                (None, None) => return None,
            };
            let list = if from_new { &mut self.new_flows } else { &mut self.old_flows };
            let flow = &mut self.flows[index];
            if flow.deficit_bytes <= 0 {
                flow.deficit_bytes += i64::from(self.params.quantum_bytes);
                list.pop_front();
                flow.list = List::Old;
                self.old_flows.push_back(index);
                continue;
            }
            let (packets, bytes) = (flow.queue.len_packets(), flow.queue.len_bytes());
            let sent = flow.queue.dequeue(t_us, &self.params.codel, drop);
            self.packets -= packets - flow.queue.len_packets();
            self.bytes -= bytes - flow.queue.len_bytes();
            if let Some(item) = sent {
                flow.deficit_bytes -= i64::from(item.size_bytes());
                return Some(item);
            }
            list.pop_front();
            if from_new {
                flow.list = List::Old;
                self.old_flows.push_back(index);
            } else {
                flow.list = List::None;
            }
        }
    }

    fn len_packets(&self) -> usize {
        self.packets
    }

    fn len_bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ecn::Ecn;
    use crate::queue::testing::{dequeue, enqueue, packet};
    use crate::queue::Aqm;

    const A: u64 = 1;
    const B: u64 = 2;

    fn fq(limit: QueueLimit) -> FqCoDel<u32> {
        FqCoDel::new(limit, FqCoDelParams::default())
    }

    /// Packets `ids` of `size_bytes`, flow `flow`, arriving at 0; the drops.
    fn add(q: &mut FqCoDel<u32>, ids: std::ops::Range<u32>, size_bytes: u32, flow: u64) -> Vec<(u32, DropCause)> {
        let mut dropped = Vec::new();
        for id in ids {
            enqueue(q, packet(id, size_bytes, flow, Ecn::NotEct, 0), &mut dropped);
        }
        dropped
    }

    /// The next `n` packets sent at 0 µs (no sojourn, so CoDel never acts).
    fn take(q: &mut FqCoDel<u32>, n: usize) -> Vec<Queued<u32>> {
        (0..n).map_while(|_| dequeue(q, 0, &mut Vec::new())).collect()
    }

    fn ids(sent: &[Queued<u32>]) -> Vec<u32> {
        sent.iter().map(|p| p.packet).collect()
    }

    #[test]
    fn a_new_sparse_flow_is_served_before_a_backlogged_one() {
        let mut q = fq(QueueLimit::Infinite);
        add(&mut q, 0..10, 1500, A);
        // A is new with a quantum of 1514: 0 (deficit 14), 1 (−1486).
        assert_eq!(ids(&take(&mut q, 2)), [0, 1]);
        add(&mut q, 100..101, 100, B);
        // B joins the new list and goes first; A, its deficit spent, waits on the old list.
        assert_eq!(ids(&take(&mut q, 2)), [100, 2]);
    }

    #[test]
    fn a_new_flow_found_empty_waits_its_turn_on_the_old_list() {
        let mut q = fq(QueueLimit::Infinite);
        add(&mut q, 0..10, 1500, A);
        assert_eq!(ids(&take(&mut q, 2)), [0, 1]);
        add(&mut q, 100..101, 1000, B);
        // 100 (B's deficit 514); then B, found empty, goes behind A on the old list (A: 2).
        assert_eq!(ids(&take(&mut q, 2)), [100, 2]);
        let b = q.bucket(B);
        assert_eq!((q.flows[b].list, q.flows[b].deficit_bytes), (List::Old, 514));
        // Two more of B's: it is not new again, so it sends on its old deficit of 514 bytes
        // (101, to −486) and then waits for A's turn. Had it been removed (the rule §4.2 rules
        // out), it would have come back new with 1514 bytes and sent 101 and 102 back to back.
        add(&mut q, 101..103, 1000, B);
        assert!(q.new_flows.is_empty());
        assert_eq!(ids(&take(&mut q, 3)), [101, 3, 102]);
    }

    #[test]
    fn drr_shares_bytes_not_packets_between_backlogged_flows() {
        let mut q = fq(QueueLimit::Infinite);
        add(&mut q, 0..100, 1500, A);
        add(&mut q, 1000..1300, 500, B);
        // New-list turns: A sends 2 (1514 → 14 → −1486), B 4 (1514 → ... → −486). Then on the old
        // list, turns of 1514 more: A 1 packet (28, 42, ... left: 1500 bytes a turn), B 3 (1028,
        // 1042, ...: 1500 bytes a turn), the leftovers growing 14 bytes a turn.
        let sent = take(&mut q, 126);
        let flows: String = sent[..14].iter().map(|p| if p.info.flow == A { 'A' } else { 'B' }).collect();
        assert_eq!(flows, "AABBBBABBBABBB");
        let bytes = |flow| sent.iter().filter(|p| p.info.flow == flow).map(|p| u64::from(p.size_bytes())).sum::<u64>();
        // After the new-list turns and 30 old-list rounds: 32 packets of A, 94 of B.
        assert_eq!((bytes(A), bytes(B)), (32 * 1500, 94 * 500));
    }

    #[test]
    fn overflow_drops_the_head_of_the_fattest_flow() {
        let mut q = fq(QueueLimit::Packets(4));
        assert!(add(&mut q, 0..3, 1500, A).is_empty());
        assert!(add(&mut q, 10..11, 100, B).is_empty());
        // Full: B's arrival pushes out A's head (A holds 4500 bytes, B 200 with it).
        assert_eq!(add(&mut q, 11..12, 100, B), [(0, DropCause::Queue)]);
        // A's own arrival: A (4500 with it) is still the fattest; its oldest packet goes.
        assert_eq!(add(&mut q, 3..4, 1500, A), [(1, DropCause::Queue)]);
        assert_eq!((q.len_packets(), q.len_bytes()), (4, 3200));
        // A, new first, sends 2 and 3 on its quantum of 1514 bytes (to 14, then −1486).
        assert_eq!(ids(&take(&mut q, 5)), [2, 3, 10, 11]);

        // A byte limit: an arriving packet whose own, otherwise empty, queue is the fattest is
        // that queue's head, and is the one dropped (as Linux, which enqueues it first).
        let mut q = fq(QueueLimit::Bytes(3000));
        assert!(add(&mut q, 0..1, 1000, A).is_empty());
        assert_eq!(add(&mut q, 10..11, 2500, B), [(10, DropCause::Queue)]);
        assert_eq!(add(&mut q, 20..21, 4000, A), [(20, DropCause::Queue)]);
        assert_eq!((q.len_packets(), q.len_bytes()), (1, 1000));
    }

    #[test]
    fn codel_acts_per_flow() {
        // A standing queue in A (1000 packets at 0), sent one a ms while B's packets, one a ms,
        // leave within the ms they arrive: A's drops follow CoDel's schedule (first at 105 ms
        // when A alone had been above target since 5 ms), B is never dropped.
        let mut q = fq(QueueLimit::Infinite);
        add(&mut q, 0..1000, 1500, A);
        let mut drops = Vec::new();
        for t_ms in 0..=210u64 {
            let mut dropped = Vec::new();
            enqueue(&mut q, packet(10_000 + t_ms as u32, 100, B, Ecn::NotEct, t_ms * 1000), &mut dropped);
            for _ in 0..2 {
                dequeue(&mut q, t_ms * 1000, &mut dropped);
            }
            drops.extend(dropped.into_iter().map(|(id, cause)| (t_ms, id, cause)));
        }
        assert!(drops.iter().all(|&(_, id, cause)| id < 1000 && cause == DropCause::Aqm));
        assert_eq!(drops.iter().map(|d| d.0).collect::<Vec<_>>(), [105, 205]);
    }

    #[test]
    fn small_flow_ids_spread_over_the_queues() {
        let q = fq(QueueLimit::Infinite);
        let mut seen = std::collections::HashSet::new();
        assert!((0..610).all(|flow| seen.insert(q.bucket(flow))));
        assert_eq!(q.bucket(610), q.bucket(0));
        let one = FqCoDel::<u32>::new(QueueLimit::Infinite, FqCoDelParams { flows: 1, ..FqCoDelParams::default() });
        assert!([0, 1, u64::MAX].iter().all(|&flow| one.bucket(flow) == 0));
    }

    #[test]
    fn args_take_linuxs_names_and_print_back() {
        let (aqm, limit) = Aqm::parse("fq-codel", "").unwrap();
        assert_eq!((aqm.args_text().as_str(), limit), ("target=5,interval=100,ecn=1,flows=1024,quantum=1514", None));
        assert_eq!(aqm.default_limit(), QueueLimit::Packets(10_240));
        let (aqm, _) = Aqm::parse("fq_codel", "flows=16,quantum=300,ce_threshold=0.5,ecn=0").unwrap();
        let codel = CoDelParams { ecn: false, ce_threshold_us: Some(500), ..CoDelParams::default() };
        assert_eq!(aqm, Aqm::FqCoDel(FqCoDelParams { codel, flows: 16, quantum_bytes: 300 }));
        assert_eq!(aqm.args_text(), "target=5,interval=100,ecn=0,ce_threshold=0.5,flows=16,quantum=300");
        assert_eq!(Aqm::parse("fq-codel", &aqm.args_text()).unwrap().0, aqm);
    }

    #[test]
    fn bad_args_are_one_line_naming_the_key() {
        for (args, start) in [
            ("flows=0", "fq-codel flows: expected a whole number from 1 to 65536, got '0'"),
            ("quantum=100", "fq-codel quantum: expected a whole number from 256 to 1048576, got '100'"),
            ("target=x", "fq-codel target: expected a time in ms"),
            ("ecn=2", "fq-codel ecn: expected 1 or 0, got '2'"),
            ("drop_batch=64", "fq-codel: unknown parameter 'drop_batch'; fq-codel takes packets, bytes, target,"),
        ] {
            let e = Aqm::parse("fq-codel", args).unwrap_err();
            assert!(e.starts_with(start) && !e.contains('\n'), "{args}: {e}");
        }
    }
}
