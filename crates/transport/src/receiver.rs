//! The receiver: acknowledges every data datagram, at once and on its own, to the address it came
//! from, with the time the kernel received it (wire.rs). It keeps no state per sender, so senders
//! may come and go (and several may share one receiver); a datagram that is not data is ignored.
//!
//! Data is read in batches of up to 64 (recvmmsg) keeping only the 24-byte header of each, and
//! the batch's acknowledgements leave in one sendmmsg. The receive time is the kernel's
//! (SO_TIMESTAMPNS), moved onto CLOCK_MONOTONIC (`pantheon_sys::clock`), so a batch read late
//! still reports when each datagram arrived — the receive times that delay-based controllers and
//! rate estimators built on the receiver's clock need. An acknowledgement the socket cannot take
//! (buffer full, sender unreachable) is dropped: the sender sees a loss, as on a congested path.

use std::fmt;
use std::io;

use pantheon_sys::clock::{monotonic_us, RealtimeOffset};
use pantheon_sys::signal::Signals;
use pantheon_sys::udp::{RecvBatch, SendBatch, UdpSocket};

use crate::wait::{wait, SPIN_NS};
use crate::wire::{Ack, Data, ACK_BYTES, HEADER_BYTES};

/// Datagrams read (and acknowledgements sent) per system call.
const BATCH: usize = 64;

/// What the receiver did, for the line it prints when it stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub received: u64,
    /// Bytes of the data datagrams' UDP payloads.
    pub received_bytes: u64,
    pub ignored: u64,
    pub acks_dropped: u64,
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "received {} data datagrams ({} bytes of payload), ignored {} others, dropped {} acknowledgements",
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
            let recv_us = received.realtime_ns.map_or(now_us, |ns| offset.to_monotonic_us(ns));
            let slot = acks.slot().and_then(|slot| slot.try_into().ok());
            let slot = slot.expect("one acknowledgement slot per datagram of the batch");
            Ack { seq: datagram.seq, send_us: datagram.send_us, recv_us }.encode(slot);
            acks.commit(ACK_BYTES, Some(received.from));
        }
        totals.acks_dropped += acks.flush(socket)?;
    }
    Ok(totals)
}
