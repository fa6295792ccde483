//! CoDel, Controlled Delay (RFC 8289): an AQM that judges a queue by how long its packets wait
//! rather than by how many there are. The wait, the sojourn time, is measured when a packet leaves
//! the head of the queue. A queue is bad when even its best packets wait: when the sojourn time has
//! stayed at or above `target` for a whole `interval` (§3.1–§3.2: the minimum over an interval is
//! the standing queue; a burst that drains within an interval is good queue). CoDel then enters its
//! dropping state: it drops (or marks CE) the packet at the head, and the next ones at gaps that
//! shrink as interval/√count (§3.3, the control law: the drop rate grows linearly in time, so a
//! Reno-like sender, whose rate goes as 1/√p, is pushed down steadily) until the sojourn time falls
//! below target. Re-entering the dropping state soon after leaving it resumes near the drop rate
//! that last controlled the queue instead of starting again at one drop per interval.
//!
//! Implemented, in model time (`t_us`), from §5's pseudocode:
//! - §5.4 enqueue: a packet that would take the queue past its limit is dropped on arrival
//!   (`DropCause::Queue`); every other packet waits, stamped with `arrival_us`.
//! - §5.6 `dodequeue`: take the head; sojourn = t_us − arrival_us. It counts as below target when
//!   sojourn < target or when what is left in the queue is at most one MTU, 1500 bytes (§5.3's
//!   `maxpacket`, which "SHOULD use interface MTU"; §4.1: a queue that cannot keep the link busy
//!   is never shortened). Going above starts the clock: `first_above_us` = t + interval, and from
//!   then on a dequeue finds it is "ok to drop".
//! - §5.5 `dequeue`, dropping state: at every dequeue at or after `drop_next_us`, drop the packet,
//!   count += 1, take the next one, and schedule the next drop at drop_next + interval/√count
//!   (counted from the scheduled time, not from when the dequeue happened); loop while the next is
//!   already due. A dequeue that finds it is no longer ok to drop leaves the dropping state.
//! - §5.5 entering the dropping state: drop the head, take the next, and set count from the last
//!   episode: delta = count − lastcount (the drops of the last episode beyond its first); count =
//!   delta if delta > 1 and the last scheduled drop was less than 16 intervals ago, else 1; then
//!   drop_next = now + interval/√count and lastcount = count.
//! - ECN (`ecn=1`): where CoDel would drop an ECN-capable packet it marks it CE and sends it
//!   instead (RFC 3168 §5), as Linux's codel does with `ecn`. A mark counts for the control law as
//!   a drop does; in the dropping state a mark ends the dequeue (the marked packet is the one
//!   sent), where a drop goes on to the next packet. Not-ECT packets, and every packet with
//!   `ecn=0`, are dropped (`DropCause::Aqm`).
//! - `ce_threshold` (Linux's, tc-codel(8) and RFC 8290 §5.2, for DCTCP- and L4S-style senders):
//!   whatever the state, and even with `ecn=0`, an ECN-capable packet leaving with a sojourn above
//!   it is marked CE. Off by default.
//!
//! Parameters (`--uplink-queue-args`, times in ms): `target=5` and `interval=100` (§4.3, §4.2),
//! `ecn=1`, `ce_threshold` unset; limit `packets=1000` when none is given (Linux's, tc-codel(8)).
//!
//! Deviations:
//! - The control law is computed exactly, interval/√count in f64 rounded to the nearest µs
//!   (100 ms/√2 = 70 711 µs), where Linux keeps 1/√count in fixed point with one Newton step per
//!   change of count (the integer method §5.6 mentions); one square root per drop costs nothing
//!   here.
//! - `ecn` defaults to 1 here, as in Linux's fq_codel; Linux's codel qdisc defaults to `noecn`.
//!   With both on, a run with ECN-capable senders sees marks under either discipline.
//! - §5.5's test "now − drop_next < 16·interval" is taken as true when drop_next is still ahead
//!   (the difference is negative), as Linux's signed time comparison has it; the pseudocode leaves
//!   the sign of the difference open.
//! - The MTU is fixed at 1500 bytes, the link's (Mahimahi's) packet opportunity, where Linux takes
//!   the device's.
//!
//! `CoDelQueue` is the mechanism, one FIFO under CoDel's control; `CoDel` is one such queue under a
//! limit, and FQ-CoDel (fq_codel.rs) keeps one per flow.

