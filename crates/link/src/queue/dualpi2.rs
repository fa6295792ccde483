//! DualPI2, the DualQ Coupled AQM of L4S (De Schepper, Briscoe & White, RFC 9332; the PI2
//! controller of De Schepper et al., "PI2: A Linearized AQM for both Classic and Scalable TCP",
//! CoNEXT 2016): two FIFOs behind one limit, an L4S queue (L) for scalable congestion controls
//! kept at about a millisecond, and a classic queue (C), with one base probability `p'` coupling
//! the congestion signals of both.
//!
//! - Classifier (§2.3): ECT(1) and CE go to L, Not-ECT and ECT(0) to C (`Ecn::is_l4s`).
//! - Base controller (Appendix A.1, `dualpi2_update`): every `tupdate`,
//!   `p' += alpha·(qdelay − target) + beta·(qdelay − qdelay_prev)` (delays in seconds, gains in
//!   Hz), `p'` bounded to [0, 1]. `qdelay` is the larger of the two heads' sojourns at the
//!   instant of the update (0 for an empty queue), Appendix A.2's `max(cq.time(), lq.time())`
//!   (A.1 takes the classic queue's alone), so that an L queue overloaded by unresponsive ECT(1)
//!   traffic raises `p'` too (§4.1).
//! - Coupling (§2.1, §2.4): C packets are dropped, or marked if ECN-capable, with `p_C = p'²`
//!   (the square matches Reno/Cubic's 1/√p response); L packets are marked with
//!   `p_L = max(p'_L, p_CL)`, the coupled `p_CL = min(k·p', 1)` (`k` the coupling factor) and the
//!   L queue's native AQM `p'_L`: a step, 1 when the departing packet's sojourn exceeds
//!   `step_thresh` and the L queue held more than `min_qlen_step` packets (the departing one
//!   counted; Appendix A.2's `Th_len`, which suppresses marking a lone packet, is
//!   `min_qlen_step=1`; Linux's default 0 marks on sojourn alone), else 0.
//! - Overload (§4.1, Appendix A.2): once `p_C ≥ p_Cmax = min(1/k², 1)` ECN no longer protects
//!   a classic packet: C packets are dropped with `p_C` whatever their codepoint; once `p_CL`
//!   saturates at 1 (the same instant for `k ≥ 1`) L packets are dropped with `p_C` too, the
//!   rest of them marked (`drop_on_overload=1`, the default). With `drop_on_overload=0`
//!   ("overflow" in tc-dualpi2(8)) `p'` stops at `min(1/k, 1)` instead, so nothing ECN-capable
//!   is dropped and the queue grows until the limit drops.
//! - Signals are applied at dequeue, as in Appendix A and Linux's default (`drop_dequeue`); a
//!   dropped packet is handed to the dropper and the next one is taken in the same call.
//! - Scheduler: weighted round robin in bytes with `classic_protection` (%), in the manner of
//!   tc-dualpi2(8)'s: when both queues hold packets, L goes first while a credit is not positive;
//!   each L packet sent then adds `classic_protection × bytes` and each C packet takes
//!   `(100 − classic_protection) × bytes`, so under contention C gets `classic_protection` % of
//!   the bytes (at 10 %: L, C, then nine L to each C). While only one queue holds packets it is
//!   served and the credit is reset. RFC 9332 §2.4 allows WRR or a time-shifted FIFO and asks
//!   only that L's priority be bounded.
//! - ECN: `ecn=1` marks ECN-capable C packets with `p_C`; with `ecn=0` they are dropped like
//!   Not-ECT. L packets are always ECN-capable and always marked.
//!
//! Parameters (`--uplink-queue dualpi2 --uplink-queue-args ...`, times in ms, tc-dualpi2(8)'s
//! names and defaults): `target` 15, `tupdate` 16, `alpha` 0.16 Hz, `beta` 3.2 Hz (stable for
//! RTTs up to 100 ms; RFC 9332 A.1's `alpha = 0.1·Tupdate/RTT_max²` is 0.16 and
//! `beta = 0.3/RTT_max` 3 for RTT_max = 100 ms), `k` 2 (tc's `coupling_factor`), `step_thresh` 1,
//! `min_qlen_step` 0, `classic_protection` 10, `drop_on_overload` 1, `ecn` 1; the limit,
//! `packets=`, 10 000 packets across both queues (tc-dualpi2(8)).
//!
//! Model time: as in PIE (pie.rs): the update clock starts at the first call, and every call
//! first runs each update whose instant has come, stamped with that instant; the queues do not
//! change between calls, so each update sees what a timer at that instant would have seen. An
//! empty queue's update that changes nothing is a fixed point, and with `p'` at its bound and a
//! head delay of at least `target` the delay only grows, so further updates leave `p'` there;
//! both spells are skipped in one step, exactly.
//!
//! Deviations: random rolls for every signal, as Linux does, where Appendix A.2's pseudocode
//! spaces signals with the deterministic `recur()`; the step is in time only (no `step_thresh`
//! in packets); no `max_rtt`/`typical_rtt` helpers (give `alpha`, `beta`, `target`,
//! `tupdate`); no `any_ect` classifier; no split of GSO aggregates (the link model has none).

