//! The bottleneck: a queue drained by a delivery schedule, with Mahimahi's semantics (`mm-link`,
//! ATC 2015 §3.2). At each delivery opportunity the link may send 1500 bytes: it sends whole
//! queued packets while they fit, and a packet larger than what is left of the opportunity uses
//! that remainder and finishes at a later opportunity (so small ACKs share one opportunity and the
//! byte rate is exact). An opportunity that finds nothing to send is lost; bytes do not accrue
//! while the link is idle. A packet leaves at the time of the opportunity that sends its last
//! byte. An opportunity at time t serves packets that reached the queue at or before t (with
//! Mahimahi's timing, `timing.rs`: opportunities on whole ms, serving what arrived before t).
//!
//! With no schedule the link is unlimited: packets pass at the instant they arrive.

use std::fmt;

use crate::event::Event;
use crate::queue::{Discipline, PacketInfo, Queued};
use crate::schedule::{Schedule, OPPORTUNITY_BYTES};
use crate::timing::Timing;

#[derive(Debug)]
pub struct Link<P> {
    queue: Box<dyn Discipline<P>>,
    /// `None`: an unlimited link.
    schedule: Option<Schedule>,
    /// The packet being serialised across opportunities, and how many of its bytes are still to go.
    in_transit: Option<(Queued<P>, u32)>,
    /// Report arrivals and every opportunity (costs one event per opportunity, used or not).
    recording: bool,
    /// When opportunities happen and which arrivals they may carry.
    timing: Timing,
}

