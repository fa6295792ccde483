//! The real-time driver of one direction: reads datagrams from one TUN device, runs them through
//! the sans-IO path model on the wall clock, and writes each to the other TUN device at the
//! instant the model says it departs.
//!
//! Timing: each datagram is stamped with CLOCK_MONOTONIC as it is read. The thread sleeps in
//! ppoll(2) (nanosecond timeout, 1 ns timer slack) until a datagram arrives or the model's next
//! event is `SPIN_US` away, never longer than `MAX_SLEEP_US`, and polls through the last
//! `SPIN_US`. A departure is written when the model's time for it has come; how late that write
//! was is logged.
//!
//! Stalls (`--stalls`, off by default): a departure due during one of the modelled host's stalls
//! (pantheon_link's stalls.rs) is held until the stall ends, as Mahimahi's event loop held its
//! writes while it was descheduled (docs/emulator.md). The model's times, and so both logs' times
//! and delays, are unchanged, as in Mahimahi's log; a held departure's lateness column is its
//! hold. Both directions draw the same stalls: one host stops both ways.
//!
//! Memory: datagrams live in a pool of fixed-size slots that grows to the path's high-water mark
//! and is then reused; the model carries slot numbers, not bytes. Nothing is allocated per packet
//! once the pool has grown.

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pantheon_format::ip_ecn;
use pantheon_format::link_log::{MahimahiLog, NativeLog};
use pantheon_link::stalls::Stalls;
use pantheon_link::{DropCause, Event, PacketInfo, Path};
use pantheon_sys::clock::{monotonic_us, tighten_timer_slack};
use pantheon_sys::poll::wait;
use pantheon_sys::stop::StopSignal;

/// Largest datagram read from a TUN device; the devices' MTU is 1500, so this never truncates.
const SLOT_BYTES: usize = 2048;
/// Datagrams read per wake-up before the model is polled again.
const READ_BATCH: usize = 64;

/// While datagrams flow, no sleep is longer than this, so that one arriving at a waiting relay is
/// read within microseconds: a virtual CPU that halts only briefly is kept polled by its
/// hypervisor and wakes at once, one that halts for milliseconds is descheduled and wakes
/// 30-100 us late (measured here).
const MAX_SLEEP_US: u64 = 100;
/// After this long without a datagram in either direction the path counts as idle and both
/// relays sleep up to `IDLE_SLEEP_US` (short sleeps cost ~12% of a core; an idle emulator should
/// cost nothing). Only the first datagram after an idle spell can be read late. Both directions
/// share the decision because a waiting relay keeps its vCPU warm for the other's wake-ups too.
const IDLE_AFTER_US: u64 = 1_000_000;
const IDLE_SLEEP_US: u64 = 10_000;

/// A deadline closer than this is waited for by polling rather than sleeping: no timer wakes a
/// thread that precisely (a few us late at best, measured here).
const SPIN_US: u64 = 25;

/// How to wait for a deadline `remaining_us` away (`None`: no deadline): `None` to keep polling,
/// or how long to sleep, ending `SPIN_US` before the deadline.
fn sleep_for(remaining_us: Option<u64>, idle: bool) -> Option<u64> {
    let longest_us = if idle { IDLE_SLEEP_US } else { MAX_SLEEP_US };
    match remaining_us {
        Some(r) if r <= SPIN_US => None,
        Some(r) => Some((r - SPIN_US).min(longest_us)),
        None => Some(longest_us),
    }
}

struct Slot {
    bytes: Box<[u8; SLOT_BYTES]>,
    len: u32,
    uid: u64,
    entry_us: u64,
}

/// Reusable datagram buffers addressed by index.
#[derive(Default)]
struct Pool {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

impl Pool {
    fn take(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot { bytes: Box::new([0; SLOT_BYTES]), len: 0, uid: 0, entry_us: 0 });
            (self.slots.len() - 1) as u32
        })
    }

    fn give_back(&mut self, index: u32) {
        self.free.push(index);
    }
}