use std::fmt;

use super::fifo::Fifo;
use super::{Discipline, Dropper, QueueArgs, QueueLimit, Queued};
use crate::bounds::MAX_BUFFER;
use crate::event::DropCause;
use crate::rng::Rng;

/// The limit when the command line gives none: tc-dualpi2(8)'s 10 000 packets.
pub const DEFAULT_LIMIT: QueueLimit = QueueLimit::Packets(10000);

/// DualPI2's parameters: tc-dualpi2(8)'s defaults (RFC 9332 Appendix A).
#[derive(Debug, Clone, PartialEq)]
pub struct DualPi2Params {
    /// The queueing delay the base controller steers to, µs.
    pub target_us: u64,
    /// The period of the base-probability update, µs.
    pub tupdate_us: u64,
    /// The integral gain, Hz.
    pub alpha: f64,
    /// The proportional gain, Hz.
    pub beta: f64,
    /// The coupling factor: `p_CL = k·p'`.
    pub k: f64,
    /// An L packet whose sojourn exceeds this (µs) is marked.
    pub step_thresh_us: u64,
    /// The step marks only while the L queue holds more than this many packets (the departing
    /// one counted).
    pub min_qlen_step: u64,
    /// The share of the bytes (%) the classic queue gets while both queues hold packets.
    pub classic_protection: u64,
    /// On overload drop from both queues at `p_C`, ECN or not (else cap `p'` and let the queue
    /// overflow).
    pub drop_on_overload: bool,
    /// Mark ECN-capable classic packets CE instead of dropping them.
    pub ecn: bool,
}

impl Default for DualPi2Params {
    fn default() -> Self {
        DualPi2Params {
            target_us: 15_000,
            tupdate_us: 16_000,
            alpha: 0.16,
            beta: 3.2,
            k: 2.0,
            step_thresh_us: 1_000,
            min_qlen_step: 0,
            classic_protection: 10,
            drop_on_overload: true,
            ecn: true,
        }
    }
}

impl DualPi2Params {
    /// `target`, `tupdate`, `step_thresh` (ms; `tupdate` at least 0.1 ms, every elapsed period
    /// costing one update), `alpha`, `beta` (Hz), `k`, `min_qlen_step` (packets),
    /// `classic_protection` (%, 0 to 100), `drop_on_overload` and `ecn` (1/0).
    pub fn from_args(args: &mut QueueArgs) -> Result<Self, String> {
        let d = DualPi2Params::default();
        Ok(DualPi2Params {
            target_us: args.ms_as_us("target", d.target_us, 1)?,
            tupdate_us: args.ms_as_us("tupdate", d.tupdate_us, 100)?,
            alpha: args.number("alpha", d.alpha, 0.0, 100.0)?,
            beta: args.number("beta", d.beta, 0.0, 100.0)?,
            k: args.number("k", d.k, 0.0, 100.0)?,
            step_thresh_us: args.ms_as_us("step_thresh", d.step_thresh_us, 0)?,
            min_qlen_step: args.count("min_qlen_step", d.min_qlen_step, 0, MAX_BUFFER)?,
            classic_protection: args.count("classic_protection", d.classic_protection, 0, 100)?,
            drop_on_overload: args.flag("drop_on_overload", d.drop_on_overload)?,
            ecn: args.flag("ecn", d.ecn)?,
        })
    }

