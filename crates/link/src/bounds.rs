//! The largest (and smallest) values the link model accepts, checked where a value comes in (the
//! command line, a trace file, a simulator job) so that nothing inside has to check per packet.
//!
//! Model time is a `u64` of microseconds. With every bound below, a time the model computes is at
//! most the run's length plus an hour (the delay) plus a day (a trace's cycle), far below the
//! 2^64 µs (584 000 years) where `u64` wraps; the sums that could reach it only for a driver that
//! ran that long (a packet's release time, a trace cycle's start) saturate instead.

/// Longest one-way propagation delay: one hour. Beyond it a run is not an experiment on a path
/// any congestion controller meets, and `--delay 1e300` would saturate the clock.
pub const MAX_DELAY_US: u64 = 3_600_000_000;

/// Highest rate of a constant or Poisson delivery schedule or a policer: 1 Tbit/s. Above it a
/// Poisson schedule's mean gap (0.012 µs here) falls below the resolution of its `f64` clock
/// after a year of model time, so the schedule would stop advancing.
pub const MAX_RATE_MBPS: f64 = 1_000_000.0;

/// Lowest rate: 1 kbit/s, one 1500-byte opportunity every 12 s. The constant schedule keeps its
/// rate in whole bit/s, so near 1 bit/s the rate it ran would differ from the rate asked for.
pub const MIN_RATE_MBPS: f64 = 0.001;

/// Largest DropTail limit and policer bucket: 2^32 bytes or packets (4 GiB of full packets is
/// already more than a run's memory holds; a larger limit never binds).
pub const MAX_BUFFER: u64 = 1 << 32;

/// Latest timestamp in a Mahimahi trace: one day, in ms (traces are recordings of minutes).
pub const MAX_TRACE_MS: u64 = 86_400_000;

/// Most delivery opportunities (non-blank lines) in one trace: 10 million, 80 MB in memory; a
/// trace of one minute at 1 Gbit/s has 5 million.
pub const MAX_TRACE_OPPORTUNITIES: usize = 10_000_000;

/// Longest line of a trace, in bytes: a timestamp is at most 8 digits (`MAX_TRACE_MS`), and
/// spaces or a carriage return may surround it.
pub const MAX_TRACE_LINE_BYTES: usize = 64;

/// Largest trace file, in bytes: 10 million lines of up to 8 digits and a newline, with room to
/// spare. Checked on the file's size before reading, so a huge or sparse file costs nothing.
pub const MAX_TRACE_FILE_BYTES: u64 = 128 << 20;
