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
//! Transfers (`--transfers-log FILE`; wire.rs): a sender whose datagrams name a budget is a
//! transfer, complete when `budget_packets` distinct sequence numbers from its address have
//! arrived. The receiver keeps the set of them (at most the budget: it is dropped at completion),
//! writes `transfer_id end_epoch_us` (log.rs) with the kernel's receive time of the completing
//! datagram, and forgets that sender altogether, so that a receiver serving thousands of transfers
//! keeps only those under way. It remembers the last `REMEMBERED_TRANSFERS` completions (address
//! and id) so that a datagram still in flight at completion (the sender replaces one it declared
//! lost, and only learns it is done from the acknowledgements) does not start the count again; such
//! a datagram is acknowledged with a CE count of 0, which the sender reads as no new mark.
//!
//! Data is read in batches of up to 64 (recvmmsg) keeping only the 24-byte header of each, and
//! the batch's acknowledgements leave in one sendmmsg. The receive time is the kernel's
//! (SO_TIMESTAMPNS), moved onto CLOCK_MONOTONIC (`pantheon_sys::clock`), so a batch read late
//! still reports when each datagram arrived — the receive times that delay-based controllers and
//! rate estimators built on the receiver's clock need. An acknowledgement the socket cannot take
//! (buffer full, sender unreachable) is dropped: the sender sees a loss, as on a congested path.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::io;
use std::net::SocketAddrV4;

use pantheon_cc::Ecn;
use pantheon_sys::clock::{epoch_us, monotonic_us, RealtimeOffset};
use pantheon_sys::signal::Signals;
use pantheon_sys::udp::{RecvBatch, SendBatch, UdpSocket};

use crate::log::TransferLog;
use crate::wait::{wait, SPIN_NS};
use crate::wire::{Ack, Data, ACK_BYTES, DATA_HEADER_BYTES};

/// Datagrams read (and acknowledgements sent) per system call.
const BATCH: usize = 64;
/// Acknowledgements are Not-ECT (DSCP 0).
const ACK_TOS: u8 = 0;
/// Completed transfers remembered against late datagrams: far more than complete within one
/// round trip at any arrival rate the harness plans.
const REMEMBERED_TRANSFERS: usize = 4096;

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
    /// Transfers complete (logged).
    pub transfers: u64,
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [not_ect, ect1, ect0, ce] = self.by_ecn;
        write!(
            f,
            "received {} data datagrams ({} bytes of payload; {not_ect} Not-ECT, {ect1} ECT(1), {ect0} ECT(0), {ce} CE), ignored {} others, dropped {} acknowledgements",
            self.received, self.received_bytes, self.ignored, self.acks_dropped
        )?;
        if self.transfers > 0 {
            write!(f, ", {} transfers complete", self.transfers)?;
        }
        Ok(())
    }
}

/// What the receiver keeps of one sender address.
#[derive(Debug, Default)]
struct Peer {
    /// Its data datagrams that arrived marked CE.
    ce_count: u64,
    /// The transfer it sends, while incomplete; `None` for a bulk sender (or without a log).
    transfer: Option<Transfer>,
}

#[derive(Debug)]
struct Transfer {
    id: u32,
    budget_packets: u32,
    /// The distinct sequence numbers received so far: fewer than the budget.
    seqs: HashSet<u64>,
}

/// The transfers of every sender address, and the completions to log.
struct Transfers {
    log: TransferLog,
    /// Recent completions, oldest first, and the same as a set.
    completed_order: VecDeque<(SocketAddrV4, u32)>,
    completed: HashSet<(SocketAddrV4, u32)>,
}

impl Transfers {
    /// Counts datagram `data` from `peer` (at `from`), received at `epoch_us`; whether its
    /// transfer is complete with it, logged, and the peer to be forgotten.
    fn on_data(&mut self, peer: &mut Peer, from: SocketAddrV4, data: &Data, epoch_us: u64) -> io::Result<bool> {
        let same = |t: &Transfer| t.id == data.transfer_id && t.budget_packets == data.budget_packets;
        if !peer.transfer.as_ref().is_some_and(same) {
            // The first datagram of a transfer, or a new sender on the address of one that never completed.
            peer.transfer =
                Some(Transfer { id: data.transfer_id, budget_packets: data.budget_packets, seqs: HashSet::new() });
        }
        let transfer = peer.transfer.as_mut().expect("set above");
        transfer.seqs.insert(data.seq);
        if transfer.seqs.len() < transfer.budget_packets as usize {
            return Ok(false);
        }
        self.log.line(transfer.id, epoch_us)?;
        if self.completed_order.len() == REMEMBERED_TRANSFERS {
            let oldest = self.completed_order.pop_front().expect("full");
            self.completed.remove(&oldest);
        }
        self.completed_order.push_back((from, transfer.id));
        self.completed.insert((from, transfer.id));
        Ok(true)
    }
}

