//! The sender: one flow, full throttle, driven by a `pantheon_cc` controller, on one thread with
//! one non-blocking socket connected to the receiver. The loop follows the driver's contract of
//! crates/cc (lib.rs, sent_packets.rs): every datagram sent goes through `SentPackets::on_sent` and the
//! controller's `on_sent`; every acknowledgement through `SentPackets::on_ack`, the controller's
//! `on_ack`, then `SentPackets::detect_losses` (losses to the controller's `on_loss`); the controller's
//! `on_timer` when its `wake_at_us` comes; `detect_losses` again when `loss_deadline_us` passes.
//! Those decisions, the send rule and silence probing are sans-IO in `pantheon_cc::flow::Flow`,
//! which the simulator drives too; this file adds the clock, the socket and the sleeping.
//! Times are µs since the flow started (`pantheon_sys::clock::FlowClock`: the simulator's flows
//! also start at 0); sizes are 1464 bytes per datagram, the IP packet (wire.rs).
//!
//! One iteration:
//! 1. Drain every acknowledgement queued (recvmmsg, up to 64 per call) before deciding anything,
//!    each at the time the kernel received it (SO_TIMESTAMPNS), as the kernel's TCP sees each
//!    ACK at its own arrival. One user-space time per batch, read after the thread woke, made an
//!    ACK late by the wake-up latency and a batch's ACKs simultaneous: the delivery rate BBR
//!    samples over the ack-elapsed interval then ran high, its 10-round max filter kept the
//!    highest, and bbr-user paced above the link (the queue grew ~2 ms per second on a 12 Mbit/s
//!    path while kernel BBR's drained, issue 15 §3).
//! 2. Run what is due: loss detection at the loss deadline, the controller's timer.
//! 3. Send while the controller allows: a window alone lets a datagram go whenever
//!    `inflight + 1464 ≤ cwnd` (ACK clocking, no pacing); a rate alone spaces datagrams by
//!    `1464·8/rate` (crates/cc/src/flow/pacer.rs); both, both. At most 32 datagrams go out between two looks at
//!    the acknowledgements, so that RTT samples stay fresh while a large window opens.
//! 4. Sleep (wait.rs) until the earliest of: the next paced send, the controller's wake-up, the
//!    loss deadline, the start of silence, an acknowledgement arriving, the socket accepting
//!    datagrams again, or a stop request; the last 50 µs before a deadline are spun, not slept, unless datagrams
//!    are paced closer together than that (wait.rs).
//!
//! Silence: when nothing has been acknowledged for `SILENCE_US` (crates/cc/src/flow) (the receiver is gone, or not
//! there yet, or the path is cut), the sender stops following the controller and sends one
//! datagram per `PROBE_INTERVAL_US`, each still told to the bookkeeping and the controller, until
//! an acknowledgement comes back; then the controller is in charge again. A controller that paces
//! from a bandwidth estimate (BBR) would otherwise keep sending at full rate into a dead path
//! forever, since without acknowledgements its estimate never ages. A bulk sender never exits on
//! its own: ICMP port-unreachable errors (ECONNREFUSED) and an unreachable network are ignored.
//!
//! Transfers (`send --bytes N`, `Transfer`): the flow has a budget of ⌈N / 1464⌉ datagrams
//! (`Flow::with_budget_packets`: never more in flight than are still to be acknowledged, a datagram
//! declared lost replaced by a new one), every data datagram names the transfer and its budget
//! (wire.rs), and the sender returns once the flow is done, every datagram of the budget
//! acknowledged.
//!
//! ECN: every data datagram carries the flow's codepoint (`Flow::ecn`: ECT(0) with
//! `ecn=1` in the spec for a classic controller, a scalable controller's own, otherwise Not-ECT),
//! set once on the socket since it never changes. Each acknowledgement echoes the receiver's count
//! of CE-marked datagrams, 16 bits of it (wire.rs); the sender restores the full count and hands
//! it to the flow, which tells the controller of new marks.
//!
//! A bulk flow always has data: it is never application-limited, and nothing is retransmitted (see
//! lib.rs for why Pantheon's flows need no reliability). A transfer's last window is limited by
//! its budget rather than by the controller; its delivery-rate samples are not marked
//! application-limited, which only a long-lived controller state would care about.

use std::fmt;
use std::io;

use pantheon_cc::flow::pacer::gap_ns;
use pantheon_cc::flow::{Flow, Instant, Permit, Verdict};
use pantheon_cc::CongestionControl;
use pantheon_sys::clock::{epoch_us, tighten_timer_slack, FlowClock, RealtimeOffset};
use pantheon_sys::signal::Signals;
use pantheon_sys::udp::{is_unreachable, RecvBatch, UdpSocket};

