//! A flow's send rule, sans-IO: what a sender decides without a clock or a socket, driven by the
//! UDP transport (pantheon-udp, real time) and the simulator (pantheon-sim, virtual time) alike,
//! so that a flow follows the same rules in both — and a controller added to crates/cc runs in both
//! drivers with nothing else to write. A `Flow` owns the controller, the bookkeeping of sent
//! packets (`crate::SentPackets`), the pacer and the silence probing, and is told the time:
//!
//! - `on_ack` / `detect_losses`: an acknowledgement, then loss detection (sent_packets.rs). The
//!   acknowledgement carries the receiver's cumulative count of CE-marked datagrams (AccECN's
//!   way); its increase over the largest count seen is `Acked::ce_marks` (a smaller count, from a
//!   reordered acknowledgement, adds nothing), and with an increase the controller's
//!   `on_congestion_mark` comes first: every time for a scalable controller, at most once per
//!   smoothed RTT for a classic one (RFC 3168 §6.1.2);
//! - `ecn`: the codepoint every data datagram carries (`with_ecn` turns RFC 3168 ECN on for a
//!   classic controller; a scalable one names its own);
//! - `run_timers`: loss detection at its deadline, the controller's `on_timer` at its `wake_at_us`
//!   (each wake-up time delivered once, so a stale `wake_at_us` is not repeated);
//! - `next_send`: the send rule. With a window, a datagram may go when `inflight + 1464 ≤ cwnd`
//!   (ACK clocking); with a pacing rate, when the pacer (pacer.rs) says it is due; with both,
//!   when both allow. After `SILENCE_US` without any acknowledgement the controller is set aside
//!   and one probe goes per `PROBE_INTERVAL_US` until an acknowledgement comes back (a controller
//!   that paces from a bandwidth estimate, BBR, would otherwise send at full rate into a dead path
//!   forever: without acknowledgements its estimate never ages);
//! - `on_sent`: the driver sent the datagram the verdict allowed;
//! - `deadline`: the earliest time anything above is next due;
//! - `with_budget_packets` / `done`: a finite transfer (docs/transport.md, "Transfers"). Nothing
//!   is retransmitted, so a budget of N datagrams counts datagrams acknowledged, not sent: the
//!   flow never has more than N − acknowledged in flight, a datagram declared lost frees its
//!   place for a new one, and once N are acknowledged the flow is done, sends nothing more and
//!   asks for no wake-up. "Acknowledged" counts each datagram once, a late acknowledgement of one
//!   declared lost included (`SentPackets::acked_packets`), because the receiver counts that
//!   datagram too: the sender is done when the receiver has N distinct datagrams, not later. A
//!   bulk flow has no budget.
//!
//! Times are `Instant`s on the flow's clock, from its start (instant.rs says why a type rather
//! than a suffix): the controller and the bookkeeping read them in µs, the pacer in ns. The one
//! exception is the receiver's receive time, `peer_recv_us`, which is on another clock and only
//! passed through. Every datagram is `PACKET_BYTES` (datagram.rs); `controller` builds the
//! controller sized for it.

pub mod controller;
pub mod datagram;
pub mod instant;
pub mod pacer;

pub use instant::Instant;

use std::any::Any;

use self::datagram::PACKET_BYTES;
use self::pacer::Pacer;
use crate::{Acked, CongestionControl, Decision, Ecn, Sent, SentPackets};

/// No acknowledgement for this long and the path counts as silent.
pub const SILENCE_US: u64 = 1_000_000;
/// One probe per this interval while silent: 10 datagrams/s, 117 kbit/s.
pub const PROBE_INTERVAL_US: u64 = 100_000;

/// What the sender may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send one datagram now, then hand the permit to `on_sent`.
    Send(Permit),
    /// Nothing before this time, on the clock alone.
    At(Instant),
    /// The window is full: only an acknowledgement, a loss or a timer can open it.
    Closed,
}

/// Under what rule a datagram is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permit {
    /// The pacing rate it is sent under, if any.
    pub pacing_rate_bps: Option<u64>,
    /// A silence probe rather than a datagram the controller allowed.
    pub probe: bool,
}

