//! What the simulation tells whoever watches it: every point at which the real experiment writes
//! a log line. The tunnel's four logs per flow (docs/tunnel.md: a datagram entering the tunnel at
//! one endpoint, leaving it at the other, for data and for acknowledgements) and the emulator's
//! link log per direction (docs/emulator.md: entering the path, leaving it, dropped, delivery
//! opportunities). The records (records.rs), the text logs (logs.rs) and the metrics
//! (metrics.rs) are observers; the simulation is generic over them, so a run that keeps no files
//! pays nothing for logging.
//!
//! Times are µs since the run's start; flows are numbered from 0 here (flow 1 of the command line
//! is 0), as in the harness's file names and records. A flow is a tunnel (several senders of
//! transfers may share one); `transfer_complete` alone names a sender.

use pantheon_cc::{indigo, tao};
use pantheon_link::{DropCause, Ecn};

/// A direction of the path: the uplink carries data from the senders, the downlink carries
/// acknowledgements back (docs/harness.md: data flows on the emulator's uplink).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Uplink,
    Downlink,
}

/// A datagram leaving a direction of the path (the link log's `-` line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkDeparture {
    pub t_us: u64,
    pub link_uid: u64,
    pub bytes: u32,
    pub entry_us: u64,
    /// The queue set CE on it.
    pub marked: bool,
}

/// What a learned controller keeps for its trainer when asked (`record=1`), handed over once per
/// flow, at its end: the one mechanism by which a controller's own records leave a run
/// (`pantheon-sim batch` returns them, docs/sim.md).
#[derive(Debug, Clone, PartialEq)]
pub enum Kept {
    /// Indigo's per-decision records (crates/cc/src/indigo/records.rs), as `decisions`.
    Decisions(indigo::Records),
    /// Tao's per-rule uses and memories (crates/cc/src/tao/tally.rs), as `rules`.
    Rules(tao::RuleTally),
}

/// Every method has a default that ignores the event, so an observer names only what it uses.
pub trait Observer {
    /// Whether the paths must report every delivery opportunity, used or not (the link logs'
    /// `#` lines, from which capacity is computed). Costs one event per opportunity.
    fn records_link(&self) -> bool {
        false
    }
    /// Data datagram `uid` of `flow` entered the tunnel at its sender, carrying ECN codepoint `ecn`.
    fn data_sent(&mut self, _flow: usize, _uid: u64, _t_us: u64, _ecn: Ecn) {}
    /// It left the tunnel at the receiver; it had been sent at `sent_us`; `ecn` is its codepoint
    /// on arrival (CE if a queue marked it).
    fn data_received(&mut self, _flow: usize, _uid: u64, _t_us: u64, _sent_us: u64, _ecn: Ecn) {}
    /// Acknowledgement `uid` of `flow` entered the tunnel at the receiver.
    fn ack_sent(&mut self, _flow: usize, _uid: u64, _t_us: u64) {}
    /// It left the tunnel at the sender.
    fn ack_received(&mut self, _flow: usize, _uid: u64, _t_us: u64) {}
    /// Data datagram `uid` of `flow` will never leave the tunnel: a link of its route dropped it
    /// (logged or not). With `data_received`, what makes a datagram's record final (records.rs).
    fn data_lost(&mut self, _flow: usize, _uid: u64) {}
    /// Acknowledgement `uid` of `flow` will never leave the tunnel: a link dropped it, or it left
    /// the path too late to leave the tunnel before the run's end.
    fn ack_lost(&mut self, _flow: usize, _uid: u64) {}
    /// A datagram of `bytes` (on the path: tunnel overhead included) entered a direction; the
    /// direction numbers its datagrams from 0 in this order.
    fn link_entry(&mut self, _direction: Direction, _t_us: u64, _link_uid: u64, _bytes: u32) {}
    /// It left a direction; `marked`: the queue set CE on it.
    fn link_departure(&mut self, _direction: Direction, _departure: LinkDeparture) {}
    fn link_drop(&mut self, _direction: Direction, _t_us: u64, _link_uid: u64, _bytes: u32, _cause: DropCause) {}
    fn link_opportunity(&mut self, _direction: Direction, _t_us: u64) {}
    /// The receiver of `sender` (the scenario's index of a sender with a transfer) got the last
    /// distinct datagram of its budget at `t_us`: the transfer is complete.
    fn transfer_complete(&mut self, _sender: usize, _t_us: u64) {}
    /// At the run's end (or when a transfer's sender is done): what `flow`'s controller kept for
    /// its trainer, if it kept anything (`record=1` of a learned controller, `Kept`).
    fn kept(&mut self, _flow: usize, _kept: &Kept) {}
}

