//! A host's stalls: the moments a machine stops running a program (descheduled, interrupted, its
//! virtual CPU halted by the hypervisor), during which nothing that program should do happens,
//! and after which everything that fell due happens at once.
//!
//! Model: stalls begin as a Poisson process in time, `per_s` a second, each lasting an
//! exponential of mean `mean_us`, drawn from one seeded stream. An action due at `t_us` happens
//! at `t_us`, or, if a stall that began at or before `t_us` is still going on, when the latest
//! such stall ends. So stalls come in time, not per action (a machine stops whatever the packet
//! rate), never reorder what they hold, and release it together: the clump a descheduled thread
//! makes. The share of actions held back longer than `x` is `per_s · mean · e^(−x/mean)` (the
//! residual of an exponential is the same exponential) while stalls rarely overlap.
//!
//! Two drivers use it: the simulator for its hosts' stalls where receivers turn data into
//! acknowledgements and senders read them (pantheon-sim, host.rs), and the emulator to hold its
//! writes back as Mahimahi's event loops were held on the host it ran on (`pantheon-emu
//! --stalls`, docs/emulator.md). The model is pure: it reads no clock.

use crate::rng::Rng;

/// How often a host stalls and for how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StallConfig {
    /// Stalls a second, the rate of a Poisson process in time.
    pub per_s: f64,
    /// The mean length of a stall (exponential), µs.
    pub mean_us: f64,
}

/// One host's stalls, as a stream of times.
#[derive(Debug, Clone)]
pub struct Stalls {
    config: StallConfig,
    rng: Rng,
    /// When the next stall begins.
    next_start_us: u64,
    /// When the latest stall begun so far ends.
    end_us: u64,
}

impl Stalls {
    /// The stalls drawn from the stream seeded `seed`.
    pub fn new(config: StallConfig, seed: u64) -> Stalls {
        let mut rng = Rng::new(seed);
        let next_start_us = gap_us(config, &mut rng);
        Stalls { config, rng, next_start_us, end_us: 0 }
    }

    /// When an action due at `t_us` happens: at `t_us`, or when the stall it falls in ends.
    /// Calls must come in non-decreasing `t_us`.
    pub fn resume_us(&mut self, t_us: u64) -> u64 {
        while self.next_start_us <= t_us {
            let length_us = self.rng.exponential(self.config.mean_us).round() as u64;
            self.end_us = self.end_us.max(self.next_start_us.saturating_add(length_us));
            self.next_start_us = self.next_start_us.saturating_add(gap_us(self.config, &mut self.rng));
        }
        t_us.max(self.end_us)
    }
}

fn gap_us(config: StallConfig, rng: &mut Rng) -> u64 {
    (rng.exponential(1e6 / config.per_s).round() as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEN_OF_1_MS: StallConfig = StallConfig { per_s: 10.0, mean_us: 1000.0 };

    /// Actions due every `spacing_us` for 200 s: the share held back more than 0.5 and 1.5 ms.
    fn late_shares(spacing_us: u64) -> (f64, f64) {
        let mut stalls = Stalls::new(TEN_OF_1_MS, 1);
        let held: Vec<u64> = (0..200_000_000 / spacing_us)
            .map(|i| {
                let t_us = i * spacing_us;
                stalls.resume_us(t_us) - t_us
            })
            .collect();
        let share = |over_us: u64| held.iter().filter(|&&h| h > over_us).count() as f64 / held.len() as f64;
        (share(500), share(1500))
    }

    #[test]
    fn stalls_hold_the_same_share_of_actions_back_at_any_rate() {
        // Stalled 1% of the time; held over 0.5 ms: 1% · e^-0.5 = 0.61%, over 1.5 ms:
        // 1% · e^-1.5 = 0.22%, whether an action is due every ms or every 120 µs.
        for spacing_us in [1000, 120] {
            let (over_half_ms, over_1_5_ms) = late_shares(spacing_us);
            assert!((0.0050..0.0072).contains(&over_half_ms), "every {spacing_us} µs: {over_half_ms} over 0.5 ms");
            assert!((0.0016..0.0029).contains(&over_1_5_ms), "every {spacing_us} µs: {over_1_5_ms} over 1.5 ms");
        }
    }

    #[test]
    fn actions_keep_their_order_and_a_stall_releases_what_it_held_together() {
        let mut stalls = Stalls::new(TEN_OF_1_MS, 7);
        let resumed: Vec<(u64, u64)> = (0..500_000u64).map(|i| (i * 100, stalls.resume_us(i * 100))).collect();
        assert!(resumed.windows(2).all(|w| w[0].1 <= w[1].1), "out of order");
        // 50 s at ten stalls a second: ~500 stalls, all but the shortest (under the 100 µs
        // spacing, 10%) holding actions, each run of them released at one instant.
        let mut releases: Vec<u64> = resumed.iter().filter(|(t, r)| r > t).map(|&(_, r)| r).collect();
        releases.dedup();
        assert!((380..=520).contains(&releases.len()), "{} releases", releases.len());
    }

    #[test]
    fn a_seed_is_one_stream() {
        let draw = |seed| {
            let mut stalls = Stalls::new(TEN_OF_1_MS, seed);
            (0..2000).map(|i| stalls.resume_us(i * 1000)).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }
}
