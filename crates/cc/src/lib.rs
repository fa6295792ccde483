//! Pantheon's congestion-control algorithms, sans-IO: the UDP transport (real time) and the
//! simulator (virtual time) drive the same controllers, so an algorithm cannot behave differently
//! in the two by construction (see docs/cc.md for the driver's contract).
//!
//! A controller is told the time and the events of one flow — a packet sent, a packet
//! acknowledged, a packet declared lost, a wake-up it asked for — and answers with a `Decision`:
//! a congestion window, a pacing rate, or both, and when it next wants to be woken. It never
//! reads a clock, touches a socket, starts a thread or allocates per packet. The bookkeeping that
//! turns raw acknowledgements into these events (RTT estimation, loss detection, delivery-rate
//! samples) is shared by every driver and lives in `sent_packets`; the send rule around it (when
//! may the next datagram go, pacing, timers, silence probing) is `flow`, which the UDP transport
//! and the simulator both drive, so a controller added here runs in both with nothing else to
//! write.
//!
//! ECN: the receiver counts the CE-marked data datagrams it got and echoes the count in every
//! acknowledgement (as AccECN does); `flow::Flow` turns the count's increase into `Acked::ce_marks`
//! and, when there is one, tells the controller `on_congestion_mark` before `on_ack`. A classic
//! controller (`scalable_ecn` is `None`, the default) sends Not-ECT unless the driver turns
//! RFC 3168 ECN on (`Flow::with_ecn`, ECT(0)); the flow passes it at most one mark per smoothed RTT
//! (RFC 3168 §6.1.2: respond "at most once per window"), and the default `on_congestion_mark`
//! responds as to the loss of the marked datagram (RFC 3168 §6.1.2: as for a dropped packet). A
//! scalable controller (RFC 9331 §4.3: DCTCP, Prague) names its codepoint in `scalable_ecn`, always
//! sends it, and is told every mark.
//!
//! Layout: one file per algorithm, a family in its folder with the helpers only it uses
//! (`pcc/`, `sprout/`, `verus/`, `indigo/`, `tao/`); `fixed` is a constant window, Indigo's yardstick; `cbr` a constant rate, unresponsive cross
//! traffic and latency probes;
//! `filter` serves several families; `params` (a spec's parameters and their error) is a leaf the
//! algorithms import, and `registry` (`build`, `KNOWN`) imports the algorithms. build.rs builds
//! Indigo's committed weights (data/indigo/) and Tao's rule trees (data/tao/) into the crate.
//!
//! Units everywhere: times are microseconds on the driver's clock (`*_us`), except
//! `peer_recv_us`, which is on the receiver's clock; sizes are bytes as the driver counts them
//! (the simulator and the transport count IP datagram bytes, as the link model does); rates are
//! bits per second (`*_bps`; Mbit/s, `*_mbps`, only in a spec's parameters and inside a paper's
//! formula written in Mbit/s, docs/architecture.md's rule). `flow` alone also needs nanoseconds
//! (pacing) and wraps both in a time type, `flow::Instant`.

use std::any::Any;

pub use pantheon_link::Ecn;

pub mod bbr;
pub mod cbr;
pub mod copa;
pub mod cubic;
pub mod dctcp;
pub mod filter;
pub mod fixed;
pub mod flow;
pub mod indigo;
pub mod ledbat;
pub mod params;
pub mod pcc;
pub mod prague;
pub mod registry;
pub mod reno;
pub mod scream;
pub mod sent_packets;
pub mod sprout;
pub mod tao;
#[cfg(test)]
mod testing;
pub mod vegas;
pub mod verus;

pub use params::SpecError;
pub use registry::{build, KNOWN};
pub use sent_packets::SentPackets;

/// The packet size every algorithm assumes unless configured otherwise: one 1500-byte delivery
/// opportunity of the link model (Mahimahi's MTU), so "a packet" means the same thing to the
/// controller and to the link.
pub const DEFAULT_MSS_BYTES: u64 = 1500;

/// Initial window of the window-based algorithms, in packets: RFC 6928 (IW10), the Linux default
/// that the kernel schemes Pantheon compares against start with.
pub const DEFAULT_INITIAL_CWND_PACKETS: u64 = 10;

/// A packet left the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub now_us: u64,
    pub seq: u64,
    pub bytes: u64,
    /// Bytes in flight including this packet.
    pub inflight_bytes: u64,
}

/// A packet was acknowledged (every packet is acknowledged on its own). The `*_at_send` fields are
/// the connection's delivery state when this packet was sent, as in
/// draft-cheng-iccrg-delivery-rate-estimation §3.2, so that a controller can compute a delivery
/// rate sample (`delivery_rate_bps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acked {
    pub now_us: u64,
    pub seq: u64,
    pub bytes: u64,
    pub sent_us: u64,
    /// When the peer received the packet, on the peer's clock: only differences between two such
    /// times, or against `sent_us` up to an unknown constant offset, mean anything.
    pub peer_recv_us: u64,
    /// This packet's round-trip time, `now_us - sent_us`.
    pub rtt_us: u64,
    /// Smoothed RTT after this sample (RFC 6298 §2).
    pub srtt_us: u64,
    /// Smallest RTT sample of the flow so far.
    pub min_rtt_us: u64,
    /// Bytes delivered (acknowledged) over the flow's life, this packet included.
    pub delivered_bytes: u64,
    pub delivered_bytes_at_send: u64,
    /// When `delivered_bytes_at_send` was last increased.
    pub delivered_time_at_send_us: u64,
    /// Send time of the packet acknowledged last before this one was sent.
    pub first_sent_time_at_send_us: u64,
    /// Bytes still in flight, this packet no longer counted.
    pub inflight_bytes: u64,
    /// The sender had less to send than the controller allowed when this packet left.
    pub app_limited: bool,
    /// CE marks newly reported by this acknowledgement: the increase of the receiver's cumulative
    /// count of CE-marked datagrams over the largest count seen before (plus marks reported by
    /// acknowledgements that gave no event, late ones). Each datagram is acknowledged on its own,
    /// so in order it is 1 exactly when this datagram was marked.
    pub ce_marks: u64,
}

