//! The sender: one flow, full throttle, driven by a `pantheon_cc` controller, on one thread with
//! one non-blocking socket connected to the receiver. The loop follows the driver's contract of
//! crates/cc (lib.rs, sender.rs): every datagram sent goes through `Sender::on_sent` and the
//! controller's `on_sent`; every acknowledgement through `Sender::on_ack`, the controller's
//! `on_ack`, then `Sender::detect_losses` (losses to the controller's `on_loss`); the controller's
//! `on_timer` when its `wake_at_us` comes; `detect_losses` again when `loss_deadline_us` passes.
//! Times are µs since the flow started (clock.rs: the simulator's flows also start at 0); sizes
//! are 1464 bytes per datagram, the IP packet (wire.rs).
//!
//! One iteration:
//! 1. Drain every acknowledgement queued (recvmmsg, up to 64 per call), stamping each batch with
//!    the clock as it is read, before deciding anything.
//! 2. Run what is due: loss detection at the loss deadline, the controller's timer.
//! 3. Send while the controller allows: a window alone lets a datagram go whenever
//!    `inflight + 1464 ≤ cwnd` (ACK clocking, no pacing); a rate alone spaces datagrams by
//!    `1464·8/rate` (pacing.rs); both, both. At most 32 datagrams go out between two looks at
//!    the acknowledgements, so that RTT samples stay fresh while a large window opens.
//! 4. Sleep (wait.rs) until the earliest of: the next paced send, the controller's wake-up, the
//!    loss deadline, the start of silence, an acknowledgement arriving, the socket accepting
//!    datagrams again, or a stop request; the last 50 µs before a deadline are spun, not slept.
//!
//! Silence: when nothing has been acknowledged for `SILENCE_US` (the receiver is gone, or not
//! there yet, or the path is cut), the sender stops following the controller and sends one
//! datagram per `PROBE_INTERVAL_US`, each still told to the bookkeeping and the controller, until
//! an acknowledgement comes back; then the controller is in charge again. A controller that paces
//! from a bandwidth estimate (BBR) would otherwise keep sending at full rate into a dead path
//! forever, since without acknowledgements its estimate never ages. The sender never exits on its
//! own: ICMP port-unreachable errors (ECONNREFUSED) and an unreachable network are ignored.
//!
//! The flow always has data: it is never application-limited, and nothing is retransmitted (see
//! lib.rs for why Pantheon's flows need no reliability).

use std::fmt;
use std::io;

use pantheon_cc::{CongestionControl, Sender};

use crate::clock::{tighten_timer_slack, FlowClock};
use crate::log::AckLog;
use crate::pacing::Pacer;
use crate::socket::{is_unreachable, RecvBatch, UdpSocket};
use crate::stop::Stop;
use crate::wait::{wait, Ready};
use crate::wire::{Ack, Data, ACK_BYTES, DATA_BYTES, PACKET_BYTES};

/// No acknowledgement for this long and the path counts as silent.
pub const SILENCE_US: u64 = 1_000_000;
/// One probe per this interval while silent: 10 datagrams/s, 117 kbit/s.
pub const PROBE_INTERVAL_US: u64 = 100_000;
/// Acknowledgements read per system call.
const ACK_BATCH: usize = 64;
/// Datagrams sent between two looks at the acknowledgements.
const SEND_BURST: usize = 32;
/// After a send fails because the network is unreachable, the next attempt waits this long.
const UNREACHABLE_RETRY_NS: u64 = 1_000_000;

/// What a flow did, for the line the sender prints when it stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub sent: u64,
    pub acked: u64,
    pub lost: u64,
    /// Acknowledgements of datagrams already declared lost (or never sent by this flow).
    pub late_acks: u64,
    /// Sends refused because the network was unreachable.
    pub unreachable: u64,
    pub duration_us: u64,
}

