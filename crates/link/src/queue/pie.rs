//! PIE, Proportional Integral controller Enhanced (Pan et al., RFC 8033): a drop probability `p`
//! steered by a PI controller of queueing delay, updated every `tupdate`, applied to packets as
//! they arrive.
//!
//! - Drop probability (§4.2): every `tupdate`,
//!   `p += alpha·(qdelay − qdelay_ref) + beta·(qdelay − qdelay_old)`, delays in seconds, the
//!   gains in Hz; the step is first divided by §4.2's table of `p`'s size (2048 below 0.0001 %,
//!   512 below 0.001 %, 128 below 0.01 %, 32 below 0.1 %, 8 below 1 %, 2 below 10 %, 1 above),
//!   so that a controller that starts from no drops does not overshoot; a step up while
//!   `p ≥ 10 %` is capped at 2 % (§5.5, "cap drop adjustment", as Linux always does). When the
//!   queue was empty at this update and the last (`qdelay == qdelay_old == 0`), `p` decays by
//!   2 % per update (§4.2), then `p` is bounded to [0, 1].
//! - Queueing delay (§4.3): measured from timestamps, as the sojourn of the packet at the head of
//!   the queue at the instant of the update (0 when the queue is empty). Linux's PIE (timestamps
//!   by default, tc-pie(8)'s `no_dq_rate_estimator`) takes the sojourn of the last packet
//!   dequeued; Mahimahi's
//!   `pie` estimates it from the dequeue rate (§5.2, Little's law). The head's sojourn is exact
//!   in model time, and it keeps rising while a stalled link (a gap in a trace) sends nothing,
//!   where the last departure's sojourn would stay frozen.
//! - Random drop (§4.1): an arriving packet is dropped with probability `p`, except when
//!   `qdelay_old < qdelay_ref/2` and `p < 20 %`, or when the queue holds at most two packets of
//!   1500 bytes (`MEAN_PKTSIZE`, in bytes as the RFC counts).
//! - Burst tolerance (§4.4): nothing is dropped while `burst_allowance > 0`. It starts at
//!   `max_burst`, loses `tupdate` at every update, and is refilled to `max_burst` (after that
//!   decrement, so a refill is whole) at an update that finds `p == 0` and both this and the last
//!   delay below `qdelay_ref/2`.
//! - ECN (§5.1): with `ecn=1` an ECN-capable packet chosen for a drop is marked CE instead while
//!   `p ≤ 10 %` (`mark_ecnth`); above, it is dropped like any other.
//!
//! Parameters (`--uplink-queue pie --uplink-queue-args ...`, times in ms, Mahimahi's names for
//! the two it has): `qdelay_ref` 15 (QDELAY_REF), `max_burst` 150 (MAX_BURST), `tupdate` 15
//! (T_UPDATE), `alpha` 0.125 Hz, `beta` 1.25 Hz — RFC 8033 §4's defaults and tc-pie(8)'s —
//! and `ecn` 1 (Pantheon's default for every AQM; tc-pie(8)'s is `noecn`); the limit,
//! `packets=`, is 1000 by default as in tc-pie(8).
//!
//! Model time: the RFC's timer fires every `tupdate`. Here the clock starts at the first call
//! (enqueue or dequeue), and every call first runs, in order, each update whose instant has come
//! (`≤ t_us`) and that has not yet run, stamped with its own instant. Between calls the queue
//! does not change, so each such update sees exactly what a timer at that instant would have
//! seen (the head's sojourn then), and an update due at the instant of a call runs before the
//! call's packet is handled. Two shortcuts keep a long idle or stalled spell cheap, both exact:
//! an update that leaves an empty queue's state unchanged would leave it unchanged forever, and
//! with `p` at 1, no burst allowance and a head whose sojourn at the next update reaches
//! `qdelay_ref`, the further updates only move `qdelay_old` (the delay grows by `tupdate` each
//! time, so every step is up and is clamped back to 1).
//!
//! Deviations: no derandomisation (§5.4; Linux applies it) — drops are independent draws at
//! `p`; no active/inactive switch (§5.3, optional); no dequeue-rate estimation (§5.2, see
//! above); no extra 2 % step above 250 ms of delay (a Linux addition that is not in the RFC).

use std::fmt;

