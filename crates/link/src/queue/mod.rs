//! The bottleneck's queue disciplines: each decides, per packet and in model time, whether a
//! packet waits, is dropped, or waits marked CE (ecn.rs), and which packet the link sends next.
//!
//! - `droptail`: a FIFO, unbounded or limited in packets or bytes (Mahimahi's `droptail` and
//!   `infinite`, the Pantheon paper's emulators).
//! - `codel`: CoDel (RFC 8289), dropping or marking at dequeue by sojourn time.
//! - `pie`: PIE (RFC 8033), a PI controller of queueing delay dropping or marking at enqueue.
//! - `fq_codel`: FQ-CoDel (RFC 8290), deficit round robin over hashed flows, CoDel in each.
//! - `red`: RED (Floyd & Jacobson 1993) in gentle mode, by the average queue length.
//! - `dualpi2`: DualPI2 (RFC 9332), the L4S reference: a classic and an L4S queue with coupled
//!   marking probabilities.
//!
//! Every discipline holds at most its `QueueLimit` (a discipline's own default when the command
//! line gives none); a packet that would take it past the limit is dropped with
//! `DropCause::Queue`, a packet the AQM decides to drop with `DropCause::Aqm`. The packet being
//! serialised onto the link is no longer in the queue. Parameters are given as Mahimahi gives
//! them (`--uplink-queue-args packets=1000,target=5,interval=100`, times in ms), `args.rs`.

pub mod args;
pub mod codel;
pub mod droptail;
pub mod dualpi2;
pub mod fifo;
pub mod fq_codel;
pub mod pie;
pub mod red;

use std::fmt;

use crate::ecn::Ecn;
use crate::event::DropCause;

pub use self::args::QueueArgs;

/// How much a queue may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    Infinite,
    /// At most this many packets waiting.
    Packets(u64),
    /// At most this many bytes waiting (IP datagram bytes).
    Bytes(u64),
}

impl QueueLimit {
    /// Whether a packet of `size_bytes` fits beside `packets` packets of `bytes` bytes.
    pub fn admits(self, packets: usize, bytes: u64, size_bytes: u32) -> bool {
        match self {
            QueueLimit::Infinite => true,
            QueueLimit::Packets(n) => (packets as u64) < n,
            QueueLimit::Bytes(n) => bytes + u64::from(size_bytes) <= n,
        }
    }
}

/// What the link model knows of a packet besides the packet itself: its size, its ECN codepoint
/// and which flow it belongs to (the emulator hashes the 5-tuple, the simulator uses the flow id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketInfo {
    /// IP datagram bytes.
    pub size_bytes: u32,
    pub ecn: Ecn,
    pub flow: u64,
}

impl PacketInfo {
    /// A packet that is not ECN-capable, of flow 0.
    pub fn plain(size_bytes: u32) -> PacketInfo {
        PacketInfo { size_bytes, ..PacketInfo::default() }
    }
}

/// A packet waiting in a queue.
#[derive(Debug)]
pub struct Queued<P> {
    pub packet: P,
    pub info: PacketInfo,
    /// When it entered the queue (after propagation delay, loss and policing).
    pub arrival_us: u64,
    /// The queue set CE on it (it arrived without).
    pub marked: bool,
}

impl<P> Queued<P> {
    pub fn new(packet: P, info: PacketInfo, arrival_us: u64) -> Self {
        Queued { packet, info, arrival_us, marked: false }
    }

    pub fn size_bytes(&self) -> u32 {
        self.info.size_bytes
    }

    /// Signals congestion by CE if the packet is ECN-capable (RFC 3168 §5: a CE packet stays CE);
    /// `false` if it is not, and must be dropped instead.
    pub fn mark_ce(&mut self) -> bool {
        if !self.info.ecn.is_capable() {
            return false;
        }
        if self.info.ecn != Ecn::Ce {
            self.info.ecn = Ecn::Ce;
            self.marked = true;
        }
        true
    }
}

/// Where a discipline hands the packets it drops, with why.
pub type Dropper<'a, P> = dyn FnMut(Queued<P>, DropCause) + 'a;