use std::fmt;

use super::fifo::Fifo;
use super::{Discipline, Dropper, QueueArgs, QueueLimit, Queued};
use crate::event::DropCause;

/// The limit when the command line gives none: Linux's, tc-codel(8).
pub const DEFAULT_LIMIT: QueueLimit = QueueLimit::Packets(1000);

/// RFC 8289 §5.3's `maxpacket`: a queue holding at most this many bytes behind the packet leaving
/// is never above target. The link's MTU (its opportunity size).
const MTU_BYTES: u64 = 1500;

/// §5.5: a dropping episode that starts within this many intervals of the last scheduled drop
/// resumes at that episode's drop rate.
const REENTRY_INTERVALS: u64 = 16;

#[derive(Debug, Clone, PartialEq)]
pub struct CoDelParams {
    /// Acceptable standing queue delay, in µs: the sojourn time CoDel lets stand (RFC 8289 §4.3,
    /// 5 ms, 5–10 % of a typical interval).
    pub target_us: u64,
    /// How long the sojourn time must stay above target before CoDel acts, and the base of the
    /// control law's gaps, in µs (§4.2, 100 ms: a round trip on most Internet paths).
    pub interval_us: u64,
    /// Mark ECN-capable packets CE instead of dropping them.
    pub ecn: bool,
    /// Mark every ECN-capable packet leaving with a sojourn above this, in µs (Linux's
    /// `ce_threshold`); `None`: off.
    pub ce_threshold_us: Option<u64>,
}

impl Default for CoDelParams {
    fn default() -> Self {
        CoDelParams { target_us: 5_000, interval_us: 100_000, ecn: true, ce_threshold_us: None }
    }
}

impl CoDelParams {
    /// `target`, `interval` and `ce_threshold` in ms, `ecn` 1 or 0; defaults for those absent.
    pub fn from_args(args: &mut QueueArgs) -> Result<Self, String> {
        let d = CoDelParams::default();
        let target_us = args.ms_as_us("target", d.target_us, 1)?;
        let interval_us = args.ms_as_us("interval", d.interval_us, 1)?;
        let ecn = args.flag("ecn", d.ecn)?;
        // Absent reads as u64::MAX, which no given value reaches (an hour at most).
        let ce_threshold_us = Some(args.ms_as_us("ce_threshold", u64::MAX, 0)?).filter(|&us| us != u64::MAX);
        Ok(CoDelParams { target_us, interval_us, ecn, ce_threshold_us })
    }
}

/// Whole µs as ms, as a command line gives them (`2500` → `2.5`).
fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl fmt::Display for CoDelParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "target={},interval={},ecn={}", ms(self.target_us), ms(self.interval_us), u8::from(self.ecn))?;
        if let Some(us) = self.ce_threshold_us {
            write!(f, ",ce_threshold={}", ms(us))?;
        }
        Ok(())
    }
}

/// One FIFO under CoDel's control (RFC 8289 §5.2's per-queue state with its packets): the whole
/// of `CoDel`, and each flow queue of FQ-CoDel.
#[derive(Debug)]
pub(crate) struct CoDelQueue<P> {
    fifo: Fifo<P>,
    /// When the sojourn time, above target since it last went above, will have been above for an
    /// interval (µs); `None` while below target.
    first_above_us: Option<u64>,
    /// In the dropping state: drops (or marks) are due at `drop_next_us`.
    dropping: bool,
    /// When the next drop is due in the dropping state (µs).
    drop_next_us: u64,
    /// Drops and marks since the dropping state was entered, plus what it was entered with (the
    /// control law's count).
    count: u64,
    /// `count` when the dropping state was last entered.
    lastcount: u64,
}

