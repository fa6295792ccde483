//! The endpoint's two directions, one thread each (the I/O driver around the sans-IO wire format,
//! admission and log formats):
//!
//! - outbound: reads packets from the TUN device while any are queued, stamps each with the time
//!   it was read, completes its checksum or cuts a TCP super-packet into segments ([`segment`]),
//!   gives each datagram the next UID, logs it (ingress log), writes it behind its tunnel header
//!   into a send slot with the inner ECN codepoint as the outer one ([`ecn`]), and sends up to a
//!   batch of slots to the peer with one `sendmmsg` (its tag computed with this direction's key,
//!   [`auth`]);
//! - inbound: receives up to a batch with one `recvmmsg`, each datagram with its outer ECN
//!   codepoint, admits each datagram only if it is authentic, fresh and from the peer
//!   ([`session`]), combines the outer and inner codepoints into the inner header ([`ecn`]), logs
//!   it with its receive time (egress log), and writes the inner datagrams to the TUN device,
//!   consecutive TCP segments merged ([`coalesce`]); it answers the peer's clock probes and logs
//!   the answers to its own;
//! - prober: sends this endpoint's clock probes on their schedule ([`probe`]), once connected.
//!
//! A client with an extra delay ([`delay`]) holds each data datagram that long in each
//! direction: the outbound thread after logging and sealing it, before sending it; the inbound
//! thread after receiving it, before admitting it, and logs it at its receive time plus the
//! delay, the moment it leaves the delay line on time. So the one-way delays of the logs include
//! the extra delay both ways. Control messages (hellos, welcomes, clock probes and answers) are
//! never held: clock exchanges stay symmetric, and so unbiased. Without an extra delay nothing
//! is copied or timed for it.
//!
//! Both sleep in poll(2) when there is nothing to move; nothing is allocated per datagram. The
//! kernel refusing a send, a TUN write failing, a full receive buffer and datagrams from strangers
//! are counted and reported at the end, never fatal: the tunnel goes on like a lossy link.
//!
//! Receive moderation: a path delivers datagrams one by one at its rate (every 12 µs at 1 Gbit/s),
//! so a thread that went back to sleep after each would wake once per datagram, and write each
//! one to the TUN device on its own. When a wake-up finds more than one datagram waiting (traffic
//! is dense), the inbound thread pauses `MODERATION_US` before the next receive, as a NIC's
//! interrupt moderation does; the next batch is then several datagrams, merged where they are
//! consecutive TCP segments. A datagram so waits at most `MODERATION_US` more before it reaches
//! the command, and only while traffic is dense; its log time is the kernel's receive time either
//! way. On a two-core machine this is what lets a 1 Gbit/s flow through the tunnel keep up with
//! the emulator beside it (bench/tunnel_overhead.py).
//!
//! Receive times (logs, clock exchanges) are the kernel's stamps when they are on the clock the
//! process reads, otherwise the time a datagram is read (`pantheon_sys::udp`), so that a clock
//! shim moves every time an endpoint writes alike.
//!
//! [`segment`]: crate::segment
//! [`coalesce`]: crate::coalesce
//! [`ecn`]: crate::ecn
//! [`auth`]: crate::auth
//! [`session`]: crate::session
//! [`probe`]: crate::probe
//! [`delay`]: crate::delay

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pantheon_format::ip_ecn;
use pantheon_format::tunnel_wire::{self, data_header, Control, EcnExit, Message, Uids, HEADER_BYTES};
use pantheon_link::Ecn;
use pantheon_sys::clock::{epoch_us, monotonic_us, tighten_timer_slack, RealtimeOffset};
use pantheon_sys::poll::wait;
use pantheon_sys::udp::{self, RecvBatch, SendBatch, UdpSocket};

use crate::auth::{ControlSender, DirectionKey};
use crate::coalesce::Coalescer;
use crate::delay::DelayLine;
use crate::ecn::decapsulate;
use crate::log::{ClockLog, Log};
use crate::probe::ProbeSchedule;
use crate::segment::{complete_checksum, Segmenter};
use crate::session::{Admission, Dropped, Keepalive, Verdict};
use crate::virtio::{self, Offload, Segmentation};