use super::fifo::Fifo;
use super::{Discipline, Dropper, QueueArgs, QueueLimit, Queued};
use crate::event::DropCause;
use crate::rng::Rng;

/// The limit when the command line gives none: tc-pie(8)'s 1000 packets.
pub const DEFAULT_LIMIT: QueueLimit = QueueLimit::Packets(1000);

/// RFC 8033 §4.1's MEAN_PKTSIZE, bytes: the MTU of the paths Pantheon emulates.
const MEAN_PKT_BYTES: u64 = 1500;

/// RFC 8033 §5.1's `mark_ecnth`: above this drop probability ECN-capable packets are dropped too.
const MARK_ECN_THRESHOLD: f64 = 0.1;

/// §4.1: below half the reference delay and this probability, PIE does not drop.
const SAFEGUARD_PROBABILITY: f64 = 0.2;

/// §5.5: while `p` is at least 10 %, one update raises it by at most 2 %.
const CAP_FROM_PROBABILITY: f64 = 0.1;
const CAP_STEP: f64 = 0.02;

/// §4.2: the factor by which `p` decays at an update when the queue was empty at this and the
/// last update.
const DECAY: f64 = 0.98;

/// PIE's parameters: RFC 8033 §4's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct PieParams {
    /// QDELAY_REF, µs: the queueing delay the controller steers to.
    pub qdelay_ref_us: u64,
    /// MAX_BURST, µs: how long a burst is let through before random drops start.
    pub max_burst_us: u64,
    /// T_UPDATE, µs: the period of the drop-probability update.
    pub tupdate_us: u64,
    /// The integral gain, Hz: how much a standing delay error (in seconds) moves `p` per update.
    pub alpha: f64,
    /// The proportional gain, Hz: how much a change of delay since the last update moves `p`.
    pub beta: f64,
    /// Mark ECN-capable packets CE instead of dropping them while `p ≤ 10 %`.
    pub ecn: bool,
}

impl Default for PieParams {
    fn default() -> Self {
        PieParams {
            qdelay_ref_us: 15_000,
            max_burst_us: 150_000,
            tupdate_us: 15_000,
            alpha: 0.125,
            beta: 1.25,
            ecn: true,
        }
    }
}

impl PieParams {
    /// `qdelay_ref`, `max_burst`, `tupdate` (ms), `alpha`, `beta` (Hz), `ecn` (1/0). `tupdate`
    /// is at least 0.1 ms: every elapsed period costs one update.
    pub fn from_args(args: &mut QueueArgs) -> Result<Self, String> {
        let d = PieParams::default();
        Ok(PieParams {
            qdelay_ref_us: args.ms_as_us("qdelay_ref", d.qdelay_ref_us, 1)?,
            max_burst_us: args.ms_as_us("max_burst", d.max_burst_us, 0)?,
            tupdate_us: args.ms_as_us("tupdate", d.tupdate_us, 100)?,
            alpha: args.number("alpha", d.alpha, 0.0, 100.0)?,
            beta: args.number("beta", d.beta, 0.0, 100.0)?,
            ecn: args.flag("ecn", d.ecn)?,
        })
    }
}

impl fmt::Display for PieParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |us: u64| us as f64 / 1000.0;
        write!(
            f,
            "qdelay_ref={},max_burst={},tupdate={},alpha={},beta={},ecn={}",
            ms(self.qdelay_ref_us),
            ms(self.max_burst_us),
            ms(self.tupdate_us),
            self.alpha,
            self.beta,
            u8::from(self.ecn)
        )
    }
}

#[derive(Debug)]
pub struct Pie<P> {
    params: PieParams,
    limit: QueueLimit,
    fifo: Fifo<P>,
    /// Draws the random drops.
    rng: Rng,
    /// The drop probability, in [0, 1].
    p: f64,
    /// The queueing delay the last update measured, µs (`qdelay_old`).
    qdelay_old_us: u64,
    /// Time left during which nothing is dropped, µs (`burst_allowance`).
    burst_allowance_us: u64,
    /// When the next update is due; `None` until the first call starts the clock.
    next_update_us: Option<u64>,
}

impl<P> Pie<P> {
    pub fn new(limit: QueueLimit, params: PieParams, seed: u64) -> Self {
        let burst_allowance_us = params.max_burst_us;
        Pie {
            params,
            limit,
            fifo: Fifo::default(),
            rng: Rng::new(seed),
            p: 0.0,
            qdelay_old_us: 0,
            burst_allowance_us,
            next_update_us: None,
        }
    }

