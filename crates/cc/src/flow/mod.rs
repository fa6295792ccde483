//! What the sender decides, sans-IO: the part of the sender's loop (sender.rs) that involves no
//! clock and no socket, shared with the simulator (crates/sim), so that a flow follows the same
//! rules in real and in virtual time. It owns the controller, the bookkeeping
//! (`pantheon_cc::Sender`), the pacer and the silence probing, and is told the time:
//!
//! - `on_ack` / `detect_losses`: an acknowledgement, then loss detection (crates/cc sender.rs);
//! - `run_timers`: loss detection at its deadline, the controller's `on_timer` at its `wake_at_us`
//!   (each wake-up time delivered once, so a stale `wake_at_us` is not repeated);
//! - `next_send`: the send rule. With a window, a datagram may go when `inflight + 1464 ≤ cwnd`
//!   (ACK clocking); with a pacing rate, when the pacer (pacing.rs) says it is due; with both,
//!   when both allow. After `SILENCE_US` without any acknowledgement the controller is set aside
//!   and one probe goes per `PROBE_INTERVAL_US` until an acknowledgement comes back (sender.rs
//!   says why);
//! - `on_sent`: the driver sent the datagram the verdict allowed;
//! - `deadline_ns`: the earliest time anything above is next due.
//!
//! Times: the controller's and the bookkeeping's are microseconds on the flow's clock (from its
//! start); pacing's are nanoseconds on the same clock (pacing.rs says why). Every datagram is
//! `PACKET_BYTES` (wire.rs).

use pantheon_cc::{Acked, CongestionControl, Decision, Sender, Sent};

use crate::pacing::Pacer;
use crate::wire::PACKET_BYTES;

/// No acknowledgement for this long and the path counts as silent.
pub const SILENCE_US: u64 = 1_000_000;
/// One probe per this interval while silent: 10 datagrams/s, 117 kbit/s.
pub const PROBE_INTERVAL_US: u64 = 100_000;

/// What the sender may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send one datagram now, then hand the permit to `on_sent`.
    Send(Permit),
    /// Nothing before this time (ns on the flow's clock), on the clock alone.
    At(u64),
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
}

pub struct Control {
    cc: Box<dyn CongestionControl + Send>,
    book: Sender,
    pacer: Pacer,
    /// When the last acknowledgement arrived (the flow's start, before the first), µs.
    last_ack_us: u64,
    next_probe_us: u64,
    /// The controller wake-up already delivered, µs.
    timer_fired_us: Option<u64>,
    counts: Counts,
}

