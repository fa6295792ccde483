//! The link's clock against the run's: where in its delivery schedule the path stands when the
//! run's first flow starts.
//!
//! pantheon-emu's link counts time from its own start, put on a whole millisecond of the epoch
//! (crates/emu/src/main.rs), and its constant-rate schedule delivers at ⌊k · 12 000 bits / rate⌋
//! µs of that clock (pantheon_link's schedule.rs); the harness starts the flows a while later, at
//! whatever microsecond the tunnels and the sender happen to be ready. So the first datagram meets
//! the schedule at an arbitrary phase. A simulated run whose flow started at the link's own zero
//! sent its first datagram at an instant of the schedule: with a one-way delay a whole number of
//! opportunity periods (20 ms at 12 Mbit/s, a 1 ms period) it met an opportunity with no wait at
//! all, and its RTT (41.02 ms) was one the flow could never see again: every later datagram
//! leaves on an acknowledgement, itself released at an opportunity, so reaches the link just after
//! one and waits nearly a period (42.00 ms, seed after seed). Every queueing delay the flow
//! measured (RTT − min RTT) then read ~1 ms high (the emulator's min RTT, 41.1–41.4 ms over 11
//! runs, comes from lucky phases of its jitter), which was enough to turn Indigo's start-up on that
//! path to a window of 25 packets held for good (6.9 Mbit/s against the emulator's 11.2; issue 38
//! §2, docs/indigo.md).
//!
//! Model: the link's clock runs `phase_us` ahead of the run's, drawn per run from its seed, or
//! given (`pantheon-sim run --link-phase-us`: 0 for a replay of an emulated run, whose flow start
//! is read off the link's own log). The draw is the emulator's lead: pantheon-emu starts the
//! link's clock, and the harness starts the flows when the emulator, the tunnels and the
//! receiver are up and its one-second head start is over. Over the fidelity matrix's 100 emulated
//! runs (issue 38 §1) the first data datagram reached the link 1.122–1.523 s after the link's
//! start: median 1.185 s, p10 1.146, p90 1.292 (the tail is a busy machine's). Drawn uniform over
//! [EMULATOR_LEAD_MIN_US, + EMULATOR_LEAD_SPAN_US): median 1.185 s, and the phase within any
//! opportunity period of up to 110 ms is uniform, as the emulator's arbitrary microsecond makes it.
//! Until issue 38 §3 the draw spanned one millisecond: a constant-rate path saw the same, but a
//! trace was met at its start in the simulator and 1.2 s into it in the emulator, so every trace
//! preset differed between the two drivers (docs/calibration.md, "The trace's phase"). Both
//! directions share the phase, as the emulator's two links share its clock. What the path reports
//! comes back on the run's clock; delivery opportunities before the run began are not reported.
//!
//! Left out: the emulator's first datagrams are slow (first RTTs 41.3–48.1 ms on that path, 11
//! runs, against a floor of 41.0), so there the min RTT never comes from the first one; here a
//! phase that puts the first datagram within ~170 µs of an opportunity still gives the clean min
//! RTT (Indigo on that path: 28 of 200 seeds at 6.9 Mbit/s, the mean 10.62).

use pantheon_link::rng::Rng;
use pantheon_link::{Event, PacketInfo, Path};

/// The least lead of the emulator's link over the flows, µs (module header).
pub const EMULATOR_LEAD_MIN_US: u64 = 1_130_000;
/// The span of the lead's draw, µs; calibrate/trace.py aligns inferred traces to the lead's
/// median, EMULATOR_LEAD_MIN_US + EMULATOR_LEAD_SPAN_US / 2.
pub const EMULATOR_LEAD_SPAN_US: u64 = 110_000;
/// Mixed into the run's seed, so this draw is independent of the path's and the hosts' streams.
const PHASE_STREAM: u64 = 0x7068_6173; // "phas"

/// How far the link's clock runs ahead of the run's in a run seeded `seed`, µs.
pub fn link_phase_us(seed: u64) -> u64 {
    EMULATOR_LEAD_MIN_US + Rng::new(seed ^ PHASE_STREAM).next_u64() % EMULATOR_LEAD_SPAN_US
}

/// A path driven on the run's clock whose schedule runs on a clock `phase_us` ahead.
#[derive(Debug)]
pub struct PhasedPath<P> {
    path: Path<P>,
    phase_us: u64,
}