    /// The sojourn of the packet at the head at `at_us`, µs; 0 for an empty queue.
    fn head_sojourn_us(&self, at_us: u64) -> u64 {
        self.fifo.front().map_or(0, |head| at_us.saturating_sub(head.arrival_us))
    }

    /// Runs every update due at or before `t_us` (see the header: exact in model time).
    fn catch_up(&mut self, t_us: u64) {
        let period_us = self.params.tupdate_us;
        let mut next_us = *self.next_update_us.get_or_insert(t_us.saturating_add(period_us));
        while next_us <= t_us {
            let before = (self.p, self.qdelay_old_us, self.burst_allowance_us);
            self.update(next_us);
            let left = (t_us - next_us) / period_us;
            if left > 0 {
                let empty_and_settled =
                    self.fifo.is_empty() && before == (self.p, self.qdelay_old_us, self.burst_allowance_us);
                let saturated = !self.fifo.is_empty()
                    && self.p == 1.0
                    && self.burst_allowance_us == 0
                    && self.qdelay_old_us + period_us >= self.params.qdelay_ref_us;
                if empty_and_settled || saturated {
                    next_us += left * period_us;
                    self.qdelay_old_us = self.head_sojourn_us(next_us);
                }
            }
            next_us += period_us;
        }
        self.next_update_us = Some(next_us);
    }

    /// RFC 8033 §4.2 and §4.4's update, as a timer firing at `at_us` would run it.
    fn update(&mut self, at_us: u64) {
        let qdelay_us = self.head_sojourn_us(at_us);
        let (qdelay, qdelay_old, qdelay_ref) =
            (qdelay_us as f64 / 1e6, self.qdelay_old_us as f64 / 1e6, self.params.qdelay_ref_us as f64 / 1e6);
        let mut step = (self.params.alpha * (qdelay - qdelay_ref) + self.params.beta * (qdelay - qdelay_old))
            / gain_divisor(self.p);
        if self.p >= CAP_FROM_PROBABILITY && step > CAP_STEP {
            step = CAP_STEP;
        }
        self.p += step;
        if qdelay_us == 0 && self.qdelay_old_us == 0 {
            self.p *= DECAY;
        }
        self.p = self.p.clamp(0.0, 1.0);
        self.burst_allowance_us = self.burst_allowance_us.saturating_sub(self.params.tupdate_us);
        if self.p == 0.0
            && 2 * qdelay_us < self.params.qdelay_ref_us
            && 2 * self.qdelay_old_us < self.params.qdelay_ref_us
        {
            self.burst_allowance_us = self.params.max_burst_us;
        }
        self.qdelay_old_us = qdelay_us;
    }

    /// §4.1 and §4.4: whether the arriving packet is to be dropped (or marked).
    fn drops_early(&mut self) -> bool {
        if self.burst_allowance_us > 0 {
            return false;
        }
        let settled = 2 * self.qdelay_old_us < self.params.qdelay_ref_us && self.p < SAFEGUARD_PROBABILITY;
        if settled || self.fifo.len_bytes() <= 2 * MEAN_PKT_BYTES {
            return false;
        }
        self.p >= 1.0 || (self.p > 0.0 && self.rng.next_f64() < self.p)
    }
}

/// RFC 8033 §4.2's auto-tuning: the PI step is divided by this for a drop probability `p`, so
/// that the controller moves `p` in proportion to its size while it is small.
fn gain_divisor(p: f64) -> f64 {
    match p {
        p if p < 0.000_001 => 2048.0,
        p if p < 0.000_01 => 512.0,
        p if p < 0.000_1 => 128.0,
        p if p < 0.001 => 32.0,
        p if p < 0.01 => 8.0,
        p if p < 0.1 => 2.0,
        _ => 1.0,
    }
}

impl<P: Send + fmt::Debug> Discipline<P> for Pie<P> {
    fn enqueue(&mut self, t_us: u64, mut item: Queued<P>, drop: &mut Dropper<'_, P>) {
        self.catch_up(t_us);
        if !self.limit.admits(self.fifo.len_packets(), self.fifo.len_bytes(), item.size_bytes()) {
            drop(item, DropCause::Queue);
            return;
        }
        if self.drops_early() && !(self.params.ecn && self.p <= MARK_ECN_THRESHOLD && item.mark_ce()) {
            drop(item, DropCause::Aqm);
            return;
        }
        self.fifo.push_back(item);
    }

