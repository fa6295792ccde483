//! The hosts' part of an acknowledgement's round trip: what the emulated experiment adds between
//! the path and the programs, which the simulator would otherwise leave out.
//!
//! In the real run an acknowledgement leaves the receiver some µs after its data arrived (the
//! tunnel endpoint wakes, writes to its TUN device, pantheon-udp's receiver wakes, replies, the
//! endpoint wakes again), and the sender hears of an acknowledgement some µs after it left the
//! path (the endpoint wakes, writes, the sender wakes from ppoll and reads). Both are wake-ups of
//! threads on a busy machine: a few µs at best, a tail of tens to hundreds.
//!
//! They matter beyond their size. A controller that keeps the *largest* delivery-rate sample
//! (BBR's max filter, draft-cardwell-iccrg-bbr-congestion-control-00 §4.1.1) or the smallest
//! RTT (Copa's standing RTT, Arun & Balakrishnan, NSDI 2018, §2.1) picks the extremes of this
//! noise: with noise-free acknowledgements, BBR over 12 Mbit/s, 20 ms, 60 kB held its queue at
//! 9 ms (p95 one-way delay 29 ms), where over pantheon-emu it crept each 10 s cycle to the window
//! cap (p95 55 ms), because a bandwidth estimate 0.3 % high — 100 µs early in a 40 ms sample —
//! is enough. With this model the simulator gave 52 ms.
//!
//! Model: each wake-up latency is `BASE_US` plus an exponential of mean `MEAN_US`, drawn from a
//! seeded stream of the run (so a run stays a function of its seed), one stream per flow. An
//! acknowledgement reaches the sender after one such latency; the receiver's acknowledgement
//! leaves after one. On top of that the machine stalls: at each of the two crossings (the
//! receiver's turnaround, the sender's reading) stalls come as a Poisson process in time,
//! `STALLS_PER_S` a second, each an exponential of mean `STALL_MEAN_US` long, shared by every flow,
//! and a wake-up due during a stall happens when it ends (pantheon_link's stalls.rs, which the
//! emulator's `--stalls` uses too). Both ends keep acknowledgements in order (simulation.rs), so
//! a stall holds back every acknowledgement behind it and releases them together: the clump of a
//! descheduled thread, from one mechanism.
//!
//! The numbers come from pantheon-emu runs on the 2-core development VM. The body: receiver
//! turnaround from the tunnel logs, data leaving the tunnel to its acknowledgement entering it:
//! p5 15–18 µs, median 34–38 µs, p95 88–98 µs; the body gives 16, 32 and 90. The stalls: a
//! window-limited sender (`fixed:cwnd_packets=20` and `=80`, half the BDP of a constant 12 and
//! 48 Mbit/s path with 20 ms each way, bench/host_latency.py), its acknowledgements followed from
//! the data's departure from the uplink (the emulator's link log) to the sender's reading them
//! (`pantheon-udp send --log`): p99 0.35–1.1 ms and p99.9 2.7–3.2 ms above the minimum, where two
//! wake-ups of the body alone give 0.2 and 0.26 ms. In the acknowledgements more than 0.5 ms
//! late (0.8–1.8% of them) the excess is spread over every thread on the way (the emulator's
//! relays, both tunnel endpoints, the receiver, the sender), several at once: the machine, not one
//! program, stops. Ten stalls a second at each crossing, 1 ms long on average, stall a crossing
//! 1% of the time and put 2 · 1% · e^-0.5 = 1.2% of acknowledgements 0.5 ms late and
//! 2 · 1% · e^-1.5 = 0.45% 1.5 ms late, as measured (0.8–1.8% and 0.4–0.5%), at 12 and 48 Mbit/s
//! alike.
//!
//! Stalls are the machine's, so they come in time, not per packet: until 2026-11-28 each wake-up
//! stalled with probability 1%, which is the same at 12 Mbit/s (a thousand acknowledgements a
//! second, two crossings each) but eight times as many stalls at 100 Mbit/s. Copa, whose
//! nearly-empty test compares its queueing delay with the spread of five round trips' RTTs, then
//! saw 3.5 ms of spread over india-wired where the emulator's hosts gave it 1.5 ms (docs/sim.md).
//!
//! The hosts start the flows late, too. The harness releases each flow's sender at its planned
//! instant, and the sender's first datagram leaves some milliseconds later, each flow's lateness
//! its own (docs/harness.md): so two flows planned together never start together. In the
//! fidelity matrix's 798 two-flow runs (2026-11-30, issue 38 §1), run.json's `start_lateness_ms`
//! of the 1 596 flows was 2.0 ms at p5, 3.6 at the first quartile, 4.8 at the median, 5.7 at the
//! third quartile and 7.3 at p95: a normal of mean 4.7 and standard deviation 1.5 gives 2.2, 3.7,
//! 4.7, 5.7 and 7.2. What the path sees is the gap between the flows' first datagrams (the
//! tunnel's log): in the 684 runs of pantheon-udp schemes 0.41 ms at the first quartile, 1.22 at
//! the median, 2.28 at the third, 3.39 at p90 and 4.05 at p95 (22 ms the most), where the
//! difference of two independent normals of standard deviation 1.4 ms gives 0.63, 1.33, 2.28,
//! 3.26 and 3.88. That gap decided one cell: BBR's two flows on the demo's deep buffer had a p95
//! of 91 ms started at the same microsecond, 119–121 ms with the second 0.5 to 2 ms later, as
//! emulated (docs/sim.md, "when the flows start"; bench/start_lateness.py measures all of these).
//!
//! Model: each bulk flow starts `start_lateness_us` after its plan, a normal of mean
//! `START_LATENESS_MEAN_US` (the lateness's) and standard deviation `START_LATENESS_SD_US` (the
//! gaps', which are what a cell sees; at least 0) drawn per flow from the run's seed, and the run's clock starts with the first of them, as the link's
//! lead (link_clock.rs) was measured to the first flow's first datagram: a run of one flow starts
//! as planned, bit for bit as before the model. A transfer's sender starts as planned (the
//! transfer driver, already running, begins transfers 0.3–1.8 ms late at the median: left out).
//! A replay of an emulated run, whose flows' starts are read off its logs, starts every sender
//! exactly as planned (`Scenario::with_exact_starts`).