impl Control {
    pub fn new(cc: Box<dyn CongestionControl + Send>) -> Control {
        Control {
            cc,
            book: Sender::new(),
            pacer: Pacer::default(),
            last_ack_us: 0,
            next_probe_us: 0,
            timer_fired_us: None,
            counts: Counts::default(),
        }
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    pub fn decision(&self) -> Decision {
        self.cc.decision()
    }

    /// The sequence number the next datagram carries (datagrams are numbered from 0).
    pub fn next_seq(&self) -> u64 {
        self.counts.sent
    }

    /// An acknowledgement of `seq` arrived at `now_us`; the receiver got the datagram at
    /// `peer_recv_us` on its own clock. The event the controller was given, or `None` for a late
    /// acknowledgement. Call `detect_losses` after it.
    pub fn on_ack(&mut self, now_us: u64, seq: u64, peer_recv_us: u64) -> Option<Acked> {
        self.last_ack_us = now_us;
        match self.book.on_ack(now_us, seq, peer_recv_us) {
            Some(acked) => {
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

    pub fn detect_losses(&mut self, now_us: u64) {
        let Control { book, cc, counts, .. } = self;
        book.detect_losses(now_us, &mut |lost| {
            cc.on_loss(lost);
            counts.lost += 1;
        });
    }

    /// Runs what is due by `now_us`: loss detection at its deadline, the controller's timer.
    pub fn run_timers(&mut self, now_us: u64) {
        if self.book.loss_deadline_us().is_some_and(|t| t <= now_us) {
            self.detect_losses(now_us);
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

    /// The send rule at `now_ns`.
    pub fn next_send(&self, now_ns: u64) -> Verdict {
        let now_us = now_ns / 1000;
        if self.silent(now_us) {
            if now_us < self.next_probe_us {
                return Verdict::At(self.next_probe_us * 1000);
            }
            return Verdict::Send(Permit { pacing_rate_bps: None, probe: true });
        }
        let decision = self.cc.decision();
        if decision.cwnd_bytes.is_some_and(|cwnd| self.book.inflight_bytes() + PACKET_BYTES > cwnd) {
            return Verdict::Closed;
        }
        if let Some(rate_bps) = decision.pacing_rate_bps {
            let due_ns = self.pacer.next_due_ns(rate_bps);
            if due_ns > now_ns {
                return Verdict::At(due_ns);
            }
        }
        Verdict::Send(Permit { pacing_rate_bps: decision.pacing_rate_bps, probe: false })
    }

    /// The datagram `next_seq` left at `now_ns` under `permit`.
    pub fn on_sent(&mut self, now_ns: u64, permit: Permit) -> Sent {
        let now_us = now_ns / 1000;
        let sent = self.book.on_sent(now_us, PACKET_BYTES);
        debug_assert_eq!(sent.seq, self.counts.sent, "the bookkeeping numbers datagrams from 0 as the wire does");
        self.cc.on_sent(&sent);
        self.pacer.on_sent(now_ns, PACKET_BYTES, permit.pacing_rate_bps);
        if permit.probe {
            self.next_probe_us = now_us + PROBE_INTERVAL_US;
        }
        self.counts.sent += 1;
        sent
    }

    /// The earliest time something is due (ns on the flow's clock): the send `send_at_ns` the
    /// last verdict named, the loss deadline, the controller's wake-up, or the start of silence.
    pub fn deadline_ns(&self, now_us: u64, send_at_ns: Option<u64>) -> Option<u64> {
        let silence_us = (!self.silent(now_us)).then_some(self.last_ack_us + SILENCE_US);
        [
            send_at_ns,
            self.book.loss_deadline_us().map(|t| t * 1000),
            self.pending_wake_us().map(|t| t * 1000),
            silence_us.map(|t| t * 1000),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control(spec: &str) -> Control {
        Control::new(crate::controller::build(spec).unwrap())
    }

    fn send_all(c: &mut Control, now_ns: u64) -> u64 {
        let mut n = 0;
        while let Verdict::Send(permit) = c.next_send(now_ns) {
            c.on_sent(now_ns, permit);
            n += 1;
        }
        n
    }

    #[test]
    fn a_window_lets_out_whole_datagrams_only() {
        // Cubic starts with IW10 of 1464-byte datagrams: 14 640 bytes, exactly ten datagrams.
        let mut c = control("cubic");
        assert_eq!(send_all(&mut c, 0), 10);
        assert_eq!(c.next_send(0), Verdict::Closed);
        // One acknowledgement frees one datagram's room (and slow start adds another).
        c.on_ack(20_000, 0, 20_000);
        c.detect_losses(20_000);
        assert_eq!(send_all(&mut c, 20_000_000), 2);
    }

    #[test]
    fn a_silent_path_gets_one_probe_per_interval() {
        let mut c = control("cubic");
        send_all(&mut c, 0);
        // Nothing acknowledged: silence starts at 1 s; then one probe per 100 ms.
        // The first RTO (1 s before any RTT sample) falls at the same instant.
        assert_eq!(c.deadline_ns(0, None), Some(SILENCE_US * 1000));
        let at_ns = SILENCE_US * 1000;
        c.run_timers(SILENCE_US);
        assert_eq!(send_all(&mut c, at_ns), 1);
        assert_eq!(c.next_send(at_ns), Verdict::At(at_ns + PROBE_INTERVAL_US * 1000));
        // An acknowledgement gives the controller back its say.
        c.on_ack(SILENCE_US + 10, 10, 0);
        assert_ne!(c.next_send(at_ns + 10_000), Verdict::At(at_ns + PROBE_INTERVAL_US * 1000));
    }

    #[test]
    fn a_pacing_rate_spaces_datagrams() {
        // BBR paces from the start: its second datagram is due one gap after the first.
        let mut c = control("bbr");
        let Verdict::Send(permit) = c.next_send(0) else { panic!("bbr sends at once") };
        c.on_sent(0, permit);
        let rate = c.decision().pacing_rate_bps.expect("bbr paces");
        assert_eq!(c.next_send(0), Verdict::At(crate::pacing::gap_ns(PACKET_BYTES, rate)));
    }
}