    /// `p_Cmax`: at and above this classic probability the queue is overloaded.
    fn p_cmax(&self) -> f64 {
        (1.0 / (self.k * self.k)).min(1.0)
    }

    /// The largest `p'`: 1, or where `p_CL` saturates when overload is left to the limit.
    fn p_base_max(&self) -> f64 {
        if self.drop_on_overload {
            1.0
        } else {
            (1.0 / self.k).min(1.0)
        }
    }
}

impl fmt::Display for DualPi2Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |us: u64| us as f64 / 1000.0;
        write!(
            f,
            "target={},tupdate={},alpha={},beta={},k={},step_thresh={},min_qlen_step={},classic_protection={},\
             drop_on_overload={},ecn={}",
            ms(self.target_us),
            ms(self.tupdate_us),
            self.alpha,
            self.beta,
            self.k,
            ms(self.step_thresh_us),
            self.min_qlen_step,
            self.classic_protection,
            u8::from(self.drop_on_overload),
            u8::from(self.ecn)
        )
    }
}

#[derive(Debug)]
pub struct DualPi2<P> {
    params: DualPi2Params,
    limit: QueueLimit,
    /// The L4S queue: ECT(1) and CE.
    l: Fifo<P>,
    /// The classic queue: Not-ECT and ECT(0).
    c: Fifo<P>,
    /// Draws the random drops and marks.
    rng: Rng,
    /// The base probability `p'`, in [0, `p_base_max`].
    p_base: f64,
    /// The queueing delay the last update measured, µs (`prevq`).
    qdelay_prev_us: u64,
    /// When the next update is due; `None` until the first call starts the clock.
    next_update_us: Option<u64>,
    /// The scheduler's credit, in %·bytes: while both queues hold packets, L is served when it is
    /// not positive.
    credit: i64,
}

impl<P> DualPi2<P> {
    pub fn new(limit: QueueLimit, params: DualPi2Params, seed: u64) -> Self {
        DualPi2 {
            params,
            limit,
            l: Fifo::default(),
            c: Fifo::default(),
            rng: Rng::new(seed),
            p_base: 0.0,
            qdelay_prev_us: 0,
            next_update_us: None,
            credit: 0,
        }
    }

    /// The classic drop/mark probability, `p'²`.
    fn p_c(&self) -> f64 {
        self.p_base * self.p_base
    }

    /// The coupled L4S marking probability, `min(k·p', 1)`.
    fn p_cl(&self) -> f64 {
        (self.params.k * self.p_base).min(1.0)
    }

    /// Appendix A.2's overload for the classic queue: ECN no longer spares a packet.
    fn classic_overloaded(&self) -> bool {
        self.params.drop_on_overload && self.p_c() >= self.params.p_cmax()
    }

    /// Appendix A.2's saturation of the L queue: `p_CL` has reached 1, so L packets are dropped
    /// at `p_C` like classic ones (for `k ≥ 1` the same instant as `classic_overloaded`).
    fn l4s_saturated(&self) -> bool {
        self.params.drop_on_overload && self.params.k * self.p_base >= 1.0
    }

    /// The larger of the two heads' sojourns at `at_us`, µs; 0 when both queues are empty.
    fn head_delay_us(&self, at_us: u64) -> u64 {
        let sojourn = |q: &Fifo<P>| q.front().map_or(0, |head| at_us.saturating_sub(head.arrival_us));
        sojourn(&self.l).max(sojourn(&self.c))
    }

    fn queues_empty(&self) -> bool {
        self.l.is_empty() && self.c.is_empty()
    }