    fn dequeue(&mut self, t_us: u64, _drop: &mut Dropper<'_, P>) -> Option<Queued<P>> {
        self.catch_up(t_us);
        self.fifo.pop_front()
    }

    fn len_packets(&self) -> usize {
        self.fifo.len_packets()
    }

    fn len_bytes(&self) -> u64 {
        self.fifo.len_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ecn::Ecn;
    use crate::queue::testing::{dequeue, enqueue, packet};
    use crate::queue::Aqm;

    /// A PIE queue with no limit and RFC 8033's parameters.
    fn pie() -> Pie<u32> {
        Pie::new(QueueLimit::Infinite, PieParams::default(), 7)
    }

    /// `n` packets of 1500 bytes arriving at `t_us` with codepoint `ecn`, numbered from `first`;
    /// returns how many were dropped (each by the AQM).
    fn arrive(q: &mut Pie<u32>, first: u32, n: u32, ecn: Ecn, t_us: u64) -> usize {
        let mut dropped = Vec::new();
        for id in first..first + n {
            enqueue(q, packet(id, 1500, 0, ecn, t_us), &mut dropped);
        }
        assert!(dropped.iter().all(|&(_, cause)| cause == DropCause::Aqm));
        dropped.len()
    }

    /// A queue past every safeguard: ten packets taken at t = 0 (within the burst allowance),
    /// then drop probability `p`, qdelay_old 20 ms and no allowance left.
    fn loaded(params: PieParams, p: f64) -> Pie<u32> {
        let mut q = Pie::new(QueueLimit::Infinite, params, 7);
        arrive(&mut q, 0, 10, Ecn::NotEct, 0);
        (q.p, q.qdelay_old_us, q.burst_allowance_us) = (p, 20_000, 0);
        q
    }

    /// Empties the queue at `t_us`, counting the packets marked CE.
    fn drain_marked(q: &mut Pie<u32>, t_us: u64) -> usize {
        std::iter::from_fn(|| dequeue(q, t_us, &mut Vec::new())).filter(|d| d.marked).count()
    }

    #[test]
    fn a_standing_queue_raises_p_by_the_auto_tuned_gains() {
        // Ten packets at t=0 start the clock; the link sends none, so the head's sojourn is 15,
        // 30 and 45 ms at the first three updates.
        let mut q = pie();
        arrive(&mut q, 0, 10, Ecn::NotEct, 0);
        // 1: qdelay = 15 ms = qdelay_ref, qdelay_old = 0: 1.25·0.015 = 0.01875, and p = 0 is
        //    below 0.0001 %, so divided by 2048: p = 9.1553e-6.
        q.catch_up(15_000);
        let p1 = 0.01875 / 2048.0;
        assert!((q.p - p1).abs() < 1e-15, "p {}", q.p);
        // 2: 0.125·0.015 + 1.25·0.015 = 0.020625, p below 0.001 %: /512, p = 4.9438e-5.
        q.catch_up(30_000);
        let p2 = p1 + 0.020625 / 512.0;
        assert!((q.p - p2).abs() < 1e-15, "p {}", q.p);
        // 3: 0.125·0.030 + 1.25·0.015 = 0.0225, p below 0.01 %: /128, p = 2.2522e-4.
        q.catch_up(45_000);
        assert!((q.p - (p2 + 0.0225 / 128.0)).abs() < 1e-15, "p {}", q.p);
        assert_eq!(q.qdelay_old_us, 45_000);
    }

    #[test]
    fn above_ten_percent_a_step_is_capped_at_two_percent() {
        // p = 5 % (gains halved), qdelay_old = 10 ms, a head that arrived at 0 (the clock started
        // there): the update at 40 ms sees 40 ms of delay.
        let mut q = pie();
        arrive(&mut q, 0, 10, Ecn::NotEct, 0);
        q.next_update_us = Some(40_000);
        (q.p, q.qdelay_old_us) = (0.05, 10_000);
        // 0.125·0.025 + 1.25·0.030 = 0.040625, /2 = 0.0203125: p = 0.0703125.
        q.catch_up(40_000);
        assert!((q.p - 0.0703125).abs() < 1e-12, "p {}", q.p);
        // 55 ms: 0.125·0.040 + 1.25·0.015 = 0.02375, /2: p = 0.0821875; 70 ms: 0.025625/2,
        // p = 0.0950; 85 ms: 0.0275/2, p = 0.10875; 100 ms: 0.029375, p ≥ 10 %: capped at 0.02.
        q.catch_up(55_000);
        assert!((q.p - 0.0821875).abs() < 1e-12, "p {}", q.p);
        q.catch_up(85_000);
        assert!((q.p - 0.10875).abs() < 1e-12, "p {}", q.p);
        q.catch_up(100_000);
        assert!((q.p - 0.12875).abs() < 1e-12, "p {}", q.p);
    }

    #[test]
    fn an_empty_queue_decays_p_and_refills_the_burst_allowance() {
        let mut q = pie();
        dequeue(&mut q, 0, &mut Vec::new());
        (q.p, q.burst_allowance_us) = (0.5, 0);
        // 15 ms: qdelay = qdelay_old = 0: (0.5 − 0.125·0.015)·0.98 = 0.48816250.
        q.catch_up(15_000);
        assert!((q.p - (0.5 - 0.001875) * 0.98).abs() < 1e-12, "p {}", q.p);
        assert_eq!(q.burst_allowance_us, 0);
        // Long idle: p reaches 0 and the allowance is refilled to max_burst.
        q.catch_up(100_000_000);
        assert_eq!((q.p, q.burst_allowance_us, q.next_update_us), (0.0, 150_000, Some(100_005_000)));
    }

    #[test]
    fn catching_up_equals_a_timer_at_every_boundary() {
        // Two queues in one state: one catches up in one call an hour later (taking both
        // shortcuts), the other runs every update by hand.
        for backlog in [0, 10] {
            let mut fast = pie();
            let mut slow = pie();
            for q in [&mut fast, &mut slow] {
                arrive(q, 0, backlog, Ecn::NotEct, 0);
                if backlog == 0 {
                    dequeue(q, 0, &mut Vec::new());
                }
                (q.p, q.qdelay_old_us, q.burst_allowance_us) = (0.3, 40_000, 0);
            }
            let end_us = 3_600_000_000;
            fast.catch_up(end_us);
            let mut at_us = 15_000;
            while at_us <= end_us {
                slow.update(at_us);
                at_us += 15_000;
            }
            assert_eq!(
                (fast.p, fast.qdelay_old_us, fast.burst_allowance_us),
                (slow.p, slow.qdelay_old_us, slow.burst_allowance_us)
            );
            assert_eq!(fast.next_update_us, Some(at_us));
        }
    }

    #[test]
    fn the_burst_allowance_lets_a_burst_through() {
        // p = 50 % from the start, past the safeguards (qdelay_old = 20 ms): a fresh queue still
        // takes 200 packets in its first 150 ms, the burst allowance lasting ten updates.
        let mut q = pie();
        (q.p, q.qdelay_old_us) = (0.5, 20_000);
        assert_eq!(arrive(&mut q, 0, 100, Ecn::NotEct, 0), 0);
        assert_eq!(arrive(&mut q, 100, 100, Ecn::NotEct, 149_999), 0);
        // The tenth update, at 150 ms, spends the allowance. The head has waited 15, 30, ...
        // 150 ms: the first step is 1.25·(0.015 − 0.020) = −0.00625, the nine after it at least
        // 0.125·0.015 + 1.25·0.015 > 2 %, capped: p = 0.49375 + 9·0.02 = 0.67375.
        q.catch_up(150_000);
        assert_eq!(q.burst_allowance_us, 0);
        assert!((q.p - 0.67375).abs() < 1e-12, "p {}", q.p);
        // 2000 arrivals at p = 0.67375: 99.99 % binomial interval, 2000·p ± 3.9·sqrt(2000·p(1−p))
        // = 1347.5 ± 81.7.
        let dropped = arrive(&mut q, 200, 2000, Ecn::NotEct, 150_000);
        assert!((1266..=1429).contains(&dropped), "dropped {dropped}");
    }

    #[test]
    fn ect_packets_are_marked_up_to_ten_percent_and_dropped_above() {
        // p = 8 %: ECT(0) packets are all kept, 8 % of them marked; Not-ECT dropped at 8 %. 99.99 %
        // binomial interval for 10 000 draws: 800 ± 3.9·sqrt(10 000·0.08·0.92) = 800 ± 106.
        let mut q = loaded(PieParams::default(), 0.08);
        assert_eq!(arrive(&mut q, 10, 10_000, Ecn::Ect0, 0), 0);
        let marked = drain_marked(&mut q, 0);
        assert!((694..=906).contains(&marked), "marked {marked}");
        let dropped = arrive(&mut loaded(PieParams::default(), 0.08), 10, 10_000, Ecn::NotEct, 0);
        assert!((694..=906).contains(&dropped), "dropped {dropped}");
        // p = 30 %: ECT(0) is dropped like Not-ECT, nothing marked: 3000 ± 3.9·45.8 = 3000 ± 179.
        let mut q = loaded(PieParams::default(), 0.3);
        let dropped = arrive(&mut q, 10, 10_000, Ecn::Ect0, 0);
        assert!((2821..=3179).contains(&dropped), "dropped {dropped}");
        assert_eq!(drain_marked(&mut q, 0), 0);
        // With ecn=0 an ECT packet is dropped even at 8 %.
        let mut q = loaded(PieParams { ecn: false, ..PieParams::default() }, 0.08);
        let dropped = arrive(&mut q, 10, 10_000, Ecn::Ect0, 0);
        assert!((694..=906).contains(&dropped), "dropped {dropped}");
        assert_eq!(drain_marked(&mut q, 0), 0);
    }

    #[test]
    fn a_short_or_settled_queue_is_never_dropped_from() {
        let mut q = pie();
        (q.p, q.qdelay_old_us, q.burst_allowance_us) = (1.0, 20_000, 0);
        // Two full packets queued (3000 bytes ≤ 2·MEAN_PKTSIZE): the third is kept, the fourth
        // (4500 bytes queued) dropped at p = 1.
        assert_eq!(arrive(&mut q, 0, 3, Ecn::NotEct, 0), 0);
        assert_eq!(arrive(&mut q, 3, 1, Ecn::NotEct, 0), 1);
        // qdelay_old below qdelay_ref/2 and p below 20 %: nothing dropped.
        (q.p, q.qdelay_old_us) = (0.19, 7_499);
        assert_eq!(arrive(&mut q, 4, 1000, Ecn::NotEct, 0), 0);
    }

    #[test]
    fn the_limit_drops_arrivals_as_queue_overflow() {
        let mut q = Pie::new(QueueLimit::Packets(2), PieParams::default(), 1);
        let mut dropped = Vec::new();
        for id in 0..3 {
            enqueue(&mut q, packet(id, 1500, 0, Ecn::NotEct, 0), &mut dropped);
        }
        assert_eq!(dropped, vec![(2, DropCause::Queue)]);
    }

    #[test]
    fn args_round_trip_and_errors_name_the_key() {
        let (aqm, limit) =
            Aqm::parse("pie", "packets=500,qdelay_ref=5,max_burst=0,tupdate=30,alpha=0.25,ecn=0").unwrap();
        let want = PieParams {
            qdelay_ref_us: 5_000,
            max_burst_us: 0,
            tupdate_us: 30_000,
            alpha: 0.25,
            beta: 1.25,
            ecn: false,
        };
        assert_eq!((aqm.clone(), limit), (Aqm::Pie(want), Some(QueueLimit::Packets(500))));
        assert_eq!(aqm.args_text(), "qdelay_ref=5,max_burst=0,tupdate=30,alpha=0.25,beta=1.25,ecn=0");
        assert_eq!(Aqm::parse("pie", &aqm.args_text()).unwrap().0, aqm);
        assert_eq!(
            PieParams::default().to_string(),
            "qdelay_ref=15,max_burst=150,tupdate=15,alpha=0.125,beta=1.25,ecn=1"
        );
        for (args, key) in [("alpha=-1", "pie alpha:"), ("tupdate=0.01", "pie tupdate:"), ("ecn=2", "pie ecn:")] {
            let err = Aqm::parse("pie", args).unwrap_err();
            assert!(err.starts_with(key) && !err.contains('\n'), "{err}");
        }
        assert!(Aqm::parse("pie", "target=5").unwrap_err().contains("unknown parameter 'target'"));
    }
}