impl Acked {
    /// The delivery rate sample this acknowledgement gives (draft-cheng-iccrg-delivery-rate-
    /// estimation §3.3): bytes delivered between this packet's send and its acknowledgement, over
    /// the longer of the send and the acknowledgement intervals. `None` when the interval is
    /// shorter than the minimum RTT, which only ACK compression can cause (§3.3's filter).
    pub fn delivery_rate_bps(&self) -> Option<u64> {
        let delivered_bytes = self.delivered_bytes - self.delivered_bytes_at_send;
        let send_elapsed_us = self.sent_us.saturating_sub(self.first_sent_time_at_send_us);
        let ack_elapsed_us = self.now_us.saturating_sub(self.delivered_time_at_send_us);
        let interval_us = send_elapsed_us.max(ack_elapsed_us);
        if interval_us == 0 || interval_us < self.min_rtt_us {
            return None;
        }
        Some(delivered_bytes * 8 * 1_000_000 / interval_us)
    }
}

/// A packet was declared lost (see `sent_packets` for when). It will never be acknowledged to the
/// controller, even if its acknowledgement turns up later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost {
    pub now_us: u64,
    pub seq: u64,
    pub bytes: u64,
    pub sent_us: u64,
    /// Bytes still in flight, this packet no longer counted.
    pub inflight_bytes: u64,
}

/// What the sender may do now. At least one of `cwnd_bytes` and `pacing_rate_bps` is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Decision {
    /// Send only while bytes in flight stay at or below this (a packet may be sent when
    /// `inflight + its size <= cwnd`). `None`: no window, the pacing rate alone limits.
    pub cwnd_bytes: Option<u64>,
    /// Space packets so that the k-th leaves no earlier than the previous one plus
    /// `size * 8 / rate` seconds. `None`: send as soon as the window allows.
    pub pacing_rate_bps: Option<u64>,
    /// Call `on_timer` at this time (or as soon after as the driver can), even if no packet event
    /// happens before. `None`: no wake-up needed.
    pub wake_at_us: Option<u64>,
}

/// One flow's congestion controller. The driver calls the `on_*` methods in time order with
/// non-decreasing `now_us`, and reads `decision` after each call.
///
/// What one algorithm keeps beyond its decisions (Indigo's per-decision records, a test's view of
/// BBR's state machine) is not the trait's business, so that the trait names no algorithm: every
/// controller is `Any`, and the place that needs one algorithm's own state asks the flow for its
/// controller as that type (`flow::Flow::controller`).
pub trait CongestionControl: Any {
    /// The registry name (`registry::KNOWN`).
    fn name(&self) -> &'static str;
    fn on_sent(&mut self, e: &Sent);
    fn on_ack(&mut self, e: &Acked);
    fn on_loss(&mut self, e: &Lost);
    /// The time the controller asked for in `Decision::wake_at_us` has come. Controllers that
    /// never ask need not override this.
    fn on_timer(&mut self, _now_us: u64) {}
    fn decision(&self) -> Decision;

    /// The acknowledgement `e` reported `e.ce_marks` (≥ 1) new CE marks; called just before
    /// `on_ack(e)`. A classic controller hears of at most one per smoothed RTT (the flow holds
    /// back the rest, RFC 3168 §6.1.2), a scalable one of every one. The default is RFC 3168
    /// §6.1.2's response, the same as to a loss: `on_loss` of the acknowledged datagram (its
    /// mark is the one the count reported; marks that arrived while the flow held back are not
    /// repeated). That datagram's `on_ack` follows, so a controller whose `on_loss` keeps
    /// per-packet books (a lost packet is otherwise never acknowledged) overrides this: PCC
    /// counts every mark in its interval's loss rate from `Acked::ce_marks`, Sprout and Indigo
    /// ignore marks as they ignore loss, and BBR v1 ignores them as Linux's does.
    fn on_congestion_mark(&mut self, e: &Acked) {
        self.on_loss(&Lost {
            now_us: e.now_us,
            seq: e.seq,
            bytes: e.bytes,
            sent_us: e.sent_us,
            inflight_bytes: e.inflight_bytes,
        });
    }

    /// `Some(codepoint)`: a scalable controller (RFC 9331 §4.3), which always sends `codepoint`
    /// (ECT(1) for L4S) and responds to every mark itself. `None` (the default): a classic
    /// controller, Not-ECT unless the driver turns RFC 3168 ECN on (ECT(0)), told of a mark at
    /// most once per smoothed RTT.
    fn scalable_ecn(&self) -> Option<Ecn> {
        None
    }

    /// How far the flow's pacing clock may trail the real clock, ns: how much of a stall of the
    /// sender it makes up by sending what fell due meanwhile back to back (flow/pacer.rs). The
    /// default, `pacer::MAX_LAG_NS`, makes up a late wake-up and no more.
    fn pacing_max_lag_ns(&self) -> u64 {
        flow::pacer::MAX_LAG_NS
    }
}

/// Bits per second of `bytes` delivered over `interval_us`.
pub(crate) fn rate_bps(bytes: f64, interval_us: f64) -> u64 {
    (bytes * 8.0 * 1e6 / interval_us) as u64
}