/// What a flow did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub sent: u64,
    pub acked: u64,
    pub lost: u64,
    /// Acknowledgements of datagrams already declared lost (or never sent by this flow).
    pub late_acks: u64,
    /// CE marks the receiver reported (the largest cumulative count seen).
    pub ce_marks: u64,
}

/// One flow's sender, less the clock and the socket.
pub struct Flow {
    /// The congestion controller, told every event.
    cc: Box<dyn CongestionControl + Send>,
    /// Packets in flight, RTT, loss detection and delivery-rate samples.
    book: SentPackets,
    pacer: Pacer,
    /// When the last acknowledgement arrived (the flow's start, before the first), µs.
    last_ack_us: u64,
    /// When the next silence probe may go, µs.
    next_probe_us: u64,
    /// The controller wake-up already delivered, µs.
    timer_fired_us: Option<u64>,
    /// RFC 3168 ECN turned on for a classic controller (`with_ecn`).
    classic_ecn: bool,
    /// Marks reported by acknowledgements that gave the controller no event (late ones), handed
    /// over with the next event.
    unreported_ce_marks: u64,
    /// When a classic controller was last told of a mark, µs.
    last_mark_response_us: Option<u64>,
    /// Datagrams to have acknowledged in all, for a finite transfer; `None` for a bulk flow.
    budget_packets: Option<u64>,
    counts: Counts,
}

impl Flow {
    pub fn new(cc: Box<dyn CongestionControl + Send>) -> Flow {
        Flow {
            cc,
            book: SentPackets::new(),
            pacer: Pacer::default(),
            last_ack_us: 0,
            next_probe_us: 0,
            timer_fired_us: None,
            classic_ecn: false,
            unreported_ce_marks: 0,
            last_mark_response_us: None,
            budget_packets: None,
            counts: Counts::default(),
        }
    }

    /// Makes the flow a finite transfer of `budget_packets` datagrams (the header's rule), or a
    /// bulk flow with `None`.
    pub fn with_budget_packets(mut self, budget_packets: Option<u64>) -> Flow {
        self.budget_packets = budget_packets;
        self
    }

    /// Every datagram of the budget is acknowledged; never for a bulk flow.
    pub fn done(&self) -> bool {
        self.budget_packets.is_some_and(|budget| self.book.acked_packets() >= budget)
    }

    /// Whether the budget forbids another datagram in flight now: every datagram not yet
    /// acknowledged is already in flight (always, once done).
    fn budget_spent(&self) -> bool {
        self.budget_packets.is_some_and(|budget| {
            let inflight_packets = self.book.inflight_bytes() / PACKET_BYTES;
            self.book.acked_packets() + inflight_packets >= budget
        })
    }

    /// Turns RFC 3168 ECN on (or off) for a classic controller: its datagrams carry ECT(0). A
    /// scalable controller always uses ECN, and this changes nothing for it.
    pub fn with_ecn(mut self, on: bool) -> Flow {
        self.classic_ecn = on;
        self
    }

