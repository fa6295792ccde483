//! One direction of an emulated path, composed from the elements in the order of the design:
//! propagation delay → random loss → token-bucket policer → bottleneck queue and link.
//! (Pantheon's calibrated emulators, paper §4, use delay, loss, queue and rate; the policer is one
//! of its pathological paths.) Everything downstream of the delay sees a packet at the instant it
//! leaves the delay line, so loss, policing and queueing act at that time.
//!
//! The path is pure: the driver pushes packets with their arrival time and polls with the current
//! time; the path answers with events stamped with the exact model time at which they happen. How
//! late the driver polls never changes those times.

use crate::config::{Delivery, PathConfig};
use crate::delay::Delay;
use crate::event::{DropCause, Event};
use crate::link::Link;
use crate::loss::Loss;
use crate::policer::Policer;
use crate::queue::PacketInfo;
use crate::schedule::{ConstantRate, PoissonSchedule, Schedule, TraceSchedule};
use crate::timing::Timing;

/// Seeds of a path's random parts are derived from one run seed, so that loss and Poisson
/// delivery draw from independent streams.
const LOSS_STREAM: u64 = 0x6c6f_7373; // "loss"
const DELIVERY_STREAM: u64 = 0x706f_6973; // "pois"
const AQM_STREAM: u64 = 0x0061_716d; // "aqm"

#[derive(Debug)]
pub struct Path<P> {
    delay: Delay<(P, PacketInfo)>,
    loss: Option<Loss>,
    policer: Option<Policer>,
    link: Link<P>,
    timing: Timing,
}