/// Datagrams moved per system call at most.
pub const BATCH: usize = 64;
/// How long the inbound thread pauses after a batch while traffic is dense: about what NICs wait
/// to coalesce receive interrupts (20 000 interrupts per second and core is a common default).
pub const MODERATION_US: u64 = 50;

/// The inbound thread's pause after receiving a batch of `received` datagrams: none after a lone
/// datagram (traffic is sparse: the next one is handled the moment it arrives) or a full batch
/// (more are waiting).
pub fn moderation_pause_us(received: usize) -> Option<u64> {
    (2..BATCH).contains(&received).then_some(MODERATION_US)
}

/// Receive buffers hold the largest UDP payload, whatever MTU the peer was given; a TUN read
/// holds the largest IP packet (a TCP super-packet) behind its virtio header.
const MAX_DATAGRAM_BYTES: usize = 65_535;

/// The peer's address, as the inbound thread learns it and the outbound thread uses it.
#[derive(Debug, Default)]
pub struct PeerSlot(AtomicU64);

impl PeerSlot {
    const SET: u64 = 1 << 48;

    pub fn set(&self, peer: SocketAddrV4) {
        let packed = Self::SET | u64::from(u32::from(*peer.ip())) << 16 | u64::from(peer.port());
        self.0.store(packed, Ordering::Release);
    }

    pub fn get(&self) -> Option<SocketAddrV4> {
        let packed = self.0.load(Ordering::Acquire);
        (packed & Self::SET != 0).then(|| SocketAddrV4::new(Ipv4Addr::from((packed >> 16) as u32), packed as u16))
    }
}

/// The endpoint's outer socket. Buffers of 16 MiB (130 ms at 1 Gbit/s), so that a thread
/// descheduled for a while loses nothing; a drop for a full one is counted (SO_RXQ_OVFL) and
/// reported. Sends wait for room in the buffer: the outbound thread has nothing else to do
/// meanwhile, and the TUN device's queue holds the command's packets until it reads again. Each
/// datagram's TOS is read for its ECN codepoint.
pub const SOCKET: udp::Options = udp::Options {
    buffer_bytes: 16 << 20,
    timestamps: true,
    overflow_counts: true,
    blocking_sends: true,
    receive_tos: true,
};

/// The TOS of control messages: Not-ECT, with DSCP 0 as every datagram of the tunnel's.
pub const CONTROL_TOS: u8 = 0;

#[derive(Debug, Default, Clone, Copy)]
pub struct OutboundTotals {
    pub sent: u64,
    /// Sends the kernel refused (the datagram was logged at ingress, then lost).
    pub refused: u64,
    /// Datagrams the command sent before a server had a client; dropped, never logged.
    pub before_connection: u64,
    /// Packets from the TUN device that could not be segmented or checksummed (never expected).
    pub malformed: u64,
}

pub struct Outbound {
    pub tun: RawFd,
    pub socket: Arc<UdpSocket>,
    /// Where to send; a client's socket is connected and sends without an address.
    pub peer: Arc<PeerSlot>,
    pub connected_socket: bool,
    /// This direction's key, for the data's tags.
    pub key: DirectionKey,
    /// Seals control messages (a client's keepalive hellos).
    pub control: Arc<ControlSender>,
    /// A client sends a hello as a keepalive when it has sent nothing for a while.
    pub keepalive: Option<Keepalive>,
    pub log: Log,
    pub base_epoch_us: u64,
    pub inner_mtu_bytes: usize,
    /// How long each data datagram is held before it is sent (µs; 0: sent at once).
    pub extra_delay_us: u64,
    pub stop: RawFd,
}

/// A sealed datagram in the outbound delay line: where it goes and its TOS byte.
type OutboundMeta = (Option<SocketAddrV4>, u8);

