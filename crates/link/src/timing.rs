//! Which clock the path model keeps: microseconds (ours, the default), or Mahimahi's whole
//! milliseconds, for comparisons with results obtained on Mahimahi (issue 15 §1).
//!
//! How Mahimahi 0.98 keeps time (read in github.com/ravinet/mahimahi; described, not copied):
//! - Its clock is whole milliseconds: `timestamp()` (src/util/timestamp.cc) truncates
//!   CLOCK_REALTIME to ms, and every element stamps packets with it.
//! - `mm-delay` (src/frontend/delay_queue.cc) releases a packet at its arrival stamp plus the
//!   delay, so a packet arriving 0.7 ms into a millisecond is held 0.7 ms less than the delay.
//! - `mm-link` (src/frontend/link_queue.cc) places delivery opportunities on whole milliseconds
//!   (its traces are ms), and `read_packet` runs every opportunity up to and including the
//!   packet's ms stamp (`rationalize(now)`) before enqueueing it. So an opportunity never carries
//!   a packet that arrived during its own millisecond, not even one that arrived at the instant
//!   the millisecond began: the packet waits for the next one.
//!
//! With `Timing::Mahimahi` the model does the same: the delay truncates the entry time to the
//! millisecond, opportunities of a constant or Poisson schedule fall on the first whole
//! millisecond at or after their exact time (as a Mahimahi trace of that rate would place them),
//! and an opportunity serves only packets that reached the queue before it. Mahimahi's event
//! loop then writes each packet when it next wakes, some time after the millisecond it is due
//! (poll(2) with a ms timeout); that lateness is the host's, not the model's, and is not
//! reproduced.

/// The path model's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Timing {
    /// Exact times in microseconds.
    #[default]
    Microseconds,
    /// Mahimahi's whole-millisecond clock.
    Mahimahi,
}

const MS_US: u64 = 1000;

impl Timing {
    /// The time a packet arriving at `t_us` is stamped with by the delay line.
    pub fn stamp_us(self, t_us: u64) -> u64 {
        match self {
            Timing::Microseconds => t_us,
            Timing::Mahimahi => t_us / MS_US * MS_US,
        }
    }

    /// When an opportunity whose exact time is `exact_us` happens.
    pub fn opportunity_us(self, exact_us: u64) -> u64 {
        match self {
            Timing::Microseconds => exact_us,
            // Saturates at the end of u64 time rather than wrap (delay.rs, schedule.rs).
            Timing::Mahimahi => exact_us.div_ceil(MS_US).saturating_mul(MS_US),
        }
    }

    /// Whether the opportunity at `opportunity_us` (a time `opportunity_us` returned) comes before
    /// a packet that reaches the queue at `arrival_us`, and so cannot carry it.
    pub fn precedes_arrival(self, opportunity_us: u64, arrival_us: u64) -> bool {
        match self {
            Timing::Microseconds => opportunity_us < arrival_us,
            Timing::Mahimahi => opportunity_us <= arrival_us,
        }
    }

    /// The exact time before which every opportunity precedes an arrival at `arrival_us`, so that
    /// an idle link can skip them: the least `b` with `precedes_arrival(opportunity_us(x), arrival_us)`
    /// exactly when `x < b`.
    pub fn skip_bound_us(self, arrival_us: u64) -> u64 {
        match self {
            Timing::Microseconds => arrival_us,
            // ceil_ms(x) <= a  <=>  x <= floor_ms(a).
            Timing::Mahimahi => arrival_us / MS_US * MS_US + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mahimahi_stamps_truncate_and_opportunities_round_up_to_the_millisecond() {
        assert_eq!(Timing::Mahimahi.stamp_us(20_999), 20_000);
        assert_eq!(Timing::Mahimahi.stamp_us(21_000), 21_000);
        assert_eq!(Timing::Mahimahi.opportunity_us(120), 1000);
        assert_eq!(Timing::Mahimahi.opportunity_us(1000), 1000);
        assert_eq!(Timing::Mahimahi.opportunity_us(1001), 2000);
        assert_eq!(Timing::Microseconds.stamp_us(20_999), 20_999);
        assert_eq!(Timing::Microseconds.opportunity_us(120), 120);
    }

    #[test]
    fn an_opportunity_does_not_carry_what_arrives_in_its_own_millisecond() {
        assert!(Timing::Mahimahi.precedes_arrival(3000, 3000));
        assert!(Timing::Mahimahi.precedes_arrival(3000, 3999));
        assert!(!Timing::Mahimahi.precedes_arrival(4000, 3999));
        assert!(!Timing::Microseconds.precedes_arrival(3000, 3000));
        assert!(Timing::Microseconds.precedes_arrival(2999, 3000));
    }

    #[test]
    fn skip_bound_agrees_with_precedes_arrival() {
        for timing in [Timing::Microseconds, Timing::Mahimahi] {
            for arrival_us in [0u64, 1, 999, 1000, 1001, 2500, 3000] {
                for exact_us in 0..5000 {
                    let precedes = timing.precedes_arrival(timing.opportunity_us(exact_us), arrival_us);
                    assert_eq!(
                        precedes,
                        exact_us < timing.skip_bound_us(arrival_us),
                        "{timing:?} {arrival_us} {exact_us}"
                    );
                }
            }
        }
    }
}