/// Acknowledges what arrives on `socket` (bound, with timestamps on) until `signals` request a
/// stop, handing the totals so far to `report` whenever they are asked for (SIGUSR1). With
/// `transfers_log`, logs each transfer as it completes.
pub fn run(
    socket: &UdpSocket,
    signals: &Signals,
    transfers_log: Option<TransferLog>,
    report: &mut dyn FnMut(&Totals),
) -> io::Result<Totals> {
    let mut data = RecvBatch::new(BATCH, DATA_HEADER_BYTES);
    let mut acks = SendBatch::new(BATCH, ACK_BYTES);
    let mut totals = Totals::default();
    let mut peers: HashMap<SocketAddrV4, Peer> = HashMap::new();
    let mut transfers = transfers_log.map(|log| Transfers {
        log,
        completed_order: VecDeque::with_capacity(REMEMBERED_TRANSFERS),
        completed: HashSet::with_capacity(REMEMBERED_TRANSFERS),
    });
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
            let recv_us = received.realtime_ns.map_or(now_us, |ns| offset.to_monotonic_us(ns));
            let transfer = transfers.as_mut().filter(|_| datagram.budget_packets > 0);
            let ce_count = match transfer {
                Some(t) if t.completed.contains(&(received.from, datagram.transfer_id)) => 0,
                transfer => {
                    let peer = peers.entry(received.from).or_default();
                    peer.ce_count += u64::from(ecn == Ecn::Ce);
                    let ce_count = peer.ce_count;
                    if let Some(t) = transfer {
                        let epoch_us = received.realtime_ns.map_or_else(epoch_us, |ns| ns / 1000);
                        if t.on_data(peer, received.from, &datagram, epoch_us)? {
                            totals.transfers += 1;
                            peers.remove(&received.from);
                        }
                    }
                    ce_count
                }
            };
            let slot = acks.slot().and_then(|slot| slot.try_into().ok());
            let slot = slot.expect("one acknowledgement slot per datagram of the batch");
            // Only the count's low 16 bits travel (wire.rs).
            Ack { seq: datagram.seq, send_us: datagram.send_us, recv_us, ce_count: ce_count as u16 }.encode(slot);
            acks.commit(ACK_BYTES, Some(received.from), ACK_TOS);
        }
        totals.acks_dropped += acks.flush(socket)?;
    }
    Ok(totals)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn data(seq: u64, transfer_id: u32, budget_packets: u32) -> Data {
        Data { seq, send_us: 0, transfer_id, budget_packets }
    }

    #[test]
    fn a_transfer_completes_at_its_budget_of_distinct_datagrams() {
        let path = std::env::temp_dir().join(format!("pantheon-udp-receiver-{}", std::process::id()));
        let mut transfers = Transfers {
            log: TransferLog::new(std::fs::File::create(&path).unwrap()),
            completed_order: VecDeque::new(),
            completed: HashSet::new(),
        };
        let from = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 5000);
        let mut peer = Peer::default();
        // Budget 3: 0, 0 again (a duplicate), 2, then 5 (the replacement of a datagram the sender
        // declared lost) is the third distinct one.
        for (seq, complete) in [(0, false), (0, false), (2, false), (5, true)] {
            assert_eq!(transfers.on_data(&mut peer, from, &data(seq, 7, 3), 1_000 + seq).unwrap(), complete, "{seq}");
        }
        assert!(transfers.completed.contains(&(from, 7)));
        // A new sender on the same address that never completed starts its own count.
        let mut peer = Peer::default();
        assert!(!transfers.on_data(&mut peer, from, &data(0, 8, 2), 2_000).unwrap());
        assert!(!transfers.on_data(&mut peer, from, &data(0, 9, 2), 2_001).unwrap());
        assert!(transfers.on_data(&mut peer, from, &data(1, 9, 2), 2_002).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "7 1005\n9 2002\n");
        std::fs::remove_file(path).unwrap();
    }
}