impl<P> Default for CoDelQueue<P> {
    fn default() -> Self {
        CoDelQueue {
            fifo: Fifo::default(),
            first_above_us: None,
            dropping: false,
            drop_next_us: 0,
            count: 0,
            lastcount: 0,
        }
    }
}

/// §5.6's control law: when the drop after one scheduled at `t_us` is due, the `count`th of the
/// episode.
fn control_law(t_us: u64, interval_us: u64, count: u64) -> u64 {
    t_us + (interval_us as f64 / (count as f64).sqrt()).round() as u64
}

impl<P> CoDelQueue<P> {
    pub fn push_back(&mut self, item: Queued<P>) {
        self.fifo.push_back(item);
    }

    /// Takes the head without CoDel's say (FQ-CoDel's overflow drop).
    pub fn pop_front(&mut self) -> Option<Queued<P>> {
        self.fifo.pop_front()
    }

    pub fn len_packets(&self) -> usize {
        self.fifo.len_packets()
    }

    pub fn len_bytes(&self) -> u64 {
        self.fifo.len_bytes()
    }

    /// §5.6's `dodequeue`: the head, and whether the sojourn time has been above target for an
    /// interval.
    fn take_head(&mut self, t_us: u64, params: &CoDelParams) -> (Option<Queued<P>>, bool) {
        let Some(item) = self.fifo.pop_front() else {
            self.first_above_us = None;
            return (None, false);
        };
        let sojourn_us = t_us.saturating_sub(item.arrival_us);
        if sojourn_us < params.target_us || self.fifo.len_bytes() <= MTU_BYTES {
            self.first_above_us = None;
            return (Some(item), false);
        }
        let ok_to_drop = match self.first_above_us {
            None => {
                self.first_above_us = Some(t_us + params.interval_us);
                false
            }
            Some(above_us) => t_us >= above_us,
        };
        (Some(item), ok_to_drop)
    }

    /// §5.5's `dequeue`: the packet to send at `t_us`, after the drops CoDel makes on the way.
    pub fn dequeue(&mut self, t_us: u64, params: &CoDelParams, drop: &mut Dropper<'_, P>) -> Option<Queued<P>> {
        let (head, ok_to_drop) = self.take_head(t_us, params);
        let Some(mut item) = head else {
            self.dropping = false;
            return None;
        };
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
            }
            while self.dropping && t_us >= self.drop_next_us {
                self.count += 1;
                if params.ecn && item.mark_ce() {
                    self.drop_next_us = control_law(self.drop_next_us, params.interval_us, self.count);
                    break;
                }
                drop(item, DropCause::Aqm);
                let (next, ok_to_drop) = self.take_head(t_us, params);
                let Some(next) = next else {
                    self.dropping = false;
                    return None;
                };
                item = next;
                if ok_to_drop {
                    self.drop_next_us = control_law(self.drop_next_us, params.interval_us, self.count);
                } else {
                    self.dropping = false;
                }
            }
        } else if ok_to_drop {
            let sent = if params.ecn && item.mark_ce() {
                Some(item)
            } else {
                drop(item, DropCause::Aqm);
                self.take_head(t_us, params).0
            };
            self.dropping = true;
            let delta = self.count - self.lastcount;
            let recent = t_us.saturating_sub(self.drop_next_us) < REENTRY_INTERVALS * params.interval_us;
            self.count = if delta > 1 && recent { delta } else { 1 };
            self.drop_next_us = control_law(t_us, params.interval_us, self.count);
            self.lastcount = self.count;
            item = sent?;
        }
        if let Some(threshold_us) = params.ce_threshold_us {
            if t_us.saturating_sub(item.arrival_us) > threshold_us {
                item.mark_ce();
            }
        }
        Some(item)
    }
}

/// CoDel over one FIFO of at most `limit`.
#[derive(Debug)]
pub struct CoDel<P> {
    limit: QueueLimit,
    params: CoDelParams,
    queue: CoDelQueue<P>,
}

