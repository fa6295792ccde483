//! The drivers' clocks. CLOCK_MONOTONIC (clock_gettime(2), read through the vDSO in tens of
//! nanoseconds) is shared by every namespace on the machine and never steps, so every time a
//! driver measures or schedules with is on it. The wall clock (CLOCK_REALTIME) appears only where
//! a time must mean something outside the host: log headers, and the kernel's receive stamps,
//! which it takes on CLOCK_REALTIME only (SO_TIMESTAMPNS, socket(7)); `RealtimeOffset` moves such a
//! stamp onto CLOCK_MONOTONIC by the two clocks' current difference, which a step of the wall clock
//! changes and NTP's slewing does not (both clocks are slewed alike).
//!
//! Nanoseconds where a driver schedules (pacing at 1 Gbit/s spaces 1464-byte packets 11.712 µs
//! apart; whole microseconds would skew the rate by up to 8.5 %), microseconds everywhere else.
//! Sleeping precisely also needs the thread's timer slack lowered (`tighten_timer_slack`).

fn read_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec; the clocks used here always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds on CLOCK_MONOTONIC.
pub fn monotonic_ns() -> u64 {
    read_ns(libc::CLOCK_MONOTONIC)
}

/// Microseconds on CLOCK_MONOTONIC.
pub fn monotonic_us() -> u64 {
    monotonic_ns() / 1000
}

/// Microseconds since the Unix epoch on CLOCK_REALTIME: for log headers and the kernel's stamps,
/// never for measuring an interval.
pub fn epoch_us() -> u64 {
    epoch_ns() / 1000
}

/// Nanoseconds since the Unix epoch on CLOCK_REALTIME.
pub fn epoch_ns() -> u64 {
    read_ns(libc::CLOCK_REALTIME)
}

/// A clock reading 0 when it starts: CLOCK_MONOTONIC minus its origin. A flow's sender counts
/// from its flow's start, as in the simulator, where every flow starts at 0: state initialised to
/// time 0 (BBR's RTprop stamp, draft-cardwell-iccrg-bbr-congestion-control-00 §4.1.2.3, is "now"
/// at initialisation) then means the same thing in both drivers.
#[derive(Debug, Clone, Copy)]
pub struct FlowClock {
    /// CLOCK_MONOTONIC at the start, in nanoseconds.
    origin_ns: u64,
}

impl FlowClock {
    pub fn start() -> FlowClock {
        FlowClock { origin_ns: monotonic_ns() }
    }

    pub fn now_ns(&self) -> u64 {
        monotonic_ns() - self.origin_ns
    }

    pub fn now_us(&self) -> u64 {
        self.now_ns() / 1000
    }

    /// A time of this clock on CLOCK_MONOTONIC, for deadlines.
    pub fn to_monotonic_ns(&self, t_ns: u64) -> u64 {
        self.origin_ns.saturating_add(t_ns)
    }

    /// A kernel receive stamp (CLOCK_REALTIME ns) on this clock, in ns; 0 for one before the start.
    pub fn from_realtime_ns(&self, offset: &RealtimeOffset, realtime_ns: u64) -> u64 {
        offset.to_monotonic_ns(realtime_ns).saturating_sub(self.origin_ns)
    }
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC, read now.
#[derive(Debug, Clone, Copy)]
pub struct RealtimeOffset {
    /// The difference in nanoseconds (positive on any machine whose wall clock is past 1970).
    offset_ns: i128,
}

impl RealtimeOffset {
    pub fn now() -> RealtimeOffset {
        let monotonic = monotonic_ns();
        let realtime = read_ns(libc::CLOCK_REALTIME);
        RealtimeOffset { offset_ns: realtime as i128 - monotonic as i128 }
    }

    /// A CLOCK_REALTIME time in nanoseconds as CLOCK_MONOTONIC microseconds.
    pub fn to_monotonic_us(&self, realtime_ns: u64) -> u64 {
        self.to_monotonic_ns(realtime_ns) / 1000
    }

    /// A CLOCK_REALTIME time in nanoseconds as CLOCK_MONOTONIC nanoseconds.
    pub fn to_monotonic_ns(&self, realtime_ns: u64) -> u64 {
        (realtime_ns as i128 - self.offset_ns).max(0) as u64
    }
}

/// User plus system CPU seconds this process has used so far (CLOCK_PROCESS_CPUTIME_ID).
pub fn process_cpu_s() -> f64 {
    read_ns(libc::CLOCK_PROCESS_CPUTIME_ID) as f64 / 1e9
}

/// Lets this thread's timers fire within a nanosecond of their deadline. The default slack is
/// 50 µs (prctl(2) PR_SET_TIMERSLACK): most of the emulator's delay error budget, and more than
/// the gap between two paced datagrams at 1 Gbit/s.
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_realtime_stamp_taken_now_maps_to_monotonic_now() {
        let offset = RealtimeOffset::now();
        let before_us = monotonic_us();
        let mapped_us = offset.to_monotonic_us(read_ns(libc::CLOCK_REALTIME));
        let after_us = monotonic_us();
        // Within the 1 ms a descheduled test thread may lose between the reads.
        assert!(mapped_us + 1_000 >= before_us && mapped_us <= after_us + 1_000, "{before_us} {mapped_us} {after_us}");
    }

    #[test]
    fn a_flow_clock_starts_at_zero() {
        let clock = FlowClock::start();
        let t_ns = clock.now_ns();
        // Within the 1 ms a descheduled test thread may lose.
        assert!(t_ns < 1_000_000, "{t_ns}");
        assert_eq!(clock.to_monotonic_ns(0), clock.origin_ns);
    }

    #[test]
    fn monotonic_never_goes_back() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a);
    }

    #[test]
    fn the_epoch_is_the_system_time() {
        let system_us = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as u64;
        // Within the 1 s a descheduled test thread could never lose.
        assert!(epoch_us().abs_diff(system_us) < 1_000_000);
    }
}