impl<P: Send + std::fmt::Debug + 'static> PhasedPath<P> {
    pub fn new(path: Path<P>, phase_us: u64) -> Self {
        PhasedPath { path, phase_us }
    }

    /// A packet enters the path at `now_us` (run's clock).
    pub fn push(&mut self, now_us: u64, packet: P, info: PacketInfo) {
        self.path.push(now_us + self.phase_us, packet, info);
    }

    /// The earliest run time at which `poll` has something to do.
    pub fn next_wakeup_us(&self) -> Option<u64> {
        self.path.next_wakeup_us().map(|t_us| t_us.saturating_sub(self.phase_us))
    }

    /// Runs the path up to and including `now_us` (run's clock), emitting its events on the run's
    /// clock; those before the run began (delivery opportunities) are left out.
    pub fn poll(&mut self, now_us: u64, emit: &mut impl FnMut(Event<P>)) {
        let phase_us = self.phase_us;
        self.path.poll(now_us + phase_us, &mut |event| {
            if let Some(event) = on_run_clock(event, phase_us) {
                emit(event);
            }
        });
    }

    pub fn packets_inside(&self) -> usize {
        self.path.packets_inside()
    }
}

fn on_run_clock<P>(event: Event<P>, phase_us: u64) -> Option<Event<P>> {
    let back = |t_us: u64| t_us.checked_sub(phase_us);
    Some(match event {
        Event::Departure { t_us, packet, size_bytes, queued_at_us, marked } => {
            Event::Departure { t_us: back(t_us)?, packet, size_bytes, queued_at_us: back(queued_at_us)?, marked }
        }
        Event::Drop { t_us, packet, size_bytes, cause } => Event::Drop { t_us: back(t_us)?, packet, size_bytes, cause },
        Event::LinkArrival { t_us, size_bytes } => Event::LinkArrival { t_us: back(t_us)?, size_bytes },
        Event::Opportunity { t_us } => Event::Opportunity { t_us: back(t_us)? },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pantheon_link::{Aqm, Delivery, PathConfig, QueueLimit, Timing};

    /// 12 Mbit/s (an opportunity every 1000 µs of the link's clock), 20 ms one way.
    fn path_12_mbps_20_ms() -> Path<u32> {
        let config = PathConfig {
            delay_us: 20_000,
            loss_probability: 0.0,
            queue: QueueLimit::Infinite,
            aqm: Aqm::DropTail,
            delivery: Delivery::Constant { rate_mbps: 12.0 },
            policer: None,
            timing: Timing::Microseconds,
        };
        Path::new(&config, 1, false)
    }

    fn departure_us(phase_us: u64, sent_us: u64) -> u64 {
        let mut path = PhasedPath::new(path_12_mbps_20_ms(), phase_us);
        path.push(sent_us, 7, PacketInfo::plain(1500));
        let mut out = None;
        while out.is_none() {
            let t_us = path.next_wakeup_us().expect("a packet inside");
            path.poll(t_us, &mut |e| {
                if let Event::Departure { t_us, .. } = e {
                    out = Some(t_us);
                }
            });
        }
        out.expect("departed")
    }

    #[test]
    fn a_datagram_waits_for_the_next_opportunity_of_the_link_clock() {
        // In phase: sent at 0, it leaves the delay line at 20 000, an opportunity: no wait.
        assert_eq!(departure_us(0, 0), 20_000);
        // 300 µs ahead: it leaves the delay line at 20 300 on the link's clock, waits for 21 000,
        // which is 20 700 on the run's.
        assert_eq!(departure_us(300, 0), 20_700);
        // Sent 15 µs after an opportunity (the first data after an acknowledgement read): nearly
        // a whole period's wait in phase, 285 µs with the link 300 µs ahead.
        assert_eq!(departure_us(0, 15), 21_000);
        assert_eq!(departure_us(300, 15), 20_700);
    }

    #[test]
    fn the_phase_is_the_emulators_lead_drawn_from_the_seed() {
        assert_eq!(link_phase_us(3), link_phase_us(3));
        let phases: Vec<u64> = (0..1000).map(link_phase_us).collect();
        let lead = EMULATOR_LEAD_MIN_US..EMULATOR_LEAD_MIN_US + EMULATOR_LEAD_SPAN_US;
        assert!(phases.iter().all(|p| lead.contains(p)));
        let mean_s = phases.iter().sum::<u64>() as f64 / phases.len() as f64 / 1e6;
        assert!((1.18..1.19).contains(&mean_s), "mean lead {mean_s} s");
        // Within a 1 ms opportunity period (12 Mbit/s) the phase is still spread over the period.
        let within = phases.iter().map(|p| p % 1000).sum::<u64>() as f64 / phases.len() as f64;
        assert!((450.0..550.0).contains(&within), "mean phase within a period {within} µs");
    }
}