impl<P> CoDel<P> {
    pub fn new(limit: QueueLimit, params: CoDelParams) -> Self {
        CoDel { limit, params, queue: CoDelQueue::default() }
    }
}

impl<P: Send + fmt::Debug> Discipline<P> for CoDel<P> {
    fn enqueue(&mut self, _t_us: u64, item: Queued<P>, drop: &mut Dropper<'_, P>) {
        if self.limit.admits(self.queue.len_packets(), self.queue.len_bytes(), item.size_bytes()) {
            self.queue.push_back(item);
        } else {
            drop(item, DropCause::Queue);
        }
    }

    fn dequeue(&mut self, t_us: u64, drop: &mut Dropper<'_, P>) -> Option<Queued<P>> {
        self.queue.dequeue(t_us, &self.params, drop)
    }

    fn len_packets(&self) -> usize {
        self.queue.len_packets()
    }

    fn len_bytes(&self) -> u64 {
        self.queue.len_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ecn::Ecn;
    use crate::queue::testing::{dequeue, enqueue, packet};
    use crate::queue::Aqm;

    const MS: u64 = 1000;

    /// `n` full-size packets of codepoint `ecn`, ids from `first_id`, all arriving at `t_ms`.
    fn fill(q: &mut CoDel<u32>, first_id: u32, n: u32, ecn: Ecn, t_ms: u64) {
        let mut dropped = Vec::new();
        for id in first_id..first_id + n {
            enqueue(q, packet(id, 1500, 0, ecn, t_ms * MS), &mut dropped);
        }
        assert!(dropped.is_empty());
    }

    /// Dequeues one packet a ms, at `from_ms` through `to_ms`: the ms of each drop (all by the
    /// AQM), and of each packet sent marked.
    fn run(q: &mut CoDel<u32>, from_ms: u64, to_ms: u64) -> (Vec<u64>, Vec<u64>) {
        let (mut drops_ms, mut marks_ms) = (Vec::new(), Vec::new());
        for t_ms in from_ms..=to_ms {
            let mut dropped = Vec::new();
            let sent = dequeue(q, t_ms * MS, &mut dropped);
            for (_, cause) in dropped {
                assert_eq!(cause, DropCause::Aqm);
                drops_ms.push(t_ms);
            }
            if sent.is_some_and(|p| p.marked) {
                marks_ms.push(t_ms);
            }
        }
        (drops_ms, marks_ms)
    }

    /// Takes every packet at `t_ms`; none is dropped.
    fn drain(q: &mut CoDel<u32>, t_ms: u64) {
        let mut dropped = Vec::new();
        while dequeue(q, t_ms * MS, &mut dropped).is_some() {}
        assert!(dropped.is_empty());
    }

    fn codel(params: CoDelParams) -> CoDel<u32> {
        CoDel::new(QueueLimit::Infinite, params)
    }

    /// A standing queue (1000 packets that arrived at 0, one sent a ms): the sojourn time reaches
    /// 5 ms at 5 ms, so the first drop is at 105 ms; then drop_next = 105 + 100/√count ms from
    /// one scheduled drop to the next: 205, 275.711, 333.446, 383.446, 428.167, 468.992 ms, each
    /// taken at the first whole ms at or after it.
    const STANDING_DROPS_MS: [u64; 7] = [105, 205, 276, 334, 384, 429, 469];

    #[test]
    fn drops_are_spaced_by_interval_over_root_count() {
        let mut q = codel(CoDelParams::default());
        fill(&mut q, 0, 1000, Ecn::NotEct, 0);
        let (drops_ms, marks_ms) = run(&mut q, 0, 500);
        assert_eq!(drops_ms, STANDING_DROPS_MS);
        assert!(marks_ms.is_empty());
        assert_eq!(q.queue.count, 7);
        assert_eq!(q.queue.drop_next_us, 468_992 + 37_796);
    }

    #[test]
    fn ecn_capable_packets_are_marked_on_the_same_schedule() {
        let mut q = codel(CoDelParams::default());
        fill(&mut q, 0, 1000, Ecn::Ect0, 0);
        let (drops_ms, marks_ms) = run(&mut q, 0, 500);
        assert!(drops_ms.is_empty());
        assert_eq!(marks_ms, STANDING_DROPS_MS);
        // A mark sends the marked packet: one packet a ms left, none lost.
        assert_eq!(q.len_packets(), 1000 - 501);
    }

    #[test]
    fn without_ecn_capable_packets_are_dropped() {
        let mut q = codel(CoDelParams { ecn: false, ..CoDelParams::default() });
        fill(&mut q, 0, 1000, Ecn::Ect1, 0);
        let (drops_ms, marks_ms) = run(&mut q, 0, 500);
        assert_eq!(drops_ms, STANDING_DROPS_MS);
        assert!(marks_ms.is_empty());
    }

    /// The standing queue's first `drops` drops, then the queue drained at `left_ms` (leaving the
    /// dropping state with count = `drops`, lastcount = 1) and refilled at `again_ms`: the ms of
    /// the drops of the next episode, through `to_ms`.
    fn second_episode(left_ms: u64, again_ms: u64, to_ms: u64) -> Vec<u64> {
        let mut q = codel(CoDelParams::default());
        fill(&mut q, 0, 1000, Ecn::NotEct, 0);
        run(&mut q, 0, left_ms);
        drain(&mut q, left_ms);
        assert!(!q.queue.dropping);
        fill(&mut q, 1000, 1000, Ecn::NotEct, again_ms);
        run(&mut q, again_ms, to_ms).0
    }

    #[test]
    fn an_episode_soon_after_the_last_resumes_at_count_minus_lastcount() {
        // 4 drops (105–334 ms, drop_next 383.446 ms), out at 340 ms, back above target at 345 ms,
        // so ok to drop at 445 ms: 445 − 383.446 ms < 16 intervals and delta = 4 − 1 = 3, so
        // count = 3: the next drops at 445 + 100/√3 = 502.735, then + 100/√4 = 552.735,
        // + 100/√5 = 597.456 ms. A fresh episode would wait 100 ms for its second drop.
        assert_eq!(second_episode(340, 340, 600), [445, 503, 553, 598]);
    }

    #[test]
    fn an_episode_long_after_the_last_starts_at_count_one() {
        // 2105 − 383.446 ms is past 16 intervals (1600 ms): count = 1, the next drop 100 ms on.
        assert_eq!(second_episode(340, 2000, 2300), [2105, 2205, 2276]);
        // 2 drops (105, 205 ms; drop_next 275.711): delta = 2 − 1 = 1, not above 1.
        assert_eq!(second_episode(210, 210, 500), [315, 415, 486]);
    }

    /// Packets arrive one a ms from 0 ms and each leaves `lag_ms` after it arrived (from
    /// `lag_ms` on, one dequeue a ms): the drops in two seconds.
    fn steady(lag_ms: u64) -> Vec<u64> {
        let mut q = codel(CoDelParams::default());
        let mut drops_ms = Vec::new();
        for t_ms in 0..2000 {
            fill(&mut q, t_ms as u32, 1, Ecn::NotEct, t_ms);
            if t_ms >= lag_ms {
                let mut dropped = Vec::new();
                dequeue(&mut q, t_ms * MS, &mut dropped);
                drops_ms.extend(dropped.iter().map(|_| t_ms));
            }
        }
        drops_ms
    }

    #[test]
    fn a_sojourn_below_target_is_never_dropped() {
        assert!(steady(4).is_empty());
        // At target is not below it: the first dequeue (5 ms) starts the interval, the drop at
        // 105 ms shortens the standing queue to 4 ms, and the dropping state ends at 106 ms.
        assert_eq!(steady(5), [105]);
    }

    /// `n` packets at 0 ms, then every 100 ms one sent and one arriving: the drops in ten seconds.
    fn standing_packets(n: u32) -> Vec<u64> {
        let mut q = codel(CoDelParams::default());
        fill(&mut q, 0, n, Ecn::NotEct, 0);
        let mut drops_ms = Vec::new();
        for k in 1..=100 {
            let t_ms = 100 * k;
            let mut dropped = Vec::new();
            dequeue(&mut q, t_ms * MS, &mut dropped);
            drops_ms.extend(dropped.iter().map(|_| t_ms));
            fill(&mut q, n + k as u32, 1, Ecn::NotEct, t_ms);
        }
        drops_ms
    }

    #[test]
    fn a_queue_of_one_mtu_behind_the_head_is_never_dropped() {
        // Each packet waits 200 ms, far above target, but only 1500 bytes wait behind it.
        assert!(standing_packets(2).is_empty());
        // With 3000 bytes behind: above at 100 ms, dropped at 200 ms, then two packets stand.
        assert_eq!(standing_packets(3), [200]);
    }

    #[test]
    fn a_packet_past_the_limit_is_dropped_on_arrival() {
        let mut q = CoDel::new(QueueLimit::Packets(2), CoDelParams::default());
        let mut dropped = Vec::new();
        for id in 0..3 {
            enqueue(&mut q, packet(id, 1500, 0, Ecn::NotEct, 0), &mut dropped);
        }
        assert_eq!(dropped, [(2, DropCause::Queue)]);
        assert_eq!((q.len_packets(), q.len_bytes()), (2, 3000));
    }

    #[test]
    fn ce_threshold_marks_ecn_capable_packets_above_it() {
        let mut q = codel(CoDelParams { ce_threshold_us: Some(MS), ..CoDelParams::default() });
        let mut dropped = Vec::new();
        for (id, ecn) in [(0, Ecn::Ect1), (1, Ecn::Ect1), (2, Ecn::NotEct), (3, Ecn::Ce)] {
            enqueue(&mut q, packet(id, 100, 0, ecn, 0), &mut dropped);
        }
        // A sojourn of exactly the threshold is not above it.
        let mut marked = |t_us| dequeue(&mut q, t_us, &mut Vec::new()).map(|p| (p.marked, p.info.ecn));
        assert_eq!(marked(MS), Some((false, Ecn::Ect1)));
        assert_eq!(marked(MS + 1), Some((true, Ecn::Ce)));
        assert_eq!(marked(2 * MS), Some((false, Ecn::NotEct)));
        // Already CE: stays CE, and the queue did not mark it.
        assert_eq!(marked(2 * MS), Some((false, Ecn::Ce)));
        assert!(dropped.is_empty());
    }

    #[test]
    fn args_take_mahimahis_names_and_print_back() {
        let (aqm, limit) = Aqm::parse("codel", "").unwrap();
        assert_eq!((aqm.args_text().as_str(), limit), ("target=5,interval=100,ecn=1", None));
        assert_eq!(aqm.default_limit(), QueueLimit::Packets(1000));
        let (aqm, limit) = Aqm::parse("codel", "packets=500,target=2.5,interval=50,ecn=0,ce_threshold=1").unwrap();
        let p = CoDelParams { target_us: 2500, interval_us: 50_000, ecn: false, ce_threshold_us: Some(1000) };
        assert_eq!((&aqm, limit), (&Aqm::CoDel(p), Some(QueueLimit::Packets(500))));
        assert_eq!(aqm.args_text(), "target=2.5,interval=50,ecn=0,ce_threshold=1");
        assert_eq!(Aqm::parse("codel", &aqm.args_text()).unwrap().0, aqm);
    }

    #[test]
    fn bad_args_are_one_line_naming_the_key() {
        for (args, start) in [
            ("target=soon", "codel target: expected a time in ms"),
            ("interval=0", "codel interval: expected a time in ms"),
            ("ecn=maybe", "codel ecn: expected 1 or 0"),
            ("ce_threshold=-1", "codel ce_threshold: expected a time in ms"),
            ("quantum=1514", "codel: unknown parameter 'quantum'"),
        ] {
            let e = Aqm::parse("codel", args).unwrap_err();
            assert!(e.starts_with(start) && !e.contains('\n'), "{args}: {e}");
        }
    }
}