impl<P: Send + fmt::Debug + 'static> Link<P> {
    pub fn new(queue: Box<dyn Discipline<P>>, schedule: Option<Schedule>, recording: bool) -> Self {
        Link { queue, schedule, in_transit: None, recording, timing: Timing::default() }
    }

    pub fn with_timing(self, timing: Timing) -> Self {
        Link { timing, ..self }
    }

    fn is_busy(&self) -> bool {
        self.in_transit.is_some() || !self.queue.is_empty()
    }

    /// When the link next needs to be polled, if it has anything to send.
    pub fn next_wakeup_us(&self) -> Option<u64> {
        match &self.schedule {
            Some(s) if self.is_busy() => Some(self.timing.opportunity_us(s.next_us())),
            _ => None,
        }
    }

    /// A packet reaches the queue at `t_us`. Call `serve_before_arrival(t_us)` first.
    pub fn enqueue(&mut self, t_us: u64, packet: P, info: PacketInfo, emit: &mut impl FnMut(Event<P>)) {
        let size_bytes = info.size_bytes;
        if self.recording {
            emit(Event::LinkArrival { t_us, size_bytes });
        }
        if self.schedule.is_none() {
            emit(Event::Departure { t_us, packet, size_bytes, queued_at_us: t_us, marked: false });
            return;
        }
        self.queue.enqueue(t_us, Queued::new(packet, info, t_us), &mut |q, cause| {
            emit(Event::Drop { t_us, packet: q.packet, size_bytes: q.info.size_bytes, cause })
        });
    }

    /// Runs every opportunity that comes before a packet reaching the queue at `t_us`.
    pub fn serve_before_arrival(&mut self, t_us: u64, emit: &mut impl FnMut(Event<P>)) {
        self.serve(t_us, true, emit);
    }

    /// Runs every opportunity at or before `t_us`.
    pub fn serve_through(&mut self, t_us: u64, emit: &mut impl FnMut(Event<P>)) {
        self.serve(t_us, false, emit);
    }

    fn serve(&mut self, until_us: u64, before_arrival: bool, emit: &mut impl FnMut(Event<P>)) {
        let Some(schedule) = self.schedule.as_mut() else { return };
        loop {
            let t_us = self.timing.opportunity_us(schedule.next_us());
            let due = if before_arrival { self.timing.precedes_arrival(t_us, until_us) } else { t_us <= until_us };
            if !due {
                return;
            }
            let busy = self.in_transit.is_some() || !self.queue.is_empty();
            if !busy && !self.recording {
                // Nothing to send and nobody watching: jump over the idle opportunities.
                if before_arrival {
                    schedule.skip_to(self.timing.skip_bound_us(until_us));
                }
                return;
            }
            let mut room_bytes = OPPORTUNITY_BYTES;
            while room_bytes > 0 {
                if self.in_transit.is_none() {
                    let dropped = &mut |q: Queued<P>, cause| {
                        emit(Event::Drop { t_us, packet: q.packet, size_bytes: q.info.size_bytes, cause })
                    };
                    match self.queue.dequeue(t_us, dropped) {
                        Some(q) => {
                            let size = q.size_bytes();
                            self.in_transit = Some((q, size));
                        }
                        None => break,
                    }
                }
                let (_, left_bytes) = self.in_transit.as_mut().expect("just filled");
                let sent_bytes = room_bytes.min(*left_bytes);
                *left_bytes -= sent_bytes;
                room_bytes -= sent_bytes;
                if *left_bytes == 0 {
                    let (q, _) = self.in_transit.take().expect("just checked");
                    emit(Event::Departure {
                        t_us,
                        packet: q.packet,
                        size_bytes: q.info.size_bytes,
                        queued_at_us: q.arrival_us,
                        marked: q.marked,
                    });
                }
            }
            if self.recording {
                emit(Event::Opportunity { t_us });
            }
            schedule.advance();
        }
    }

    /// Packets waiting in the queue or part-way across the link.
    pub fn packets_held(&self) -> usize {
        self.queue.len_packets() + usize::from(self.in_transit.is_some())
    }

    pub fn queue_bytes(&self) -> u64 {
        self.queue.len_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::DropCause;
    use crate::queue::droptail::DropTail;
    use crate::queue::QueueLimit;
    use crate::schedule::{ConstantRate, TraceSchedule};
    use crate::timing::Timing;
    use crate::trace::Trace;

    type Out = Vec<Event<u32>>;

    fn departures(events: &Out) -> Vec<(u64, u32)> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Departure { t_us, packet, .. } => Some((*t_us, *packet)),
                _ => None,
            })
            .collect()
    }

    fn arrive(link: &mut Link<u32>, t_us: u64, id: u32, size: u32, out: &mut Out) {
        let mut emit = |e| out.push(e);
        link.serve_before_arrival(t_us, &mut emit);
        link.enqueue(t_us, id, PacketInfo::plain(size), &mut emit);
    }

    #[test]
    fn packets_wait_for_the_next_opportunity() {
        // 12 Mbit/s: opportunities at 1000, 2000, ... us.
        let mut link = Link::new(
            Box::new(DropTail::new(QueueLimit::Infinite)),
            Some(Schedule::Constant(ConstantRate::new(12.0))),
            false,
        );
        let mut out = Vec::new();
        arrive(&mut link, 10, 1, 1500, &mut out);
        arrive(&mut link, 20, 2, 1500, &mut out);
        assert_eq!(link.next_wakeup_us(), Some(1000));
        link.serve_through(5000, &mut |e| out.push(e));
        assert_eq!(departures(&out), vec![(1000, 1), (2000, 2)]);
        // Idle opportunities are lost: a packet at 5500 waits for 6000, not for a banked one.
        out.clear();
        arrive(&mut link, 5500, 3, 1500, &mut out);
        link.serve_through(10_000, &mut |e| out.push(e));
        assert_eq!(departures(&out), vec![(6000, 3)]);
    }

    #[test]
    fn an_opportunity_serves_a_packet_arriving_at_its_instant() {
        let mut link = Link::new(
            Box::new(DropTail::new(QueueLimit::Infinite)),
            Some(Schedule::Constant(ConstantRate::new(12.0))),
            false,
        );
        let mut out = Vec::new();
        arrive(&mut link, 3000, 1, 100, &mut out);
        link.serve_through(3000, &mut |e| out.push(e));
        assert_eq!(departures(&out), vec![(3000, 1)]);
    }

    #[test]
    fn mahimahi_timing_does_not_serve_an_arrival_at_the_opportunitys_instant() {
        // Mahimahi runs the opportunities of a packet's millisecond before it enqueues the packet.
        let mut link = Link::new(
            Box::new(DropTail::new(QueueLimit::Infinite)),
            Some(Schedule::Constant(ConstantRate::new(12.0))),
            false,
        )
        .with_timing(Timing::Mahimahi);
        let mut out = Vec::new();
        arrive(&mut link, 3000, 1, 100, &mut out);
        arrive(&mut link, 3999, 2, 100, &mut out);
        // After an idle spell the skipped opportunities are the same: 7000 comes before an arrival at 7000.
        arrive(&mut link, 7000, 3, 100, &mut out);
        link.serve_through(10_000, &mut |e| out.push(e));
        assert_eq!(departures(&out), vec![(4000, 1), (4000, 2), (8000, 3)]);
    }

    #[test]
    fn mahimahi_timing_puts_opportunities_on_whole_milliseconds() {
        // 100 Mbit/s: one opportunity every 120 us exactly; on Mahimahi's clock the 8 of (0, 1000]
        // happen at 1000, the 8 of (1000, 2000] at 2000, and the 9 of (2000, 3000] at 3000.
        let schedule = || Some(Schedule::Constant(ConstantRate::new(100.0)));
        let mut exact = Link::new(Box::new(DropTail::new(QueueLimit::Infinite)), schedule(), false);
        let mut ms =
            Link::new(Box::new(DropTail::new(QueueLimit::Infinite)), schedule(), false).with_timing(Timing::Mahimahi);
        let (mut out_exact, mut out_ms) = (Vec::new(), Vec::new());
        for id in 0..25 {
            arrive(&mut exact, 0, id, 1500, &mut out_exact);
            arrive(&mut ms, 0, id, 1500, &mut out_ms);
        }
        assert_eq!(ms.next_wakeup_us(), Some(1000));
        exact.serve_through(3000, &mut |e| out_exact.push(e));
        ms.serve_through(3000, &mut |e| out_ms.push(e));
        assert_eq!(departures(&out_exact)[..3], [(120, 0), (240, 1), (360, 2)]);
        let per_ms: Vec<usize> =
            [1000, 2000, 3000].iter().map(|&t| departures(&out_ms).iter().filter(|d| d.0 == t).count()).collect();
        assert_eq!(per_ms, vec![8, 8, 9]);
    }

    #[test]
    fn small_packets_share_an_opportunity_and_big_ones_carry_over() {
        let mut link = Link::new(
            Box::new(DropTail::new(QueueLimit::Infinite)),
            Some(Schedule::Constant(ConstantRate::new(12.0))),
            false,
        );
        let mut out = Vec::new();
        // 40-byte ACKs: 37 fit in 1500 bytes (1480), the 38th spills into the next opportunity.
        for id in 0..38 {
            arrive(&mut link, 0, id, 40, &mut out);
        }
        // A 1500-byte packet then takes 1480 bytes of opportunity 2 and 20 bytes of opportunity 3.
        arrive(&mut link, 0, 99, 1500, &mut out);
        link.serve_through(3000, &mut |e| out.push(e));
        let d = departures(&out);
        assert!(d[..37].iter().all(|&(t, _)| t == 1000));
        assert_eq!(d[37], (2000, 37));
        assert_eq!(d[38], (3000, 99));
    }

    #[test]
    fn droptail_in_packets_drops_exactly_at_the_limit() {
        let mut link = Link::new(
            Box::new(DropTail::new(QueueLimit::Packets(1))),
            Some(Schedule::Constant(ConstantRate::new(12.0))),
            false,
        );
        let mut out = Vec::new();
        // One packet waits, the next is dropped. At 1000 the first leaves, so at 1001 there is
        // room for exactly one more.
        arrive(&mut link, 0, 1, 1500, &mut out);
        arrive(&mut link, 0, 2, 1500, &mut out);
        arrive(&mut link, 1001, 3, 1500, &mut out);
        arrive(&mut link, 1001, 4, 1500, &mut out);
        link.serve_through(10_000, &mut |e| out.push(e));
        let drops: Vec<u32> = out
            .iter()
            .filter_map(|e| match e {
                Event::Drop { packet, cause: DropCause::Queue, .. } => Some(*packet),
                _ => None,
            })
            .collect();
        assert_eq!(drops, vec![2, 4]);
        assert_eq!(departures(&out), vec![(1000, 1), (2000, 3)]);
    }

    #[test]
    fn trace_bursts_release_many_packets_at_once() {
        // ACK aggregation: ten opportunities every 200 ms.
        let text = "200\n".repeat(10);
        let trace = Trace::parse(&text).unwrap();
        let mut link = Link::new(
            Box::new(DropTail::new(QueueLimit::Infinite)),
            Some(Schedule::Trace(TraceSchedule::new(trace))),
            false,
        );
        let mut out = Vec::new();
        for id in 0..15 {
            arrive(&mut link, 1000 + u64::from(id), id, 1500, &mut out);
        }
        link.serve_through(1_000_000, &mut |e| out.push(e));
        let d = departures(&out);
        assert!(d[..10].iter().all(|&(t, _)| t == 200_000));
        assert!(d[10..].iter().all(|&(t, _)| t == 400_000));
    }

    #[test]
    fn recording_reports_every_opportunity_including_idle_ones() {
        let mut link: Link<u32> = Link::new(
            Box::new(DropTail::new(QueueLimit::Infinite)),
            Some(Schedule::Constant(ConstantRate::new(12.0))),
            true,
        );
        let mut out = Vec::new();
        link.serve_through(3500, &mut |e| out.push(e));
        assert_eq!(
            out,
            vec![
                Event::Opportunity { t_us: 1000 },
                Event::Opportunity { t_us: 2000 },
                Event::Opportunity { t_us: 3000 }
            ]
        );
    }

    #[test]
    fn unlimited_link_passes_packets_at_once() {
        let mut link = Link::new(Box::new(DropTail::new(QueueLimit::Infinite)), None, false);
        let mut out = Vec::new();
        arrive(&mut link, 42, 7, 1500, &mut out);
        assert_eq!(departures(&out), vec![(42, 7)]);
        assert_eq!(link.next_wakeup_us(), None);
    }
}