use pantheon_link::rng::Rng;
use pantheon_link::stalls::{StallConfig, Stalls};

/// The shortest wake-up, µs.
pub const BASE_US: u64 = 15;
/// The mean of the exponential tail above it, µs.
pub const MEAN_US: f64 = 25.0;
/// Stalls a second at each crossing.
pub const STALLS_PER_S: f64 = 10.0;
/// The mean length of a stall, µs.
pub const STALL_MEAN_US: f64 = 1000.0;
/// The mean of a bulk flow's start lateness, µs.
pub const START_LATENESS_MEAN_US: f64 = 4_700.0;
/// Its standard deviation, µs.
pub const START_LATENESS_SD_US: f64 = 1_400.0;
/// Mixed into the run's seed, so these streams are independent of the path's.
const HOST_STREAM: u64 = 0x686f_7374; // "host"
const STALL_STREAM: u64 = 0x7374_616c; // "stal"
const START_STREAM: u64 = 0x7374_7274; // "strt"

/// One flow's hosts: the body of its receiver's turnaround and of its sender's reading of
/// acknowledgements.
#[derive(Debug, Clone)]
pub struct HostLatency {
    rng: Rng,
}

impl HostLatency {
    /// The hosts of flow `flow` (from 0) of a run seeded `seed`.
    pub fn new(seed: u64, flow: usize) -> HostLatency {
        let flow_seed = (flow as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        HostLatency { rng: Rng::new(seed ^ HOST_STREAM ^ flow_seed) }
    }

    /// The next wake-up latency (the body, without stalls), µs.
    pub fn next_us(&mut self) -> u64 {
        BASE_US + self.rng.exponential(MEAN_US).round() as u64
    }
}

/// The machine's stalls at crossing `crossing` (0: the receivers' turnaround, 1: the senders'
/// reading) of a run seeded `seed`.
pub fn machine_stalls(seed: u64, crossing: u64) -> Stalls {
    let config = StallConfig { per_s: STALLS_PER_S, mean_us: STALL_MEAN_US };
    Stalls::new(config, seed ^ STALL_STREAM ^ crossing.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// How late after its plan the hosts start flow `flow` (from 0) of a run seeded `seed`, µs.
pub fn start_lateness_us(seed: u64, flow: usize) -> u64 {
    let mut rng = Rng::new(seed ^ START_STREAM ^ (flow as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    rng.normal(START_LATENESS_MEAN_US, START_LATENESS_SD_US).max(0.0).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_have_the_measured_shape() {
        let mut host = HostLatency::new(1, 0);
        let mut v: Vec<u64> = (0..200_000).map(|_| host.next_us()).collect();
        v.sort_unstable();
        let at = |q: f64| v[(q * v.len() as f64) as usize];
        assert_eq!(v[0], BASE_US);
        // Median 15 + 25·ln 2 = 32, p95 15 + 25·ln 20 ≈ 90.
        assert!((31..=34).contains(&at(0.5)), "median {}", at(0.5));
        assert!((87..=93).contains(&at(0.95)), "p95 {}", at(0.95));
    }

    #[test]
    fn flows_and_seeds_draw_apart() {
        let draw = |seed, flow| {
            let mut host = HostLatency::new(seed, flow);
            (0..8).map(|_| host.next_us()).collect::<Vec<_>>()
        };
        assert_eq!(draw(3, 0), draw(3, 0));
        assert_ne!(draw(3, 0), draw(3, 1));
        assert_ne!(draw(3, 0), draw(4, 0));
        let stalls = |seed, crossing| {
            let mut stalls = machine_stalls(seed, crossing);
            (0..2000).map(|i| stalls.resume_us(i * 1000)).collect::<Vec<_>>()
        };
        assert_eq!(stalls(3, 0), stalls(3, 0));
        assert_ne!(stalls(3, 0), stalls(3, 1));
        assert_ne!(stalls(3, 0), stalls(4, 0));
    }

    #[test]
    fn latenesses_have_the_measured_shape() {
        let mut v: Vec<u64> = (0..20_000).map(|seed| start_lateness_us(seed, 0)).collect();
        v.sort_unstable();
        let at = |q: f64| v[(q * v.len() as f64) as usize];
        // Measured 3.6, 4.8 and 7.3 ms at the first quartile, the median and p95.
        assert!((3_650..=3_850).contains(&at(0.25)), "first quartile {}", at(0.25));
        assert!((4_600..=4_800).contains(&at(0.5)), "median {}", at(0.5));
        assert!((6_850..=7_150).contains(&at(0.95)), "p95 {}", at(0.95));
        assert_ne!(start_lateness_us(3, 0), start_lateness_us(3, 1));
    }
}