use crate::log::{AckLog, TransferLog};
use crate::wait::{spin_ns, wait, Ready};
use crate::wire::{unwrap_ce_count, Ack, Data, ACK_BYTES, DATA_BYTES, PACKET_BYTES};

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
    /// Data datagrams the receiver reported marked CE.
    pub ce_marks: u64,
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
            "sent {} datagrams, {} acknowledged ({:.2} Mbit/s over {:.3} s), {} declared lost, {} acknowledged late, {} marked CE",
            self.sent,
            self.acked,
            self.acked_mbps(),
            self.duration_us as f64 / 1e6,
            self.lost,
            self.late_acks,
            self.ce_marks
        )
    }
}

/// A finite transfer (`send --bytes N --transfer-id K`).
pub struct Transfer {
    /// The id every data datagram carries, and the log's lines.
    pub id: u32,
    /// Datagrams to have acknowledged: ⌈bytes / 1464⌉, at least 1.
    pub budget_packets: u32,
    /// Where `id began_epoch_us` goes when the first datagram leaves (`--transfers-log`).
    pub log: Option<TransferLog>,
}

/// A `Flow` with what real time adds: the clock, the socket's buffers, the logs.
struct LiveFlow {
    clock: FlowClock,
    /// The controller, the bookkeeping, pacing and silence: every decision, sans-IO.
    flow: Flow,
    datagram: Box<[u8; DATA_BYTES]>,
    acks: RecvBatch,
    log: Option<AckLog>,
    /// The socket's buffer is full: wait until it is writable.
    blocked: bool,
    /// No send before this time (the network was unreachable).
    retry_at: Instant,
    /// Sends refused because the network was unreachable.
    unreachable: u64,
    /// When the last acknowledgement arrived: the next one is stamped no earlier, so that a step
    /// of the wall clock between two stamps cannot run the flow's time backwards.
    last_ack_at: Instant,
    /// The largest CE count the acknowledgements have carried, unwrapped (wire.rs).
    largest_ce_count: u64,
    /// The transfer the datagrams name: id and budget, both 0 for a bulk flow.
    transfer_id: u32,
    budget_packets: u32,
    /// The transfer's log, until its first datagram is logged.
    began_log: Option<TransferLog>,
}

/// Runs a flow to `socket` (connected to the receiver) until `signals` request a stop, or a
/// `transfer` is done, handing the totals so far to `report` whenever they are asked for
/// (SIGUSR1). `ecn`: a classic controller uses ECN (RFC 3168).
pub fn run(
    cc: Box<dyn CongestionControl + Send>,
    ecn: bool,
    socket: &UdpSocket,
    signals: &Signals,
    log: Option<AckLog>,
    transfer: Option<Transfer>,
    report: &mut dyn FnMut(&Totals),
) -> io::Result<Totals> {
    tighten_timer_slack();
    let budget_packets = transfer.as_ref().map(|t| u64::from(t.budget_packets));
    let flow = Flow::new(cc).with_ecn(ecn).with_budget_packets(budget_packets);
    socket.set_tos(flow.ecn().bits())?;
    let mut live = LiveFlow {
        clock: FlowClock::start(),
        flow,
        datagram: Box::new([0; DATA_BYTES]),
        // A slot larger than an acknowledgement, so that a longer datagram shows as one.
        acks: RecvBatch::new(ACK_BATCH, 2 * ACK_BYTES),
        log,
        blocked: false,
        retry_at: Instant::ZERO,
        unreachable: 0,
        last_ack_at: Instant::ZERO,
        largest_ce_count: 0,
        transfer_id: transfer.as_ref().map_or(0, |t| t.id),
        budget_packets: transfer.as_ref().map_or(0, |t| t.budget_packets),
        began_log: transfer.and_then(|t| t.log),
    };
    let outcome = live.run(socket, signals, report);
    let log = live.log.take().map(AckLog::finish);
    outcome?;
    log.transpose()?;
    Ok(live.totals())
}

impl LiveFlow {
    fn totals(&self) -> Totals {
        let counts = self.flow.counts();
        Totals {
            sent: counts.sent,
            acked: counts.acked,
            lost: counts.lost,
            late_acks: counts.late_acks,
            unreachable: self.unreachable,
            ce_marks: counts.ce_marks,
            duration_us: self.clock.now_us(),
        }
    }