impl<P: Send + std::fmt::Debug + 'static> Path<P> {
    /// Builds a path; `recording` makes it report link arrivals and every delivery opportunity.
    pub fn new(config: &PathConfig, seed: u64, recording: bool) -> Self {
        let schedule = match &config.delivery {
            Delivery::Unlimited => None,
            Delivery::Constant { rate_mbps } => Some(Schedule::Constant(ConstantRate::new(*rate_mbps))),
            Delivery::Trace(trace) => Some(Schedule::Trace(TraceSchedule::new(trace.clone()))),
            Delivery::Poisson { rate_mbps } => {
                Some(Schedule::Poisson(PoissonSchedule::new(*rate_mbps, seed ^ DELIVERY_STREAM)))
            }
        };
        Path {
            delay: Delay::new(config.delay_us),
            loss: (config.loss_probability > 0.0).then(|| Loss::new(config.loss_probability, seed ^ LOSS_STREAM)),
            policer: config.policer.map(|p| Policer::new(p.rate_mbps, p.burst_bytes)),
            link: Link::new(config.aqm.build(config.queue, seed ^ AQM_STREAM), schedule, recording)
                .with_timing(config.timing),
            timing: config.timing,
        }
    }

    /// A packet enters the path at `now_us`. Pushes must come in non-decreasing time order.
    pub fn push(&mut self, now_us: u64, packet: P, info: PacketInfo) {
        self.delay.push(self.timing.stamp_us(now_us), (packet, info));
    }

    /// The earliest time at which `poll` has something to do.
    pub fn next_wakeup_us(&self) -> Option<u64> {
        match (self.delay.next_release_us(), self.link.next_wakeup_us()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs the path up to and including `now_us`, emitting events in time order.
    pub fn poll(&mut self, now_us: u64, emit: &mut impl FnMut(Event<P>)) {
        while let Some((t_us, (packet, info))) = self.delay.pop_due(now_us) {
            self.link.serve_before_arrival(t_us, emit);
            let size_bytes = info.size_bytes;
            if self.loss.as_mut().is_some_and(Loss::drops_next) {
                emit(Event::Drop { t_us, packet, size_bytes, cause: DropCause::Loss });
            } else if self.policer.as_mut().is_some_and(|p| !p.admits(t_us, size_bytes)) {
                emit(Event::Drop { t_us, packet, size_bytes, cause: DropCause::Policer });
            } else {
                self.link.enqueue(t_us, packet, info, emit);
            }
        }
        self.link.serve_through(now_us, emit);
    }

    /// Packets in the delay line, waiting in the queue, or part-way across the link.
    pub fn packets_inside(&self) -> usize {
        self.delay.len() + self.link.packets_held()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PolicerConfig;
    use crate::queue::{Aqm, QueueLimit};

    fn run(config: &PathConfig, arrivals: &[(u64, u32, u32)], until_us: u64) -> Vec<Event<u32>> {
        let mut path = Path::new(config, 1, false);
        let mut out = Vec::new();
        for &(t, id, size) in arrivals {
            path.poll(t, &mut |e| out.push(e));
            path.push(t, id, PacketInfo::plain(size));
        }
        path.poll(until_us, &mut |e| out.push(e));
        out
    }

    fn base() -> PathConfig {
        PathConfig {
            delay_us: 20_000,
            loss_probability: 0.0,
            queue: QueueLimit::Infinite,
            aqm: Aqm::DropTail,
            delivery: Delivery::Constant { rate_mbps: 12.0 },
            policer: None,
            timing: Timing::Microseconds,
        }
    }

    #[test]
    fn delay_then_link_gives_exact_departures() {
        // Arrivals at 0 and 10 us reach the link at 20000 and 20010; 12 Mbit/s serves them at the
        // opportunities at 20000 and 21000.
        let out = run(&base(), &[(0, 1, 1500), (10, 2, 1500)], 100_000);
        assert_eq!(
            out,
            vec![
                Event::Departure { t_us: 20_000, packet: 1, size_bytes: 1500, queued_at_us: 20_000, marked: false },
                Event::Departure { t_us: 21_000, packet: 2, size_bytes: 1500, queued_at_us: 20_010, marked: false },
            ]
        );
    }

    #[test]
    fn fractional_delay_with_unlimited_link() {
        let config = PathConfig { delay_us: 2_500, delivery: Delivery::Unlimited, ..base() };
        let out = run(&config, &[(7, 1, 100)], 10_000);
        assert_eq!(
            out,
            vec![Event::Departure { t_us: 2_507, packet: 1, size_bytes: 100, queued_at_us: 2_507, marked: false }]
        );
    }

    #[test]
    fn poll_timing_does_not_change_departures() {
        let arrivals: Vec<(u64, u32, u32)> = (0..200).map(|i| (i * 300, i as u32, 1500)).collect();
        for timing in [Timing::Microseconds, Timing::Mahimahi] {
            let config = PathConfig { timing, ..base() };
            let late = run(&config, &arrivals, 1_000_000);
            // Poll every microsecond instead of only at arrivals.
            let mut path = Path::new(&config, 1, false);
            let mut eager = Vec::new();
            let mut next = arrivals.iter().peekable();
            for t in 0..=1_000_000u64 {
                path.poll(t, &mut |e| eager.push(e));
                while let Some(&&(ta, id, size)) = next.peek() {
                    if ta != t {
                        break;
                    }
                    path.push(ta, id, PacketInfo::plain(size));
                    next.next();
                }
            }
            assert_eq!(late, eager, "{timing:?}");
        }
    }

    #[test]
    fn mahimahi_timing_truncates_the_delay_and_waits_a_millisecond_at_the_link() {
        // mm-delay holds a packet from the start of the ms it arrived in; mm-link then serves it at
        // the first opportunity after the ms it reached the queue in.
        let departures = |timing, delivery| {
            let config = PathConfig { timing, delivery, ..base() };
            run(&config, &[(0, 1, 1500), (2_700, 2, 1500)], 100_000)
                .into_iter()
                .filter_map(|e| match e {
                    Event::Departure { t_us, packet, .. } => Some((t_us, packet)),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let rate = Delivery::Constant { rate_mbps: 12.0 };
        assert_eq!(departures(Timing::Microseconds, rate.clone()), vec![(20_000, 1), (23_000, 2)]);
        assert_eq!(departures(Timing::Mahimahi, rate), vec![(21_000, 1), (23_000, 2)]);
        assert_eq!(departures(Timing::Microseconds, Delivery::Unlimited), vec![(20_000, 1), (22_700, 2)]);
        assert_eq!(departures(Timing::Mahimahi, Delivery::Unlimited), vec![(20_000, 1), (22_000, 2)]);
    }

    #[test]
    fn mahimahi_timing_delivers_poisson_opportunities_on_whole_milliseconds() {
        let config = PathConfig { timing: Timing::Mahimahi, delivery: Delivery::Poisson { rate_mbps: 30.0 }, ..base() };
        let arrivals: Vec<(u64, u32, u32)> = (0..500).map(|i| (i * 137, i as u32, 1500)).collect();
        let out = run(&config, &arrivals, 1_000_000);
        let times: Vec<u64> = out
            .iter()
            .filter_map(|e| match e {
                Event::Departure { t_us, .. } => Some(*t_us),
                _ => None,
            })
            .collect();
        assert_eq!(times.len(), 500);
        assert!(times.iter().all(|t| t % 1000 == 0));
    }

    #[test]
    fn policer_drops_what_exceeds_the_bucket() {
        let config = PathConfig {
            delay_us: 0,
            delivery: Delivery::Unlimited,
            policer: Some(PolicerConfig { rate_mbps: 12.0, burst_bytes: 3000 }),
            ..base()
        };
        let arrivals: Vec<(u64, u32, u32)> = (0..4).map(|i| (0, i, 1500)).collect();
        let out = run(&config, &arrivals, 10);
        let dropped: Vec<u32> = out
            .iter()
            .filter_map(|e| match e {
                Event::Drop { packet, cause: DropCause::Policer, .. } => Some(*packet),
                _ => None,
            })
            .collect();
        assert_eq!(dropped, vec![2, 3]);
    }

    #[test]
    fn seeded_loss_is_reproducible() {
        let config = PathConfig { loss_probability: 0.3, ..base() };
        let arrivals: Vec<(u64, u32, u32)> = (0..1000).map(|i| (i * 1000, i as u32, 1500)).collect();
        assert_eq!(run(&config, &arrivals, 2_000_000), run(&config, &arrivals, 2_000_000));
    }

    #[test]
    fn tiny_buffer_holds_one_packet() {
        let config = PathConfig { delay_us: 0, queue: QueueLimit::Packets(1), ..base() };
        let arrivals: Vec<(u64, u32, u32)> = (0..5).map(|i| (100, i, 1500)).collect();
        let out = run(&config, &arrivals, 10_000);
        let departed = out.iter().filter(|e| matches!(e, Event::Departure { .. })).count();
        let dropped = out.iter().filter(|e| matches!(e, Event::Drop { .. })).count();
        assert_eq!((departed, dropped), (1, 4));
    }
}
