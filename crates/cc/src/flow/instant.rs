//! A time on a flow's clock, counted from the flow's start.
//!
//! The flow mixes two grains: the controller and the bookkeeping count microseconds (the link
//! model's unit, and every `*_us` of crates/cc), while pacing needs nanoseconds (a 1464-byte
//! datagram occupies 11.712 µs at 1 Gbit/s; rounding each gap to a whole µs would pace 2.5 % off).
//! Each method of `Flow` once took whichever its caller had at hand (`next_send(now_ns)`,
//! `run_timers(now_us)`), and a µs passed where ns were meant is a factor of 1000 that compiles.
//! An `Instant` is one type for both: built from the unit the driver holds (`from_us`, `from_ns`)
//! and read in the unit the consumer needs (`as_us`, `as_ns`), so the unit is named at each end
//! and nowhere in between. Durations stay plain integers with their unit in the name (`gap_ns`,
//! `SILENCE_US`): they are constants and arithmetic, not times a caller hands in.

/// A time on a flow's clock, to the nanosecond.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    /// Nanoseconds since the flow's start.
    ns: u64,
}

impl Instant {
    /// The flow's start.
    pub const ZERO: Instant = Instant { ns: 0 };

    pub const fn from_ns(ns: u64) -> Instant {
        Instant { ns }
    }

    pub const fn from_us(us: u64) -> Instant {
        Instant { ns: us * 1000 }
    }

    pub const fn as_ns(self) -> u64 {
        self.ns
    }

    /// Whole microseconds, rounded down: the microsecond this instant falls in.
    pub const fn as_us(self) -> u64 {
        self.ns / 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_round_down_and_convert_back_exactly() {
        assert_eq!(Instant::from_ns(11_712).as_us(), 11);
        assert_eq!(Instant::from_ns(999).as_us(), 0);
        assert_eq!(Instant::from_us(1_000_000).as_ns(), 1_000_000_000);
        assert_eq!(Instant::from_us(42).as_us(), 42);
        assert!(Instant::from_us(1) > Instant::from_ns(999));
    }
}