    fn run(&mut self, socket: &UdpSocket, signals: &Signals, report: &mut dyn FnMut(&Totals)) -> io::Result<()> {
        let mut ready = Ready { readable: true, ..Ready::default() };
        while !signals.stop().is_raised() {
            if signals.take_report_request() {
                report(&self.totals());
            }
            if ready.readable {
                self.drain_acks(socket)?;
            }
            if self.flow.done() {
                return Ok(());
            }
            if ready.writable {
                self.blocked = false;
            }
            self.flow.run_timers(self.now());
            let send_at = self.send_due(socket)?;
            let deadline_ns = self.flow.deadline(self.now(), send_at).map(|t| self.clock.to_monotonic_ns(t.as_ns()));
            let gap_ns = self.flow.decision().pacing_rate_bps.map(|rate_bps| gap_ns(PACKET_BYTES, rate_bps));
            ready = wait(socket.fd(), self.blocked, signals.stop().fd(), deadline_ns, spin_ns(gap_ns))?;
        }
        Ok(())
    }

    /// The flow's clock, read now.
    fn now(&self) -> Instant {
        Instant::from_ns(self.clock.now_ns())
    }

    fn drain_acks(&mut self, socket: &UdpSocket) -> io::Result<()> {
        loop {
            let n = self.acks.receive(socket)?;
            if n == 0 {
                return Ok(());
            }
            let now = self.now();
            let offset = RealtimeOffset::now();
            for i in 0..n {
                let received = self.acks.get(i);
                let Some(ack) = Ack::decode(received.bytes).filter(|_| received.len == ACK_BYTES) else {
                    continue;
                };
                let arrived_ns =
                    received.realtime_ns.map_or(now.as_ns(), |ns| self.clock.from_realtime_ns(&offset, ns));
                let at = Instant::from_ns(arrived_ns.clamp(self.last_ack_at.as_ns(), now.as_ns()));
                self.last_ack_at = at;
                let ce_count = unwrap_ce_count(self.largest_ce_count, ack.ce_count);
                self.largest_ce_count = self.largest_ce_count.max(ce_count);
                if let Some(acked) = self.flow.on_ack(at, ack.seq, ack.recv_us, ce_count) {
                    if let Some(log) = self.log.as_mut() {
                        log.ack(&acked, &self.flow.decision())?;
                    }
                }
                self.flow.detect_losses(at);
            }
            if n < ACK_BATCH {
                return Ok(());
            }
        }
    }

    /// Sends what is allowed now. Returns when a send may next be due on the clock alone
    /// (`None`: only an acknowledgement, a loss, a timer or the socket can allow one).
    fn send_due(&mut self, socket: &UdpSocket) -> io::Result<Option<Instant>> {
        for _ in 0..SEND_BURST {
            if self.blocked {
                return Ok(None);
            }
            let now = self.now();
            if now < self.retry_at {
                return Ok(Some(self.retry_at));
            }
            match self.flow.next_send(now) {
                Verdict::Send(permit) => self.transmit(socket, now, permit)?,
                Verdict::At(due) => return Ok(Some(due)),
                Verdict::Closed => return Ok(None),
            }
        }
        // The burst is over, not the window: come straight back after a look at the acknowledgements.
        Ok(Some(Instant::ZERO))
    }

    /// Sends the next datagram; if the socket does not take it, nothing is recorded.
    fn transmit(&mut self, socket: &UdpSocket, now: Instant, permit: Permit) -> io::Result<()> {
        let seq = self.flow.next_seq();
        Data { seq, send_us: now.as_us(), transfer_id: self.transfer_id, budget_packets: self.budget_packets }
            .encode(&mut self.datagram);
        match socket.send(&self.datagram[..]) {
            Ok(()) => {
                self.flow.on_sent(now, permit);
                if let Some(mut log) = self.began_log.take() {
                    log.line(self.transfer_id, epoch_us())?;
                }
                Ok(())
            }
            Err(err) => match err.kind() {
                io::ErrorKind::WouldBlock => {
                    self.blocked = true;
                    Ok(())
                }
                // The datagram did not leave; the error (an ICMP port unreachable for an earlier
                // one, or a signal) is consumed, so the next attempt sends.
                io::ErrorKind::ConnectionRefused | io::ErrorKind::Interrupted => Ok(()),
                _ if is_unreachable(&err) => {
                    self.unreachable += 1;
                    self.retry_at = Instant::from_ns(now.as_ns() + UNREACHABLE_RETRY_NS);
                    Ok(())
                }
                _ => Err(err),
            },
        }
    }
}