    /// Runs every update due at or before `t_us` (see the header: exact in model time).
    fn catch_up(&mut self, t_us: u64) {
        let period_us = self.params.tupdate_us;
        let mut next_us = *self.next_update_us.get_or_insert(t_us.saturating_add(period_us));
        while next_us <= t_us {
            let before = (self.p_base, self.qdelay_prev_us);
            self.update(next_us);
            let left = (t_us - next_us) / period_us;
            if left > 0 {
                let empty_and_settled = self.queues_empty() && before == (self.p_base, self.qdelay_prev_us);
                let saturated = !self.queues_empty()
                    && self.p_base == self.params.p_base_max()
                    && self.qdelay_prev_us + period_us >= self.params.target_us;
                if empty_and_settled || saturated {
                    next_us += left * period_us;
                    self.qdelay_prev_us = self.head_delay_us(next_us);
                }
            }
            next_us += period_us;
        }
        self.next_update_us = Some(next_us);
    }

    /// Appendix A's `dualpi2_update`, as a timer firing at `at_us` would run it.
    fn update(&mut self, at_us: u64) {
        let qdelay_us = self.head_delay_us(at_us);
        let (qdelay, qdelay_prev, target) =
            (qdelay_us as f64 / 1e6, self.qdelay_prev_us as f64 / 1e6, self.params.target_us as f64 / 1e6);
        let step = self.params.alpha * (qdelay - target) + self.params.beta * (qdelay - qdelay_prev);
        self.p_base = (self.p_base + step).clamp(0.0, self.params.p_base_max());
        self.qdelay_prev_us = qdelay_us;
    }

    /// True with probability `p`.
    fn roll(&mut self, p: f64) -> bool {
        p >= 1.0 || (p > 0.0 && self.rng.next_f64() < p)
    }

    /// Takes the next packet by the scheduler; `true` if from L.
    fn take(&mut self) -> Option<(Queued<P>, bool)> {
        let contested = !self.l.is_empty() && !self.c.is_empty();
        let from_l = if contested { self.credit <= 0 } else { !self.l.is_empty() };
        let item = if from_l { self.l.pop_front() } else { self.c.pop_front() }?;
        if contested {
            let share = self.params.classic_protection as i64;
            let bytes = i64::from(item.size_bytes());
            self.credit += if from_l { share * bytes } else { -(100 - share) * bytes };
        } else {
            self.credit = 0;
        }
        Some((item, from_l))
    }
}

impl<P: Send + fmt::Debug> Discipline<P> for DualPi2<P> {
    fn enqueue(&mut self, t_us: u64, item: Queued<P>, drop: &mut Dropper<'_, P>) {
        self.catch_up(t_us);
        if !self.limit.admits(self.len_packets(), self.len_bytes(), item.size_bytes()) {
            drop(item, DropCause::Queue);
        } else if item.info.ecn.is_l4s() {
            self.l.push_back(item);
        } else {
            self.c.push_back(item);
        }
    }

    fn dequeue(&mut self, t_us: u64, drop: &mut Dropper<'_, P>) -> Option<Queued<P>> {
        self.catch_up(t_us);
        loop {
            let (mut item, from_l) = self.take()?;
            if from_l {
                if self.l4s_saturated() && self.roll(self.p_c()) {
                    drop(item, DropCause::Aqm);
                    continue;
                }
                let step = self.l.len_packets() as u64 >= self.params.min_qlen_step
                    && t_us.saturating_sub(item.arrival_us) > self.params.step_thresh_us;
                let p_l = if step { 1.0 } else { self.p_cl() };
                if self.roll(p_l) {
                    let capable = item.mark_ce();
                    debug_assert!(capable, "the L queue holds only ECT(1) and CE");
                }
            } else if self.roll(self.p_c()) && !(self.params.ecn && !self.classic_overloaded() && item.mark_ce()) {
                drop(item, DropCause::Aqm);
                continue;
            }
            return Some(item);
        }
    }

    fn len_packets(&self) -> usize {
        self.l.len_packets() + self.c.len_packets()
    }