/// Why a direction failed.
#[derive(Debug)]
pub enum Failure {
    /// Reading or waiting on a TUN device failed: the direction stopped relaying.
    Relay(io::Error),
    /// A log file could not be written completely (a full disk: ENOSPC); the log is cut short.
    Log(io::Error),
}

/// What a direction reports when it stops.
#[derive(Debug, Default, Clone, Copy)]
pub struct Totals {
    /// Departing datagrams the far TUN device refused.
    pub write_errors: u64,
}

pub struct Direction {
    pub path: Path<u32>,
    /// Descriptor datagrams are read from.
    pub source: RawFd,
    /// Descriptor departing datagrams are written to.
    pub sink: RawFd,
    /// Raised when the direction must stop.
    pub stop: Arc<StopSignal>,
    /// Time zero of the model and the logs, on CLOCK_MONOTONIC.
    pub base_us: u64,
    pub log: Option<NativeLog>,
    pub mm_log: Option<MahimahiLog>,
    /// When either direction last read a datagram (shared by both).
    pub last_read_us: Arc<AtomicU64>,
    /// The modelled host's stalls, which hold departures back (`--stalls`).
    pub stalls: Option<Stalls>,
}

/// Writes a departing datagram to the far TUN device and frees its slot; a refusal is counted.
fn write_out(sink: RawFd, pool: &mut Pool, totals: &mut Totals, packet: u32) {
    let slot = &pool.slots[packet as usize];
    // SAFETY: writing slot.len bytes of our buffer.
    let n = unsafe { libc::write(sink, slot.bytes.as_ptr().cast(), slot.len as usize) };
    if n < 0 {
        totals.write_errors += 1;
    }
    pool.give_back(packet);
}

impl Direction {
    /// Relays until `stop` is raised; returns the counters. The logs are flushed however
    /// the relay ends, so an I/O error loses nothing already logged.
    pub fn run(mut self) -> Result<Totals, Failure> {
        let mut totals = Totals::default();
        let relayed = self.relay(&mut totals);
        let logs = [self.log.take().map(NativeLog::finish), self.mm_log.take().map(MahimahiLog::finish)];
        relayed?;
        logs.into_iter().flatten().collect::<io::Result<()>>().map_err(Failure::Log)?;
        Ok(totals)
    }

    fn relay(&mut self, totals: &mut Totals) -> Result<(), Failure> {
        tighten_timer_slack();
        let mut pool = Pool::default();
        // Departures the stalls hold back: (when to write, slot), in order.
        let mut held = VecDeque::new();
        let mut next_uid = 0u64;
        loop {
            let now_us = monotonic_us() - self.base_us;
            self.deliver_due(now_us, &mut pool, &mut held, totals).map_err(Failure::Log)?;

            let mut read_any = false;
            for _ in 0..READ_BATCH {
                let index = pool.take();
                let slot = &mut pool.slots[index as usize];
                // SAFETY: reading into a buffer of SLOT_BYTES we own.
                let n = unsafe { libc::read(self.source, slot.bytes.as_mut_ptr().cast(), SLOT_BYTES) };
                if n <= 0 {
                    pool.give_back(index);
                    let err = io::Error::last_os_error();
                    if n == 0 || err.kind() == io::ErrorKind::WouldBlock || err.kind() == io::ErrorKind::Interrupted {
                        break;
                    }
                    return Err(Failure::Relay(err));
                }
                let t_us = monotonic_us() - self.base_us;
                slot.len = n as u32;
                slot.uid = next_uid;
                slot.entry_us = t_us;
                if let Some(log) = self.log.as_mut() {
                    log.entry(t_us, next_uid, slot.len);
                }
                next_uid += 1;
                let datagram = &slot.bytes[..slot.len as usize];
                let info =
                    PacketInfo { size_bytes: slot.len, ecn: ip_ecn::ecn(datagram), flow: ip_ecn::flow_key(datagram) };
                self.path.push(t_us, index, info);
                read_any = true;
            }
            if read_any {
                self.last_read_us.store(now_us, Ordering::Relaxed);
                continue;
            }
            let now_us = monotonic_us() - self.base_us;
            let idle = now_us.saturating_sub(self.last_read_us.load(Ordering::Relaxed)) > IDLE_AFTER_US;
            let next_us = self.path.next_wakeup_us().into_iter().chain(held.front().map(|&(at_us, _)| at_us)).min();
            match sleep_for(next_us.map(|t| t.saturating_sub(now_us)), idle) {
                Some(timeout_us) => {
                    if wait(self.source, false, self.stop.fd(), Some(timeout_us * 1000)).map_err(Failure::Relay)?.stop {
                        break;
                    }
                }
                None => {
                    if self.stop.is_raised() {
                        break;
                    }
                }
            }
        }
        // Log (and deliver) what the model did up to the end, idle opportunities included.
        let end_us = monotonic_us() - self.base_us;
        self.deliver_due(end_us, &mut pool, &mut held, totals).map_err(Failure::Log)
    }