impl Outbound {
    pub fn run(mut self) -> io::Result<(OutboundTotals, io::Result<()>)> {
        let mut totals = OutboundTotals::default();
        let mut batch = SendBatch::new(BATCH, HEADER_BYTES + self.inner_mtu_bytes);
        let mut packet = vec![0u8; virtio::HEADER_BYTES + MAX_DATAGRAM_BYTES].into_boxed_slice();
        let mut uids = Uids::default();
        let mut delayed = (self.extra_delay_us > 0).then(|| DelayLine::<OutboundMeta>::new(self.extra_delay_us));
        if delayed.is_some() {
            tighten_timer_slack();
        }
        loop {
            let keepalive_us = self.keepalive.as_ref().map(|k| k.due_in_us(monotonic_us()));
            if keepalive_us == Some(0) {
                let keepalive = self.keepalive.as_mut().expect("a timeout comes from a keepalive");
                let hello = self.control.message(Control::Hello, &[]);
                // A lost keepalive is retried at the next interval.
                let _ = self.socket.send_to(&hello, self.peer.get().expect("a client knows its server"), CONTROL_TOS);
                keepalive.sent(monotonic_us());
                continue;
            }
            let release_us = delayed.as_ref().and_then(|line| line.due_in_us(monotonic_us()));
            let timeout_us = match (keepalive_us, release_us) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if wait(self.tun, false, self.stop, timeout_us.map(|us| us * 1000))?.stop {
                break;
            }
            let peer = self.peer.get();
            let to = if self.connected_socket { None } else { peer };
            loop {
                // SAFETY: reading into a buffer we own.
                let n = unsafe { libc::read(self.tun, packet.as_mut_ptr().cast(), packet.len()) };
                if n < 0 {
                    let err = io::Error::last_os_error();
                    match err.kind() {
                        io::ErrorKind::WouldBlock => break,
                        io::ErrorKind::Interrupted => continue,
                        _ => return Err(err),
                    }
                }
                let t_us = epoch_us().saturating_sub(self.base_epoch_us);
                let read_us = if delayed.is_some() { monotonic_us() } else { 0 };
                let Some((header, ip)) = packet[..n as usize].split_first_chunk_mut::<{ virtio::HEADER_BYTES }>()
                else {
                    totals.malformed += 1;
                    continue;
                };
                let offload = Offload::parse(header);
                let segments = match offload.segmentation {
                    Segmentation::None => {
                        let complete =
                            offload.partial_checksum.map_or(Ok(()), |partial| complete_checksum(ip, partial));
                        complete.ok().filter(|()| ip.len() <= self.inner_mtu_bytes).map(|()| None)
                    }
                    Segmentation::TcpV4 { segment_bytes } => Segmenter::new(ip, segment_bytes)
                        .ok()
                        .filter(|s| s.max_segment_bytes() <= self.inner_mtu_bytes)
                        .map(Some),
                    Segmentation::Unsupported(_) => None,
                };
                let Some(segments) = segments else {
                    totals.malformed += 1;
                    continue;
                };
                let count = segments.as_ref().map_or(1, Segmenter::count);
                // Every segment keeps the packet's TOS. RFC 6040 §4.1: the outer header carries
                // the inner codepoint (and DSCP 0, the tunnel's own).
                let ecn = ip_ecn::ecn(ip);
                if peer.is_none() {
                    totals.before_connection += count as u64;
                    continue;
                }
                for i in 0..count {
                    if batch.is_full() {
                        self.flush(&mut batch, &mut totals)?;
                    }
                    let slot = batch.slot().expect("a batch is flushed when full");
                    let len = match &segments {
                        Some(segmenter) => segmenter.write(i, &mut slot[HEADER_BYTES..]),
                        None => {
                            slot[HEADER_BYTES..HEADER_BYTES + ip.len()].copy_from_slice(ip);
                            ip.len()
                        }
                    };
                    let uid = uids.assign();
                    slot[..HEADER_BYTES].copy_from_slice(&data_header(uid));
                    self.key.seal(uid, &mut slot[..HEADER_BYTES + len]);
                    self.log.record(t_us, uid, len, ecn);
                    match delayed.as_mut() {
                        // The slot is not committed: the next datagram is written over it.
                        Some(line) => line.hold(read_us, &slot[..HEADER_BYTES + len], (to, ecn.bits())),
                        None => batch.commit(HEADER_BYTES + len, to, ecn.bits()),
                    }
                }
            }
            if let Some(line) = delayed.as_mut() {
                line.release(monotonic_us(), |datagram, (to, tos), _| {
                    if batch.is_full() {
                        self.flush(&mut batch, &mut totals)?;
                    }
                    let slot = batch.slot().expect("a batch is flushed when full");
                    slot[..datagram.len()].copy_from_slice(datagram);
                    batch.commit(datagram.len(), to, tos);
                    Ok::<(), io::Error>(())
                })?;
            }
            self.flush(&mut batch, &mut totals)?;
        }
        Ok((totals, self.log.finish()))
    }