    /// The codepoint every data datagram of this flow carries: the scalable controller's own
    /// (Prague's ECT(1)), else ECT(0) with ECN turned on, else Not-ECT.
    pub fn ecn(&self) -> Ecn {
        match self.cc.scalable_ecn() {
            Some(codepoint) => codepoint,
            None if self.classic_ecn => Ecn::Ect0,
            None => Ecn::NotEct,
        }
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    pub fn decision(&self) -> Decision {
        self.cc.decision()
    }

    /// The controller as the algorithm `C`, or `None` if it is another: for what one algorithm
    /// keeps beyond its decision (Indigo's per-decision records, a test's view of BBR's state),
    /// which the general `CongestionControl` does not name. Events reach it through the flow alone.
    pub fn controller<C: CongestionControl>(&self) -> Option<&C> {
        let any: &dyn Any = self.cc.as_ref();
        any.downcast_ref()
    }

    /// The controller as the algorithm `C`, to take what it keeps (`controller` says why).
    pub fn controller_mut<C: CongestionControl>(&mut self) -> Option<&mut C> {
        let any: &mut dyn Any = self.cc.as_mut();
        any.downcast_mut()
    }

    /// The sequence number the next datagram carries (datagrams are numbered from 0).
    pub fn next_seq(&self) -> u64 {
        self.counts.sent
    }

    /// An acknowledgement of `seq` arrived at `now`; the receiver got the datagram at
    /// `peer_recv_us` on its own clock and had counted `ce_count` CE-marked datagrams by the time
    /// it sent this acknowledgement. The event the controller was given, or `None` for a late
    /// acknowledgement (whose new marks go with the next event). Call `detect_losses` after it.
    pub fn on_ack(&mut self, now: Instant, seq: u64, peer_recv_us: u64, ce_count: u64) -> Option<Acked> {
        let now_us = now.as_us();
        self.last_ack_us = now_us;
        // A smaller count comes from an acknowledgement overtaken by a later one: nothing new.
        let new_marks = ce_count.saturating_sub(self.counts.ce_marks);
        self.counts.ce_marks += new_marks;
        self.unreported_ce_marks += new_marks;
        match self.book.on_ack(now_us, seq, peer_recv_us) {
            Some(mut acked) => {
                acked.ce_marks = std::mem::take(&mut self.unreported_ce_marks);
                if acked.ce_marks > 0 && self.responds_to_mark(now_us, acked.srtt_us) {
                    self.cc.on_congestion_mark(&acked);
                }
                self.cc.on_ack(&acked);
                self.counts.acked += 1;
                Some(acked)
            }
            None => {
                self.counts.late_acks += 1;
                None
            }
        }
    }

    /// Whether the controller hears of a mark reported at `now_us`: a scalable one of every one;
    /// a classic one of the first, then of none until a smoothed RTT has passed (RFC 3168
    /// §6.1.2: "at most once per window of data ... (or more loosely, more than once every
    /// round-trip time)"), which the marks of the window it already reduced arrive within.
    fn responds_to_mark(&mut self, now_us: u64, srtt_us: u64) -> bool {
        if self.cc.scalable_ecn().is_some() {
            return true;
        }
        if self.last_mark_response_us.is_some_and(|last_us| now_us < last_us + srtt_us) {
            return false;
        }
        self.last_mark_response_us = Some(now_us);
        true
    }

    pub fn detect_losses(&mut self, now: Instant) {
        let Flow { book, cc, counts, .. } = self;
        book.detect_losses(now.as_us(), &mut |lost| {
            cc.on_loss(lost);
            counts.lost += 1;
        });
    }

    /// Runs what is due by `now`: loss detection at its deadline, the controller's timer.
    pub fn run_timers(&mut self, now: Instant) {
        let now_us = now.as_us();
        if self.book.loss_deadline_us().is_some_and(|t| t <= now_us) {
            self.detect_losses(now);
        }
        if let Some(wake_us) = self.pending_wake_us() {
            if wake_us <= now_us {
                self.timer_fired_us = Some(wake_us);
                self.cc.on_timer(now_us);
            }
        }
    }

    fn pending_wake_us(&self) -> Option<u64> {
        self.cc.decision().wake_at_us.filter(|&t| self.timer_fired_us != Some(t))
    }

    fn silent(&self, now_us: u64) -> bool {
        now_us >= self.last_ack_us + SILENCE_US
    }

    /// The send rule at `now`.
    pub fn next_send(&self, now: Instant) -> Verdict {
        let now_us = now.as_us();
        // Before silence: a probe is a datagram of the budget too.
        if self.budget_spent() {
            return Verdict::Closed;
        }
        if self.silent(now_us) {
            if now_us < self.next_probe_us {
                return Verdict::At(Instant::from_us(self.next_probe_us));
            }
            return Verdict::Send(Permit { pacing_rate_bps: None, probe: true });
        }
        let decision = self.cc.decision();
        if decision.cwnd_bytes.is_some_and(|cwnd_bytes| self.book.inflight_bytes() + PACKET_BYTES > cwnd_bytes) {
            return Verdict::Closed;
        }
        if let Some(rate_bps) = decision.pacing_rate_bps {
            let due = self.pacer.next_due(rate_bps);
            if due > now {
                return Verdict::At(due);
            }
        }
        Verdict::Send(Permit { pacing_rate_bps: decision.pacing_rate_bps, probe: false })
    }

    /// The datagram `next_seq` left at `now` under `permit`.
    pub fn on_sent(&mut self, now: Instant, permit: Permit) -> Sent {
        let now_us = now.as_us();
        let sent = self.book.on_sent(now_us, PACKET_BYTES);
        debug_assert_eq!(sent.seq, self.counts.sent, "the bookkeeping numbers datagrams from 0 as the wire does");
        self.cc.on_sent(&sent);
        self.pacer.on_sent(now, PACKET_BYTES, permit.pacing_rate_bps, self.cc.pacing_max_lag_ns());
        if permit.probe {
            self.next_probe_us = now_us + PROBE_INTERVAL_US;
        }
        self.counts.sent += 1;
        sent
    }

    /// The earliest time something is due: the send `send_at` the last verdict named, the loss
    /// deadline, the controller's wake-up, or the start of silence. Nothing once done.
    pub fn deadline(&self, now: Instant, send_at: Option<Instant>) -> Option<Instant> {
        if self.done() {
            return None;
        }
        let silence_us = (!self.silent(now.as_us())).then_some(self.last_ack_us + SILENCE_US);
        [
            send_at,
            self.book.loss_deadline_us().map(Instant::from_us),
            self.pending_wake_us().map(Instant::from_us),
            silence_us.map(Instant::from_us),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(spec: &str) -> Flow {
        Flow::new(controller::build(spec).unwrap())
    }

    fn send_all(f: &mut Flow, now: Instant) -> u64 {
        let mut n = 0;
        while let Verdict::Send(permit) = f.next_send(now) {
            f.on_sent(now, permit);
            n += 1;
        }
        n
    }

    #[test]
    fn a_window_lets_out_whole_datagrams_only() {
        // Cubic starts with IW10 of 1464-byte datagrams: 14 640 bytes, exactly ten datagrams.
        let mut f = flow("cubic");
        assert_eq!(send_all(&mut f, Instant::ZERO), 10);
        assert_eq!(f.next_send(Instant::ZERO), Verdict::Closed);
        // One acknowledgement frees one datagram's room (and slow start adds another).
        let t = Instant::from_us(20_000);
        f.on_ack(t, 0, 20_000, 0);
        f.detect_losses(t);
        assert_eq!(send_all(&mut f, Instant::from_ns(20_000_000)), 2);
    }

    #[test]
    fn a_silent_path_gets_one_probe_per_interval() {
        let mut f = flow("cubic");
        send_all(&mut f, Instant::ZERO);
        // Nothing acknowledged: silence starts at 1 s; then one probe per 100 ms.
        // The first RTO (1 s before any RTT sample) falls at the same instant.
        let at = Instant::from_us(SILENCE_US);
        assert_eq!(f.deadline(Instant::ZERO, None), Some(at));
        f.run_timers(at);
        assert_eq!(send_all(&mut f, at), 1);
        let next_probe = Instant::from_us(SILENCE_US + PROBE_INTERVAL_US);
        assert_eq!(f.next_send(at), Verdict::At(next_probe));
        // An acknowledgement gives the controller back its say.
        f.on_ack(Instant::from_us(SILENCE_US + 10), 10, 0, 0);
        assert_ne!(f.next_send(Instant::from_us(SILENCE_US + 10)), Verdict::At(next_probe));
    }

    /// A classic controller that counts what it is told: marks reach it as losses (the default).
    struct Counting {
        losses: u64,
    }

    impl CongestionControl for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        fn on_sent(&mut self, _e: &Sent) {}
        fn on_ack(&mut self, _e: &Acked) {}
        fn on_loss(&mut self, _e: &crate::Lost) {
            self.losses += 1;
        }
        fn decision(&self) -> Decision {
            Decision { cwnd_bytes: Some(100 * PACKET_BYTES), ..Decision::default() }
        }
    }

    #[test]
    fn the_codepoint_is_the_controllers_or_ect0_once_ecn_is_on() {
        assert_eq!(flow("cubic").ecn(), Ecn::NotEct);
        assert_eq!(flow("cubic").with_ecn(true).ecn(), Ecn::Ect0);
        assert_eq!(flow("cubic").with_ecn(true).with_ecn(false).ecn(), Ecn::NotEct);
        assert_eq!(flow("prague").ecn(), Ecn::Ect1);
        assert_eq!(flow("prague").with_ecn(false).ecn(), Ecn::Ect1);
        assert_eq!(flow("dctcp").with_ecn(false).ecn(), Ecn::Ect0);
        assert_eq!(flow("dctcp:ect1=true").ecn(), Ecn::Ect1);
    }

    #[test]
    fn the_mark_count_only_grows_and_reordered_acks_add_nothing() {
        let mut f = flow("dctcp");
        send_all(&mut f, Instant::ZERO);
        let marks = |f: &mut Flow, seq: u64, ce_count: u64| {
            let t = Instant::from_us(20_000 + seq);
            let acked = f.on_ack(t, seq, 10_000, ce_count).map(|a| a.ce_marks);
            f.detect_losses(t);
            acked
        };
        assert_eq!(marks(&mut f, 0, 1), Some(1));
        assert_eq!(marks(&mut f, 2, 3), Some(2)); // the receiver marked 1 and 2 by then
        assert_eq!(marks(&mut f, 1, 2), Some(0)); // overtaken by the acknowledgement of 2
        assert_eq!(marks(&mut f, 3, 3), Some(0));
        // A duplicate acknowledgement gives no event; its new mark goes with the next one.
        assert_eq!(marks(&mut f, 3, 4), None);
        assert_eq!(marks(&mut f, 4, 4), Some(1));
        assert_eq!(f.counts().ce_marks, 4);
        assert_eq!((f.counts().acked, f.counts().late_acks), (5, 1));
    }

    #[test]
    fn a_classic_controller_hears_of_one_mark_per_smoothed_rtt() {
        // Twenty datagrams sent at 0, all marked, acknowledged 20.0–21.9 ms later: one response
        // (RFC 3168 §6.1.2). A mark 25 ms after it, more than SRTT (≈ 20.7 ms) later: another.
        let mut f = Flow::new(Box::new(Counting { losses: 0 })).with_ecn(true);
        for _ in 0..20 {
            let Verdict::Send(permit) = f.next_send(Instant::ZERO) else { panic!("the window is open") };
            f.on_sent(Instant::ZERO, permit);
        }
        for seq in 0..20 {
            let a = f.on_ack(Instant::from_us(20_000 + seq * 100), seq, 0, seq + 1).expect("in flight");
            assert_eq!(a.ce_marks, 1);
        }
        assert_eq!(f.controller::<Counting>().unwrap().losses, 1);
        let Verdict::Send(permit) = f.next_send(Instant::from_us(25_000)) else { panic!("the window is open") };
        f.on_sent(Instant::from_us(25_000), permit);
        f.on_ack(Instant::from_us(45_000), 20, 0, 21);
        assert_eq!(f.controller::<Counting>().unwrap().losses, 2);
        assert_eq!(f.counts().ce_marks, 21);
    }

    #[test]
    fn reno_with_ecn_halves_once_for_a_window_of_marks() {
        // IW10 of 1464-byte datagrams, every one marked: 14 640 → 7 320 bytes, once.
        let mut f = flow("reno").with_ecn(true);
        send_all(&mut f, Instant::ZERO);
        for seq in 0..10 {
            let t = Instant::from_us(20_000 + seq * 100);
            f.on_ack(t, seq, 0, seq + 1);
            f.detect_losses(t);
        }
        assert_eq!(f.decision().cwnd_bytes, Some(7_320));
        assert_eq!((f.counts().ce_marks, f.counts().lost), (10, 0));
    }

    /// A budget of 3 under Cubic's IW10: the budget, not the window, stops the flow.
    fn three_sent_of_three() -> Flow {
        let mut f = flow("cubic").with_budget_packets(Some(3));
        assert_eq!(send_all(&mut f, Instant::ZERO), 3);
        assert_eq!(f.next_send(Instant::ZERO), Verdict::Closed);
        f
    }

    #[test]
    fn a_budget_replaces_a_lost_datagram_and_ends_after_its_last_acknowledgement() {
        let mut f = three_sent_of_three();
        // 0 and 2 acknowledged at 20 ms: 1 is still in flight, so nothing more may go.
        for seq in [0, 2] {
            f.on_ack(Instant::from_us(20_000), seq, 0, 0);
            f.detect_losses(Instant::from_us(20_000));
        }
        assert_eq!(f.next_send(Instant::from_us(20_000)), Verdict::Closed);
        // 1 is lost at 9/8 · 20 ms after its send: its place goes to a 4th datagram, seq 3.
        let lost_at = Instant::from_us(22_500);
        assert_eq!(f.deadline(Instant::from_us(20_000), None), Some(lost_at));
        f.run_timers(lost_at);
        assert_eq!(f.counts().lost, 1);
        assert_eq!(f.next_seq(), 3);
        assert_eq!(send_all(&mut f, lost_at), 1);
        assert!(!f.done());
        f.on_ack(Instant::from_us(42_500), 3, 0, 0);
        assert!(f.done());
        assert_eq!((f.counts().sent, f.counts().acked, f.counts().lost), (4, 3, 1));
    }

    #[test]
    fn a_done_flow_sends_nothing_and_asks_for_no_wake_up() {
        let mut f = three_sent_of_three();
        for seq in 0..3 {
            f.on_ack(Instant::from_us(20_000), seq, 0, 0);
        }
        assert!(f.done());
        // Not even a silence probe, and no deadline: not the silence, not a controller's timer.
        for at_us in [20_000, 20_000 + SILENCE_US, 60_000_000] {
            assert_eq!(f.next_send(Instant::from_us(at_us)), Verdict::Closed);
            assert_eq!(f.deadline(Instant::from_us(at_us), None), None);
        }
    }

    #[test]
    fn a_late_acknowledgement_of_a_lost_datagram_counts_once() {
        // As above, 1 lost at 22.5 ms and replaced by 3; then 1's own acknowledgement arrives: the
        // receiver has 0, 1 and 2, three distinct datagrams, and so the budget is done.
        let mut f = three_sent_of_three();
        for seq in [0, 2] {
            f.on_ack(Instant::from_us(20_000), seq, 0, 0);
        }
        f.run_timers(Instant::from_us(22_500));
        assert_eq!(send_all(&mut f, Instant::from_us(22_500)), 1);
        f.on_ack(Instant::from_us(30_000), 1, 0, 0);
        assert!(f.done());
        assert_eq!(f.counts().late_acks, 1);
    }

    #[test]
    fn duplicate_acknowledgements_count_once() {
        let mut f = three_sent_of_three();
        for _ in 0..3 {
            f.on_ack(Instant::from_us(20_000), 0, 0, 0);
        }
        f.on_ack(Instant::from_us(20_000), 1, 0, 0);
        assert!(!f.done());
        // One datagram remains in flight and the budget has no room for another.
        assert_eq!(f.next_send(Instant::from_us(20_000)), Verdict::Closed);
    }

    #[test]
    fn without_a_budget_a_flow_is_bulk() {
        let mut f = flow("cubic").with_budget_packets(None);
        assert_eq!(send_all(&mut f, Instant::ZERO), 10);
        for seq in 0..10 {
            f.on_ack(Instant::from_us(20_000), seq, 0, 0);
        }
        assert!(!f.done());
        assert_eq!(send_all(&mut f, Instant::from_us(20_000)), 20);
    }

    #[test]
    fn a_pacing_rate_spaces_datagrams() {
        // BBR paces from the start: its second datagram is due one gap after the first.
        let mut f = flow("bbr");
        let Verdict::Send(permit) = f.next_send(Instant::ZERO) else { panic!("bbr sends at once") };
        f.on_sent(Instant::ZERO, permit);
        let rate = f.decision().pacing_rate_bps.expect("bbr paces");
        assert_eq!(f.next_send(Instant::ZERO), Verdict::At(Instant::from_ns(pacer::gap_ns(PACKET_BYTES, rate))));
    }
}
