//! The receiver: acknowledges every data datagram, at once and on its own, to the address it came
//! from, with the time the kernel received it and the count of that sender's data datagrams that
//! arrived marked CE so far (wire.rs). That count, one number per sender address, is all it keeps,
//! so senders may come and go (and several may share one receiver); a datagram that is not data
//! is ignored. Each datagram's ECN codepoint is the TOS the kernel reports with it (IP_RECVTOS);
//! acknowledgements are Not-ECT. A sender's count lasts as long as the receiver: a new sender on
//! an address an earlier one had (the kernel reused its port) would start from its predecessor's
//! count, and take that many marks at its first acknowledgement; the harness runs one receiver
//! per flow.
//!
//! Data is read in batches of up to 64 (recvmmsg) keeping only the 24-byte header of each, and
//! the batch's acknowledgements leave in one sendmmsg. The receive time is the kernel's
//! (SO_TIMESTAMPNS), moved onto CLOCK_MONOTONIC (`pantheon_sys::clock`), so a batch read late
//! still reports when each datagram arrived — the receive times that delay-based controllers and
//! rate estimators built on the receiver's clock need. An acknowledgement the socket cannot take
//! (buffer full, sender unreachable) is dropped: the sender sees a loss, as on a congested path.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::SocketAddrV4;

use pantheon_cc::Ecn;
use pantheon_sys::clock::{monotonic_us, RealtimeOffset};
use pantheon_sys::signal::Signals;
use pantheon_sys::udp::{RecvBatch, SendBatch, UdpSocket};

use crate::wait::{wait, SPIN_NS};
use crate::wire::{Ack, Data, ACK_BYTES, HEADER_BYTES};

/// Datagrams read (and acknowledgements sent) per system call.
const BATCH: usize = 64;
/// Acknowledgements are Not-ECT (DSCP 0).
const ACK_TOS: u8 = 0;

/// What the receiver did, for the line it prints when it stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub received: u64,
    /// Bytes of the data datagrams' UDP payloads.
    pub received_bytes: u64,
    pub ignored: u64,
    pub acks_dropped: u64,
    /// Data datagrams by the ECN codepoint they arrived with, indexed by its bits (`Ecn::bits`):
    /// Not-ECT, ECT(1), ECT(0), CE.
    pub by_ecn: [u64; 4],
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [not_ect, ect1, ect0, ce] = self.by_ecn;
        write!(
            f,
            "received {} data datagrams ({} bytes of payload; {not_ect} Not-ECT, {ect1} ECT(1), {ect0} ECT(0), {ce} CE), ignored {} others, dropped {} acknowledgements",
            self.received, self.received_bytes, self.ignored, self.acks_dropped
        )
    }
}

/// Acknowledges what arrives on `socket` (bound, with timestamps on) until `signals` request a
/// stop, handing the totals so far to `report` whenever they are asked for (SIGUSR1).
pub fn run(socket: &UdpSocket, signals: &Signals, report: &mut dyn FnMut(&Totals)) -> io::Result<Totals> {
    let mut data = RecvBatch::new(BATCH, HEADER_BYTES);
    let mut acks = SendBatch::new(BATCH, ACK_BYTES);
    let mut totals = Totals::default();
    // Per sender: its data datagrams that arrived marked CE.
    let mut ce_counts: HashMap<SocketAddrV4, u64> = HashMap::new();
    while !signals.stop().is_raised() {
        if signals.take_report_request() {
            report(&totals);
        }
        let n = data.receive(socket)?;
        if n == 0 {
            wait(socket.fd(), false, signals.stop().fd(), None, SPIN_NS)?;
            continue;
        }
        let offset = RealtimeOffset::now();
        let now_us = monotonic_us();
        for i in 0..n {
            let received = data.get(i);
            let Some(datagram) = Data::decode(received.bytes) else {
                totals.ignored += 1;
                continue;
            };
            totals.received += 1;
            totals.received_bytes += received.len as u64;
            let ecn = received.tos.map_or(Ecn::NotEct, Ecn::from_tos);
            totals.by_ecn[usize::from(ecn.bits())] += 1;
            let ce_count = ce_counts.entry(received.from).or_default();
            *ce_count += u64::from(ecn == Ecn::Ce);
            let recv_us = received.realtime_ns.map_or(now_us, |ns| offset.to_monotonic_us(ns));
            let slot = acks.slot().and_then(|slot| slot.try_into().ok());
            let slot = slot.expect("one acknowledgement slot per datagram of the batch");
            // Only the count's low 16 bits travel (wire.rs).
            Ack { seq: datagram.seq, send_us: datagram.send_us, recv_us, ce_count: *ce_count as u16 }.encode(slot);
            acks.commit(ACK_BYTES, Some(received.from), ACK_TOS);
        }
        totals.acks_dropped += acks.flush(socket)?;
    }
    Ok(totals)
}