    /// Runs the model up to `now_us`, writing departures and logging everything; an error is the
    /// logs' (a refused departure is counted in `totals`).
    fn deliver_due(
        &mut self,
        now_us: u64,
        pool: &mut Pool,
        held: &mut VecDeque<(u64, u32)>,
        totals: &mut Totals,
    ) -> io::Result<()> {
        let Direction { path, sink, base_us, log, mm_log, stalls, .. } = self;
        let sink = *sink;
        let mut result = Ok(());
        let mut note = |r: io::Result<()>| {
            if result.is_ok() {
                result = r;
            }
        };
        path.poll(now_us, &mut |event| match event {
            Event::Departure { t_us, packet, size_bytes, queued_at_us, marked } => {
                let slot = &mut pool.slots[packet as usize];
                if marked {
                    ip_ecn::set_ecn(&mut slot.bytes[..slot.len as usize], pantheon_link::Ecn::Ce);
                }
                let (uid, delay_us) = (slot.uid, t_us - slot.entry_us);
                let release_us = stalls.as_mut().map_or(t_us, |s| s.resume_us(t_us));
                let lateness_us = if release_us > now_us {
                    held.push_back((release_us, packet));
                    release_us - t_us
                } else {
                    // Held ones release no later than this one: they go first.
                    for (_, earlier) in held.drain(..) {
                        write_out(sink, pool, totals, earlier);
                    }
                    // The clock is read only for the log's lateness column.
                    let written_us = log.as_ref().map_or(0, |_| monotonic_us() - *base_us);
                    write_out(sink, pool, totals, packet);
                    written_us.saturating_sub(t_us)
                };
                if let Some(log) = log.as_mut() {
                    note(log.departure(t_us, uid, size_bytes, delay_us, lateness_us, marked));
                }
                if let Some(mm) = mm_log.as_mut() {
                    note(mm.departure(t_us, size_bytes, t_us - queued_at_us));
                }
            }
            Event::Drop { t_us, packet, size_bytes, cause } => {
                if let Some(log) = log.as_mut() {
                    note(log.drop(t_us, pool.slots[packet as usize].uid, size_bytes, cause));
                }
                if let (Some(mm), DropCause::Queue | DropCause::Aqm) = (mm_log.as_mut(), cause) {
                    note(mm.drop(t_us, size_bytes));
                }
                pool.give_back(packet);
            }
            Event::LinkArrival { t_us, size_bytes } => {
                if let Some(mm) = mm_log.as_mut() {
                    note(mm.arrival(t_us, size_bytes));
                }
            }
            Event::Opportunity { t_us } => {
                if let Some(log) = log.as_mut() {
                    note(log.opportunity(t_us));
                }
                if let Some(mm) = mm_log.as_mut() {
                    note(mm.opportunity(t_us));
                }
            }
        });
        while let Some(&(release_us, packet)) = held.front() {
            if release_us > now_us {
                break;
            }
            write_out(sink, pool, totals, packet);
            held.pop_front();
        }
        if let Some(log) = log.as_mut() {
            note(log.settle());
        }
        result
    }
}