    fn flush(&mut self, batch: &mut SendBatch, totals: &mut OutboundTotals) -> io::Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let count = batch.len() as u64;
        let refused = batch.flush(&self.socket)?;
        totals.sent += count - refused;
        totals.refused += refused;
        if let Some(keepalive) = self.keepalive.as_mut() {
            keepalive.sent(monotonic_us());
        }
        Ok(())
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct InboundTotals {
    pub delivered: u64,
    /// Inner datagrams the TUN device refused (logged at egress, then lost).
    pub write_errors: u64,
    /// Datagrams dropped by the admission's checks, never logged.
    pub dropped: DropCounts,
    /// Datagrams the kernel dropped because the socket's receive buffer was full.
    pub overflow_drops: u32,
    /// Authentic datagrams marked CE on the path around a Not-ECT inner datagram, which were
    /// dropped, never logged (RFC 6040 §4.2; a compliant path never marks a Not-ECT datagram).
    pub ce_drops: u64,
    /// Datagrams delivered with a combination of outer and inner codepoints RFC 6040 §4.2 flags
    /// as one a compliant path never makes.
    pub ecn_alarms: u64,
}

/// Datagrams the admission dropped, by reason.
#[derive(Debug, Default, Clone, Copy)]
pub struct DropCounts {
    /// From an address that is not the peer's.
    pub strangers: u64,
    /// Tagged without the peer's key, or altered on the way.
    pub bad_tags: u64,
    /// Numbered as one accepted before, or below the window.
    pub replayed: u64,
    /// Authentic data whose inner datagram is not IPv4 from the peer's tunnel address.
    pub foreign_sources: u64,
    /// Not a tunnel message.
    pub malformed: u64,
    /// Control messages this role never receives.
    pub wrong_role: u64,
}

impl DropCounts {
    pub fn count(&mut self, dropped: Dropped) {
        *match dropped {
            Dropped::Stranger => &mut self.strangers,
            Dropped::BadTag => &mut self.bad_tags,
            Dropped::Replayed(_) => &mut self.replayed,
            Dropped::ForeignSource => &mut self.foreign_sources,
            Dropped::Malformed(_) => &mut self.malformed,
            Dropped::WrongRole => &mut self.wrong_role,
        } += 1;
    }

    pub fn total(&self) -> u64 {
        self.strangers + self.bad_tags + self.replayed + self.foreign_sources + self.malformed + self.wrong_role
    }