impl Totals {
    /// IP bytes acknowledged per second of the flow, in Mbit/s.
    pub fn acked_mbps(&self) -> f64 {
        self.acked as f64 * PACKET_BYTES as f64 * 8.0 / self.duration_us.max(1) as f64
    }
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sent {} datagrams, {} acknowledged ({:.2} Mbit/s over {:.3} s), {} declared lost, {} acknowledged late",
            self.sent,
            self.acked,
            self.acked_mbps(),
            self.duration_us as f64 / 1e6,
            self.lost,
            self.late_acks
        )
    }
}

struct Flow {
    clock: FlowClock,
    cc: Box<dyn CongestionControl + Send>,
    book: Sender,
    pacer: Pacer,
    datagram: Box<[u8; DATA_BYTES]>,
    acks: RecvBatch,
    log: Option<AckLog>,
    /// When the last acknowledgement arrived (the start, before the first).
    last_ack_us: u64,
    next_probe_us: u64,
    /// The controller wake-up already delivered, so that a stale `wake_at_us` is not repeated.
    timer_fired_us: Option<u64>,
    /// The socket's buffer is full: wait until it is writable.
    blocked: bool,
    /// No send before this time (the network was unreachable).
    retry_at_ns: u64,
    totals: Totals,
}

/// Runs a flow to `socket` (connected to the receiver) until `stop` is requested, handing the
/// totals so far to `report` whenever they are asked for (SIGUSR1).
pub fn run(
    cc: Box<dyn CongestionControl + Send>,
    socket: &UdpSocket,
    stop: &Stop,
    log: Option<AckLog>,
    report: &mut dyn FnMut(&Totals),
) -> io::Result<Totals> {
    tighten_timer_slack();
    let mut flow = Flow {
        clock: FlowClock::start(),
        cc,
        book: Sender::new(),
        pacer: Pacer::default(),
        datagram: Box::new([0; DATA_BYTES]),
        // A slot larger than an acknowledgement, so that a longer datagram shows as one.
        acks: RecvBatch::new(ACK_BATCH, 2 * ACK_BYTES),
        log,
        last_ack_us: 0,
        next_probe_us: 0,
        timer_fired_us: None,
        blocked: false,
        retry_at_ns: 0,
        totals: Totals::default(),
    };
    let outcome = flow.run(socket, stop, report);
    let log = flow.log.take().map(AckLog::finish);
    outcome?;
    log.transpose()?;
    flow.totals.duration_us = flow.clock.now_us();
    Ok(flow.totals)
}

impl Flow {
    fn run(&mut self, socket: &UdpSocket, stop: &Stop, report: &mut dyn FnMut(&Totals)) -> io::Result<()> {
        let mut ready = Ready { readable: true, ..Ready::default() };
        while !stop.requested() {
            if stop.take_report_request() {
                report(&Totals { duration_us: self.clock.now_us(), ..self.totals });
            }
            if ready.readable {
                self.drain_acks(socket)?;
            }
            if ready.writable {
                self.blocked = false;
            }
            self.run_timers(self.clock.now_us());
            let send_at_ns = self.send_due(socket)?;
            let deadline_ns = self.deadline_ns(send_at_ns).map(|t| self.clock.to_monotonic_ns(t));
            ready = wait(socket.fd(), self.blocked, stop.fd(), deadline_ns)?;
        }
        Ok(())
    }

    fn drain_acks(&mut self, socket: &UdpSocket) -> io::Result<()> {
        loop {
            let n = self.acks.receive(socket)?;
            if n == 0 {
                return Ok(());
            }
            let now_us = self.clock.now_us();
            for i in 0..n {
                let Some(ack) = Ack::decode(self.acks.bytes(i)).filter(|_| self.acks.len(i) == ACK_BYTES) else {
                    continue;
                };
                self.last_ack_us = now_us;
                match self.book.on_ack(now_us, ack.seq, ack.recv_us) {
                    Some(acked) => {
                        self.cc.on_ack(&acked);
                        self.totals.acked += 1;
                        if let Some(log) = self.log.as_mut() {
                            log.ack(&acked, &self.cc.decision())?;
                        }
                    }
                    None => self.totals.late_acks += 1,
                }
                self.detect_losses(now_us);
            }
            if n < ACK_BATCH {
                return Ok(());
            }
        }
    }