/// A queue discipline, sans-IO: told the time of every arrival and every chance to send.
pub trait Discipline<P>: fmt::Debug + Send {
    /// A packet reaches the queue at `t_us`. The discipline keeps it (perhaps marked), or drops it
    /// or another packet (FQ-CoDel drops from its longest queue): every dropped packet goes to
    /// `drop`.
    fn enqueue(&mut self, t_us: u64, item: Queued<P>, drop: &mut Dropper<'_, P>);

    /// The packet to serialise next, the link being free at `t_us`; packets the discipline drops
    /// on the way (CoDel drops at dequeue) go to `drop`.
    fn dequeue(&mut self, t_us: u64, drop: &mut Dropper<'_, P>) -> Option<Queued<P>>;

    fn len_packets(&self) -> usize;

    fn len_bytes(&self) -> u64;

    fn is_empty(&self) -> bool {
        self.len_packets() == 0
    }
}

/// Which discipline, with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Aqm {
    /// DropTail, or no limit at all: the Pantheon paper's queues.
    DropTail,
    CoDel(codel::CoDelParams),
    Pie(pie::PieParams),
    FqCoDel(fq_codel::FqCoDelParams),
    Red(red::RedParams),
    DualPi2(dualpi2::DualPi2Params),
}

/// The queue kinds a command line may name (`fq_codel` as Linux spells it, too).
pub const NAMES: [&str; 8] = ["droptail", "infinite", "codel", "pie", "fq-codel", "fq_codel", "red", "dualpi2"];

/// The kinds, as a message lists them.
pub const KINDS: &str = "droptail, infinite, codel, pie, fq-codel, red or dualpi2";

impl Aqm {
    /// The discipline `kind` with the parameters of `args` (`packets=`/`bytes=` are the limit,
    /// for every kind), as Mahimahi's `--uplink-queue KIND --uplink-queue-args ARGS`. The limit
    /// is `None` when `args` gives none. The error says what is wrong, in one line.
    pub fn parse(kind: &str, args: &str) -> Result<(Aqm, Option<QueueLimit>), String> {
        let mut args = QueueArgs::parse(kind, args)?;
        let limit = args.limit()?;
        let aqm = match kind {
            "droptail" | "infinite" => Aqm::DropTail,
            "codel" => Aqm::CoDel(codel::CoDelParams::from_args(&mut args)?),
            "pie" => Aqm::Pie(pie::PieParams::from_args(&mut args)?),
            "fq-codel" | "fq_codel" => Aqm::FqCoDel(fq_codel::FqCoDelParams::from_args(&mut args)?),
            "red" => Aqm::Red(red::RedParams::from_args(&mut args)?),
            "dualpi2" => Aqm::DualPi2(dualpi2::DualPi2Params::from_args(&mut args)?),
            other => return Err(format!("unknown queue '{other}'; use {KINDS}")),
        };
        args.finish()?;
        Ok((aqm, limit))
    }

    /// The name on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Aqm::DropTail => "droptail",
            Aqm::CoDel(_) => "codel",
            Aqm::Pie(_) => "pie",
            Aqm::FqCoDel(_) => "fq-codel",
            Aqm::Red(_) => "red",
            Aqm::DualPi2(_) => "dualpi2",
        }
    }

    /// The limit a discipline holds when the command line gives none: Linux's default for the
    /// AQMs (tc-codel(8), tc-fq_codel(8), tc-pie(8), tc-dualpi2(8); RED's is its own), none for
    /// DropTail (an infinite queue).
    pub fn default_limit(&self) -> QueueLimit {
        match self {
            Aqm::DropTail => QueueLimit::Infinite,
            Aqm::CoDel(_) => codel::DEFAULT_LIMIT,
            Aqm::Pie(_) => pie::DEFAULT_LIMIT,
            Aqm::FqCoDel(_) => fq_codel::DEFAULT_LIMIT,
            Aqm::Red(p) => p.default_limit(),
            Aqm::DualPi2(_) => dualpi2::DEFAULT_LIMIT,
        }
    }

    /// The parameters in `--uplink-queue-args` form (without the limit), for log headers and
    /// descriptions: what a run used, defaults included.
    pub fn args_text(&self) -> String {
        match self {
            Aqm::DropTail => String::new(),
            Aqm::CoDel(p) => p.to_string(),
            Aqm::Pie(p) => p.to_string(),
            Aqm::FqCoDel(p) => p.to_string(),
            Aqm::Red(p) => p.to_string(),
            Aqm::DualPi2(p) => p.to_string(),
        }
    }

    /// The discipline, built; `seed` seeds the random choices of those that make them (PIE,
    /// RED, DualPI2).
    pub fn build<P: Send + fmt::Debug + 'static>(&self, limit: QueueLimit, seed: u64) -> Box<dyn Discipline<P>> {
        match self {
            Aqm::DropTail => Box::new(droptail::DropTail::new(limit)),
            Aqm::CoDel(p) => Box::new(codel::CoDel::new(limit, p.clone())),
            Aqm::Pie(p) => Box::new(pie::Pie::new(limit, p.clone(), seed)),
            Aqm::FqCoDel(p) => Box::new(fq_codel::FqCoDel::new(limit, p.clone())),
            Aqm::Red(p) => Box::new(red::Red::new(limit, p.clone(), seed)),
            Aqm::DualPi2(p) => Box::new(dualpi2::DualPi2::new(limit, p.clone(), seed)),
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers for the disciplines' unit tests.
    use super::*;

    /// A packet numbered `id` of `size_bytes`, flow `flow`, codepoint `ecn`, arriving at `t_us`.
    pub fn packet(id: u32, size_bytes: u32, flow: u64, ecn: Ecn, t_us: u64) -> Queued<u32> {
        Queued::new(id, PacketInfo { size_bytes, ecn, flow }, t_us)
    }

    /// Enqueues, collecting drops into `dropped`.
    pub fn enqueue(q: &mut dyn Discipline<u32>, item: Queued<u32>, dropped: &mut Vec<(u32, DropCause)>) {
        let t_us = item.arrival_us;
        q.enqueue(t_us, item, &mut |d, cause| dropped.push((d.packet, cause)));
    }

    /// Dequeues at `t_us`, collecting drops into `dropped`.
    pub fn dequeue(q: &mut dyn Discipline<u32>, t_us: u64, dropped: &mut Vec<(u32, DropCause)>) -> Option<Queued<u32>> {
        q.dequeue(t_us, &mut |d, cause| dropped.push((d.packet, cause)))
    }
}