    /// The endpoint's exit line (docs/tunnel.md).
    pub fn exit_line(&self) -> String {
        format!(
            "pantheon-tunnel: dropped {} datagrams: {} not from the peer, {} with a bad tag, {} replayed, {} with a foreign inner source, {} malformed, {} of a kind this end never receives",
            self.total(),
            self.strangers,
            self.bad_tags,
            self.replayed,
            self.foreign_sources,
            self.malformed,
            self.wrong_role
        )
    }
}

pub struct Inbound {
    pub tun: RawFd,
    pub socket: Arc<UdpSocket>,
    pub admission: Admission,
    /// Where a server publishes its client's address for the outbound thread.
    pub peer: Arc<PeerSlot>,
    pub log: Log,
    /// Seals the answers to the peer's clock probes.
    pub control: Arc<ControlSender>,
    /// Where this endpoint's completed clock exchanges go.
    pub clock_log: ClockLog,
    pub base_epoch_us: u64,
    /// How long each data datagram is held after it is received (µs; 0: handled at once).
    pub extra_delay_us: u64,
    pub stop: RawFd,
}

/// A received datagram in the inbound delay line: who sent it, its outer ECN codepoint, and when
/// it was received (µs since the epoch).
type InboundMeta = (SocketAddrV4, Ecn, u64);

impl Inbound {
    pub fn run(mut self) -> io::Result<(InboundTotals, io::Result<()>)> {
        let mut totals = InboundTotals::default();
        let mut batch = RecvBatch::new(BATCH, MAX_DATAGRAM_BYTES);
        let mut coalescer = Coalescer::default();
        let mut delayed = (self.extra_delay_us > 0).then(|| DelayLine::<InboundMeta>::new(self.extra_delay_us));
        tighten_timer_slack();
        loop {
            let release_us = delayed.as_ref().and_then(|line| line.due_in_us(monotonic_us()));
            if wait(self.socket.fd(), false, self.stop, release_us.map(|us| us * 1000))?.stop {
                break;
            }
            let received = batch.receive(&self.socket)?;
            let clocks = delayed.is_some().then(RealtimeOffset::now);
            for i in 0..received {
                let datagram = batch.get(i);
                let received_epoch_us = datagram.realtime_ns.map_or_else(epoch_us, |ns| ns / 1000);
                if let Some(drops) = datagram.overflow_drops {
                    totals.overflow_drops = drops;
                }
                let from = datagram.from;
                // The socket reports every datagram's TOS (`SOCKET`).
                let outer = datagram.tos.map_or(Ecn::NotEct, Ecn::from_tos);
                if let (Some(line), Some(clocks)) = (delayed.as_mut(), clocks) {
                    if matches!(tunnel_wire::decapsulate(datagram.bytes), Ok(Message::Data { .. })) {
                        let arrived_us =
                            datagram.realtime_ns.map_or_else(monotonic_us, |ns| clocks.to_monotonic_us(ns));
                        line.hold(arrived_us, datagram.bytes, (from, outer, received_epoch_us));
                        continue;
                    }
                }
                self.handle(from, batch.bytes_mut(i), outer, received_epoch_us, &mut coalescer, &mut totals);
            }
            if let Some(line) = delayed.as_mut() {
                let delay_us = line.delay_us();
                line.release(monotonic_us(), |datagram, (from, outer, received_epoch_us), _| {
                    // Logged when it leaves the line on time: its receive time plus the delay.
                    let left_epoch_us = received_epoch_us + delay_us;
                    self.handle(from, datagram, outer, left_epoch_us, &mut coalescer, &mut totals);
                    Ok::<(), io::Error>(())
                })?;
            }
            self.write(&mut coalescer, &mut totals);
            if let Some(pause_us) = moderation_pause_us(received) {
                std::thread::sleep(Duration::from_micros(pause_us));
            }
        }
        let log = self.log.finish().and(self.clock_log.finish());
        Ok((totals, log))
    }

    /// Admits, decapsulates and logs one datagram from `from` (received at `received_epoch_us`,
    /// µs since the epoch, with the outer codepoint `outer`), or answers it; a data datagram's
    /// inner datagram goes into `coalescer`.
    fn handle(
        &mut self,
        from: SocketAddrV4,
        bytes: &mut [u8],
        outer: Ecn,
        received_epoch_us: u64,
        coalescer: &mut Coalescer,
        totals: &mut InboundTotals,
    ) {
        let t_us = received_epoch_us.saturating_sub(self.base_epoch_us);
        match self.admission.on_datagram(from, bytes) {
            Verdict::Deliver { uid, inner } => {
                debug_assert_eq!(inner.len(), bytes.len() - HEADER_BYTES);
                // Authenticated: now the inner header may be rewritten where it lies.
                let inner = &mut bytes[HEADER_BYTES..];
                let ecn = match decapsulate(inner, outer) {
                    EcnExit::Forward { ecn, alarm } => {
                        totals.ecn_alarms += u64::from(alarm);
                        ecn
                    }
                    EcnExit::Drop => {
                        totals.ce_drops += 1;
                        return;
                    }
                };
                self.log.record(t_us, uid, inner.len(), ecn);
                if !coalescer.append(inner) {
                    self.write(coalescer, totals);
                    coalescer.start(inner);
                }
            }
            Verdict::Answer(welcome) => {
                if let Some(peer) = self.admission.peer() {
                    self.peer.set(peer);
                }
                // A lost welcome is answered again at the client's next hello.
                let _ = self.socket.send_to(&welcome, from, CONTROL_TOS);
            }
            Verdict::Probed { t1_us } => {
                // t3 as late as can be: the tag is computed after it.
                let answer = self.control.message(Control::Answer, &[t1_us, received_epoch_us, epoch_us()]);
                // A lost answer is a lost exchange, of which there are many.
                let _ = self.socket.send_to(&answer, from, CONTROL_TOS);
            }
            Verdict::Exchanged { t1_us, t2_us, t3_us } => {
                self.clock_log.record(t1_us, t2_us, t3_us, received_epoch_us);
            }
            Verdict::Welcomed => {}
            Verdict::Drop(dropped) => totals.dropped.count(dropped),
        }
    }