    fn detect_losses(&mut self, now_us: u64) {
        let Flow { book, cc, totals, .. } = self;
        book.detect_losses(now_us, &mut |lost| {
            cc.on_loss(lost);
            totals.lost += 1;
        });
    }

    fn run_timers(&mut self, now_us: u64) {
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

    /// Sends what is allowed now. Returns when a send may next be due on the clock alone
    /// (`None`: only an acknowledgement, a loss, a timer or the socket can allow one).
    fn send_due(&mut self, socket: &UdpSocket) -> io::Result<Option<u64>> {
        for _ in 0..SEND_BURST {
            if self.blocked {
                return Ok(None);
            }
            let now_ns = self.clock.now_ns();
            if now_ns < self.retry_at_ns {
                return Ok(Some(self.retry_at_ns));
            }
            let now_us = now_ns / 1000;
            if self.silent(now_us) {
                if now_us < self.next_probe_us {
                    return Ok(Some(self.next_probe_us * 1000));
                }
                if self.transmit(socket, now_ns, None)? {
                    self.next_probe_us = now_us + PROBE_INTERVAL_US;
                }
                continue;
            }
            let decision = self.cc.decision();
            if decision.cwnd_bytes.is_some_and(|cwnd| self.book.inflight_bytes() + PACKET_BYTES > cwnd) {
                return Ok(None);
            }
            if let Some(rate_bps) = decision.pacing_rate_bps {
                let due_ns = self.pacer.next_due_ns(rate_bps);
                if due_ns > now_ns {
                    return Ok(Some(due_ns));
                }
            }
            self.transmit(socket, now_ns, decision.pacing_rate_bps)?;
        }
        // The burst is over, not the window: come straight back after a look at the acknowledgements.
        Ok(Some(0))
    }

    /// Sends the next datagram; false when the socket did not take it.
    fn transmit(&mut self, socket: &UdpSocket, now_ns: u64, rate_bps: Option<u64>) -> io::Result<bool> {
        let now_us = now_ns / 1000;
        let seq = self.totals.sent;
        Data { seq, send_us: now_us }.encode(&mut self.datagram);
        match socket.send(&self.datagram[..]) {
            Ok(()) => {
                let sent = self.book.on_sent(now_us, PACKET_BYTES);
                debug_assert_eq!(sent.seq, seq, "the bookkeeping numbers datagrams from 0 as the wire does");
                self.cc.on_sent(&sent);
                self.pacer.on_sent(now_ns, PACKET_BYTES, rate_bps);
                self.totals.sent += 1;
                Ok(true)
            }
            Err(err) => match err.kind() {
                io::ErrorKind::WouldBlock => {
                    self.blocked = true;
                    Ok(false)
                }
                // The datagram did not leave; the error (an ICMP port unreachable for an earlier
                // one, or a signal) is consumed, so the next attempt sends.
                io::ErrorKind::ConnectionRefused | io::ErrorKind::Interrupted => Ok(false),
                _ if is_unreachable(&err) => {
                    self.totals.unreachable += 1;
                    self.retry_at_ns = now_ns + UNREACHABLE_RETRY_NS;
                    Ok(false)
                }
                _ => Err(err),
            },
        }
    }

    /// The earliest time something is due: a send, the loss deadline, the controller's wake-up,
    /// or the start of silence (ns on the flow's clock).
    fn deadline_ns(&self, send_at_ns: Option<u64>) -> Option<u64> {
        let silence_us = (!self.silent(self.clock.now_us())).then_some(self.last_ack_us + SILENCE_US);
        [send_at_ns, self.book.loss_deadline_us().map(|t| t * 1000), self.pending_wake_us().map(|t| t * 1000), silence_us.map(|t| t * 1000)]
            .into_iter()
            .flatten()
            .min()
    }
}