/// An observer lent to a run (`simulation::run` borrows its caller's).
impl<O: Observer + ?Sized> Observer for &mut O {
    fn records_link(&self) -> bool {
        (**self).records_link()
    }
    fn data_sent(&mut self, flow: usize, uid: u64, t_us: u64, ecn: Ecn) {
        (**self).data_sent(flow, uid, t_us, ecn);
    }
    fn data_received(&mut self, flow: usize, uid: u64, t_us: u64, sent_us: u64, ecn: Ecn) {
        (**self).data_received(flow, uid, t_us, sent_us, ecn);
    }
    fn ack_sent(&mut self, flow: usize, uid: u64, t_us: u64) {
        (**self).ack_sent(flow, uid, t_us);
    }
    fn ack_received(&mut self, flow: usize, uid: u64, t_us: u64) {
        (**self).ack_received(flow, uid, t_us);
    }
    fn data_lost(&mut self, flow: usize, uid: u64) {
        (**self).data_lost(flow, uid);
    }
    fn ack_lost(&mut self, flow: usize, uid: u64) {
        (**self).ack_lost(flow, uid);
    }
    fn link_entry(&mut self, direction: Direction, t_us: u64, link_uid: u64, bytes: u32) {
        (**self).link_entry(direction, t_us, link_uid, bytes);
    }
    fn link_departure(&mut self, direction: Direction, departure: LinkDeparture) {
        (**self).link_departure(direction, departure);
    }
    fn link_drop(&mut self, direction: Direction, t_us: u64, link_uid: u64, bytes: u32, cause: DropCause) {
        (**self).link_drop(direction, t_us, link_uid, bytes, cause);
    }
    fn link_opportunity(&mut self, direction: Direction, t_us: u64) {
        (**self).link_opportunity(direction, t_us);
    }
    fn transfer_complete(&mut self, sender: usize, t_us: u64) {
        (**self).transfer_complete(sender, t_us);
    }
    fn kept(&mut self, flow: usize, kept: &Kept) {
        (**self).kept(flow, kept);
    }
}