    /// Writes what the coalescer holds to the TUN device.
    fn write(&self, coalescer: &mut Coalescer, totals: &mut InboundTotals) {
        let Some((header, packet, datagrams)) = coalescer.take() else { return };
        let parts = [
            libc::iovec { iov_base: header.as_ptr() as *mut _, iov_len: header.len() },
            libc::iovec { iov_base: packet.as_ptr() as *mut _, iov_len: packet.len() },
        ];
        // SAFETY: both buffers outlive the call; the kernel only reads them.
        if unsafe { libc::writev(self.tun, parts.as_ptr(), 2) } < 0 {
            totals.write_errors += datagrams as u64;
        } else {
            totals.delivered += datagrams as u64;
        }
        coalescer.clear();
    }
}

/// Sends this endpoint's clock probes, from the moment it has a peer until it stops.
pub struct Prober {
    /// The endpoint's outer socket, shared with the relay threads.
    pub socket: Arc<UdpSocket>,
    /// The peer's address; a server's is set once its client has said hello.
    pub peer: Arc<PeerSlot>,
    /// Seals the probes.
    pub control: Arc<ControlSender>,
    /// Readable when the endpoint stops.
    pub stop: RawFd,
}

impl Prober {
    /// How often a server without a client yet looks again.
    const PEER_POLL_NS: u64 = 10_000_000;

    pub fn run(self) -> io::Result<()> {
        while self.peer.get().is_none() {
            if wait(-1, false, self.stop, Some(Self::PEER_POLL_NS))?.stop {
                return Ok(());
            }
        }
        let mut schedule = ProbeSchedule::new(monotonic_us());
        loop {
            let due_us = schedule.due_in_us(monotonic_us());
            if due_us > 0 {
                if wait(-1, false, self.stop, Some(due_us * 1000))?.stop {
                    return Ok(());
                }
                continue;
            }
            // Read each time: a server's client may have moved (its NAT re-mapped it).
            let to = self.peer.get().expect("a peer once set stays set");
            let t1_us = epoch_us();
            // A probe the kernel refuses is a lost exchange.
            let _ = self.socket.send_to(&self.control.message(Control::Probe, &[t1_us]), to, CONTROL_TOS);
            schedule.sent(monotonic_us());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inbound_pauses_only_while_traffic_is_dense() {
        assert_eq!(moderation_pause_us(0), None);
        assert_eq!(moderation_pause_us(1), None);
        assert_eq!(moderation_pause_us(2), Some(50));
        assert_eq!(moderation_pause_us(BATCH - 1), Some(50));
        assert_eq!(moderation_pause_us(BATCH), None);
    }

    #[test]
    fn peer_slot_round_trips_an_address() {
        let slot = PeerSlot::default();
        assert_eq!(slot.get(), None);
        let peer: SocketAddrV4 = "255.255.255.255:65535".parse().unwrap();
        slot.set(peer);
        assert_eq!(slot.get(), Some(peer));
        slot.set("0.0.0.0:0".parse().unwrap());
        assert_eq!(slot.get(), Some("0.0.0.0:0".parse().unwrap()));
    }
}