    fn len_bytes(&self) -> u64 {
        self.l.len_bytes() + self.c.len_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ecn::Ecn;
    use crate::queue::testing::{dequeue, enqueue, packet};
    use crate::queue::Aqm;

    fn dualpi2() -> DualPi2<u32> {
        DualPi2::new(QueueLimit::Infinite, DualPi2Params::default(), 5)
    }

    /// `n` packets of 1000 bytes with codepoint `ecn`, numbered from `first`, arriving at `t_us`.
    fn arrive(q: &mut DualPi2<u32>, first: u32, n: u32, ecn: Ecn, t_us: u64) {
        let mut dropped = Vec::new();
        for id in first..first + n {
            enqueue(q, packet(id, 1000, 0, ecn, t_us), &mut dropped);
        }
        assert!(dropped.is_empty());
    }

    /// Empties the queues at `t_us`: (packets sent, of them marked, dropped by the AQM).
    fn drain(q: &mut DualPi2<u32>, t_us: u64) -> (usize, usize, usize) {
        let mut dropped = Vec::new();
        let sent: Vec<Queued<u32>> = std::iter::from_fn(|| dequeue(q, t_us, &mut dropped)).collect();
        assert!(dropped.iter().all(|&(_, cause)| cause == DropCause::Aqm));
        (sent.len(), sent.iter().filter(|d| d.marked).count(), dropped.len())
    }

    /// 10 000 packets with codepoint `ecn` drained at `p'` = `p_base` (no update runs: the clock
    /// started at 0 and the first update is at 16 ms).
    fn at_base_probability(p_base: f64, ecn: Ecn) -> (usize, usize, usize) {
        let mut q = dualpi2();
        arrive(&mut q, 0, 10_000, ecn, 0);
        q.p_base = p_base;
        drain(&mut q, 0)
    }

    #[test]
    fn the_base_probability_follows_the_pi_update_and_couples_both_queues() {
        // A classic head that arrived at 0 and is not sent: 16 ms of delay at the first update,
        // 32 at the second. 1: 0.16·(0.016 − 0.015) + 3.2·0.016 = 0.05136; p_C = p'² = 0.0026378,
        // p_CL = 2·p' = 0.10272. 2: 0.16·0.017 + 3.2·0.016 = 0.05392, p' = 0.10528,
        // p_C = 0.0110839, p_CL = 0.21056.
        let mut q = dualpi2();
        arrive(&mut q, 0, 1, Ecn::NotEct, 0);
        q.catch_up(16_000);
        assert!((q.p_base - 0.05136).abs() < 1e-12, "p' {}", q.p_base);
        assert!((q.p_c() - 0.05136 * 0.05136).abs() < 1e-12 && (q.p_cl() - 0.10272).abs() < 1e-12);
        q.catch_up(32_000);
        assert!((q.p_base - 0.10528).abs() < 1e-12, "p' {}", q.p_base);
        assert!((q.p_c() - 0.0110838784).abs() < 1e-12 && (q.p_cl() - 0.21056).abs() < 1e-12);
        // p_C = (p_CL/k)² wherever p_CL has not saturated; p_CL stops at 1.
        for p_base in [0.0, 0.1, 0.3, 0.49] {
            q.p_base = p_base;
            assert!((q.p_c() - (q.p_cl() / 2.0).powi(2)).abs() < 1e-15);
        }
        q.p_base = 0.6;
        assert_eq!(q.p_cl(), 1.0);
    }

    #[test]
    fn classic_packets_see_p_squared_and_l4s_packets_k_p() {
        // p' = 0.3: p_C = 0.09, p_CL = 0.6. 99.99 % binomial intervals over 10 000 packets:
        // 900 ± 3.9·sqrt(10 000·0.09·0.91) = 900 ± 112, 6000 ± 3.9·49.0 = 6000 ± 191.
        let (sent, marked, dropped) = at_base_probability(0.3, Ecn::NotEct);
        assert_eq!((sent + dropped, marked), (10_000, 0));
        assert!((788..=1012).contains(&dropped), "dropped {dropped}");
        let (_, marked, dropped) = at_base_probability(0.3, Ecn::Ect0);
        assert_eq!(dropped, 0);
        assert!((788..=1012).contains(&marked), "marked {marked}");
        let (_, marked, dropped) = at_base_probability(0.3, Ecn::Ect1);
        assert_eq!(dropped, 0);
        assert!((5809..=6191).contains(&marked), "marked {marked}");
        // ecn=0: ECT(0) classic packets are dropped at p_C instead.
        let mut q = DualPi2::new(QueueLimit::Infinite, DualPi2Params { ecn: false, ..DualPi2Params::default() }, 5);
        arrive(&mut q, 0, 10_000, Ecn::Ect0, 0);
        q.p_base = 0.3;
        let (_, marked, dropped) = drain(&mut q, 0);
        assert_eq!(marked, 0);
        assert!((788..=1012).contains(&dropped), "dropped {dropped}");
    }

    #[test]
    fn overload_drops_from_both_queues_at_p_c() {
        // p' = 0.6 ≥ 1/k: p_C = 0.36 ≥ p_Cmax = 0.25. ECT(0) loses its ECN protection, and L
        // packets are dropped at p_C, the survivors all marked: 3600 ± 3.9·48 = 3600 ± 187.
        let (_, marked, dropped) = at_base_probability(0.6, Ecn::Ect0);
        assert_eq!(marked, 0);
        assert!((3413..=3787).contains(&dropped), "dropped {dropped}");
        let (sent, marked, dropped) = at_base_probability(0.6, Ecn::Ect1);
        assert_eq!(marked, sent);
        assert!((3413..=3787).contains(&dropped), "dropped {dropped}");
        // drop_on_overload=0: p' stops at 1/k = 0.5 however long the queue stands; then ECT(0)
        // is marked at 0.25 and nothing is dropped.
        let params = DualPi2Params { drop_on_overload: false, ..DualPi2Params::default() };
        let mut q = DualPi2::new(QueueLimit::Infinite, params, 5);
        arrive(&mut q, 0, 10_000, Ecn::Ect0, 0);
        q.catch_up(10_000_000);
        assert_eq!(q.p_base, 0.5);
        let (_, marked, dropped) = drain(&mut q, 10_000_000);
        assert_eq!(dropped, 0);
        // 2500 ± 3.9·43.3 = 2500 ± 169.
        assert!((2331..=2669).contains(&marked), "marked {marked}");
    }

    #[test]
    fn l4s_packets_are_marked_past_the_step_threshold() {
        // p' = 0 (no update before 16 ms): only the step marks. Sojourns of 1000 µs (not past
        // the 1 ms threshold) and 1001 µs.
        let mut q = dualpi2();
        arrive(&mut q, 0, 2, Ecn::Ect1, 0);
        assert!(!dequeue(&mut q, 1000, &mut Vec::new()).unwrap().marked);
        assert!(dequeue(&mut q, 1001, &mut Vec::new()).unwrap().marked);
        // min_qlen_step=1 (RFC 9332's Th_len): a lone L packet is not marked however long it
        // waited; of two, the first is.
        let params = DualPi2Params { min_qlen_step: 1, ..DualPi2Params::default() };
        let mut q = DualPi2::new(QueueLimit::Infinite, params, 5);
        arrive(&mut q, 0, 1, Ecn::Ect1, 0);
        assert!(!dequeue(&mut q, 5000, &mut Vec::new()).unwrap().marked);
        arrive(&mut q, 1, 2, Ecn::Ect1, 6000);
        assert!(dequeue(&mut q, 9000, &mut Vec::new()).unwrap().marked);
        assert!(!dequeue(&mut q, 9000, &mut Vec::new()).unwrap().marked);
    }

    #[test]
    fn ect1_and_ce_go_to_the_l4s_queue() {
        let mut q = dualpi2();
        let mut dropped = Vec::new();
        for (id, ecn) in [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce].into_iter().enumerate() {
            enqueue(&mut q, packet(id as u32, 1000, 0, ecn, 0), &mut dropped);
        }
        assert_eq!((q.l.len_packets(), q.c.len_packets()), (2, 2));
        assert_eq!(q.l.front().map(|d| d.packet), Some(2));
        assert_eq!(q.c.front().map(|d| d.packet), Some(0));
    }

    #[test]
    fn the_classic_queue_gets_its_protected_share() {
        // Both queues backlogged with 1000-byte packets: L first (credit 0), then C (credit
        // +10 000), then nine L (credit −80 000 back to 0) to each C: of 100 packets, C sends
        // the 2nd, 12th, 22nd, ..., 92nd.
        let mut q = dualpi2();
        arrive(&mut q, 0, 100, Ecn::Ect1, 0);
        arrive(&mut q, 100, 100, Ecn::NotEct, 0);
        let classic: Vec<usize> =
            (1..=100).filter(|_| dequeue(&mut q, 0, &mut Vec::new()).unwrap().packet >= 100).collect();
        assert_eq!(classic, vec![2, 12, 22, 32, 42, 52, 62, 72, 82, 92]);
    }

    #[test]
    fn catching_up_equals_a_timer_at_every_boundary() {
        for backlog in [0, 10] {
            let mut fast = dualpi2();
            let mut slow = dualpi2();
            for q in [&mut fast, &mut slow] {
                arrive(q, 0, backlog, Ecn::Ect0, 0);
                arrive(q, 100, backlog, Ecn::Ect1, 0);
                if backlog == 0 {
                    dequeue(q, 0, &mut Vec::new());
                }
                (q.p_base, q.qdelay_prev_us) = (0.3, 40_000);
            }
            let end_us = 3_600_000_000;
            fast.catch_up(end_us);
            let mut at_us = 16_000;
            while at_us <= end_us {
                slow.update(at_us);
                at_us += 16_000;
            }
            assert_eq!((fast.p_base, fast.qdelay_prev_us), (slow.p_base, slow.qdelay_prev_us));
            assert_eq!(fast.next_update_us, Some(at_us));
        }
    }

    #[test]
    fn the_limit_counts_both_queues() {
        let mut q = DualPi2::new(QueueLimit::Packets(2), DualPi2Params::default(), 1);
        let mut dropped = Vec::new();
        for (id, ecn) in [Ecn::Ect1, Ecn::NotEct, Ecn::Ect1].into_iter().enumerate() {
            enqueue(&mut q, packet(id as u32, 1000, 0, ecn, 0), &mut dropped);
        }
        assert_eq!(dropped, vec![(2, DropCause::Queue)]);
    }

    #[test]
    fn args_round_trip_and_errors_name_the_key() {
        let text = "target=5,tupdate=8,alpha=0.3,beta=4,k=1.5,step_thresh=0.5,min_qlen_step=1,\
                    classic_protection=20,drop_on_overload=0,ecn=0";
        let (aqm, limit) = Aqm::parse("dualpi2", text).unwrap();
        let want = DualPi2Params {
            target_us: 5_000,
            tupdate_us: 8_000,
            alpha: 0.3,
            beta: 4.0,
            k: 1.5,
            step_thresh_us: 500,
            min_qlen_step: 1,
            classic_protection: 20,
            drop_on_overload: false,
            ecn: false,
        };
        assert_eq!((aqm.clone(), limit), (Aqm::DualPi2(want), None));
        assert_eq!(aqm.args_text(), text);
        assert_eq!(
            DualPi2Params::default().to_string(),
            "target=15,tupdate=16,alpha=0.16,beta=3.2,k=2,step_thresh=1,min_qlen_step=0,classic_protection=10,\
             drop_on_overload=1,ecn=1"
        );
        for (args, key) in [
            ("k=-1", "dualpi2 k:"),
            ("classic_protection=101", "dualpi2 classic_protection:"),
            ("tupdate=0", "dualpi2 tupdate:"),
        ] {
            let err = Aqm::parse("dualpi2", args).unwrap_err();
            assert!(err.starts_with(key) && !err.contains('\n'), "{err}");
        }
    }
}