/// Two observers watching the same run (the records and the metrics of `pantheon-sim run`).
impl<A: Observer, B: Observer> Observer for (A, B) {
    fn records_link(&self) -> bool {
        self.0.records_link() || self.1.records_link()
    }
    fn data_sent(&mut self, flow: usize, uid: u64, t_us: u64, ecn: Ecn) {
        self.0.data_sent(flow, uid, t_us, ecn);
        self.1.data_sent(flow, uid, t_us, ecn);
    }
    fn data_received(&mut self, flow: usize, uid: u64, t_us: u64, sent_us: u64, ecn: Ecn) {
        self.0.data_received(flow, uid, t_us, sent_us, ecn);
        self.1.data_received(flow, uid, t_us, sent_us, ecn);
    }
    fn ack_sent(&mut self, flow: usize, uid: u64, t_us: u64) {
        self.0.ack_sent(flow, uid, t_us);
        self.1.ack_sent(flow, uid, t_us);
    }
    fn ack_received(&mut self, flow: usize, uid: u64, t_us: u64) {
        self.0.ack_received(flow, uid, t_us);
        self.1.ack_received(flow, uid, t_us);
    }
    fn data_lost(&mut self, flow: usize, uid: u64) {
        self.0.data_lost(flow, uid);
        self.1.data_lost(flow, uid);
    }
    fn ack_lost(&mut self, flow: usize, uid: u64) {
        self.0.ack_lost(flow, uid);
        self.1.ack_lost(flow, uid);
    }
    fn link_entry(&mut self, direction: Direction, t_us: u64, link_uid: u64, bytes: u32) {
        self.0.link_entry(direction, t_us, link_uid, bytes);
        self.1.link_entry(direction, t_us, link_uid, bytes);
    }
    fn link_departure(&mut self, direction: Direction, departure: LinkDeparture) {
        self.0.link_departure(direction, departure);
        self.1.link_departure(direction, departure);
    }
    fn link_drop(&mut self, direction: Direction, t_us: u64, link_uid: u64, bytes: u32, cause: DropCause) {
        self.0.link_drop(direction, t_us, link_uid, bytes, cause);
        self.1.link_drop(direction, t_us, link_uid, bytes, cause);
    }
    fn link_opportunity(&mut self, direction: Direction, t_us: u64) {
        self.0.link_opportunity(direction, t_us);
        self.1.link_opportunity(direction, t_us);
    }
    fn transfer_complete(&mut self, sender: usize, t_us: u64) {
        self.0.transfer_complete(sender, t_us);
        self.1.transfer_complete(sender, t_us);
    }
    fn kept(&mut self, flow: usize, kept: &Kept) {
        self.0.kept(flow, kept);
        self.1.kept(flow, kept);
    }
}

/// An observer a run may go without (the text logs of `pantheon-sim run --text-logs`).
impl<O: Observer> Observer for Option<O> {
    fn records_link(&self) -> bool {
        self.as_ref().is_some_and(O::records_link)
    }
    fn data_sent(&mut self, flow: usize, uid: u64, t_us: u64, ecn: Ecn) {
        if let Some(o) = self {
            o.data_sent(flow, uid, t_us, ecn);
        }
    }
    fn data_received(&mut self, flow: usize, uid: u64, t_us: u64, sent_us: u64, ecn: Ecn) {
        if let Some(o) = self {
            o.data_received(flow, uid, t_us, sent_us, ecn);
        }
    }
    fn ack_sent(&mut self, flow: usize, uid: u64, t_us: u64) {
        if let Some(o) = self {
            o.ack_sent(flow, uid, t_us);
        }
    }
    fn ack_received(&mut self, flow: usize, uid: u64, t_us: u64) {
        if let Some(o) = self {
            o.ack_received(flow, uid, t_us);
        }
    }
    fn data_lost(&mut self, flow: usize, uid: u64) {
        if let Some(o) = self {
            o.data_lost(flow, uid);
        }
    }
    fn ack_lost(&mut self, flow: usize, uid: u64) {
        if let Some(o) = self {
            o.ack_lost(flow, uid);
        }
    }
    fn link_entry(&mut self, direction: Direction, t_us: u64, link_uid: u64, bytes: u32) {
        if let Some(o) = self {
            o.link_entry(direction, t_us, link_uid, bytes);
        }
    }
    fn link_departure(&mut self, direction: Direction, departure: LinkDeparture) {
        if let Some(o) = self {
            o.link_departure(direction, departure);
        }
    }
    fn link_drop(&mut self, direction: Direction, t_us: u64, link_uid: u64, bytes: u32, cause: DropCause) {
        if let Some(o) = self {
            o.link_drop(direction, t_us, link_uid, bytes, cause);
        }
    }
    fn link_opportunity(&mut self, direction: Direction, t_us: u64) {
        if let Some(o) = self {
            o.link_opportunity(direction, t_us);
        }
    }
    fn transfer_complete(&mut self, sender: usize, t_us: u64) {
        if let Some(o) = self {
            o.transfer_complete(sender, t_us);
        }
    }
    fn kept(&mut self, flow: usize, kept: &Kept) {
        if let Some(o) = self {
            o.kept(flow, kept);
        }
    }
}
