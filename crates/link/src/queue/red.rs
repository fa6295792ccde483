//! RED, Random Early Detection (Floyd & Jacobson, "Random Early Detection Gateways for
//! Congestion Avoidance", IEEE/ACM ToN 1(4), 1993), in the gentle variant (Floyd, "Recommendation
//! on using the 'gentle_' variant of RED", 2000): a FIFO that drops (or marks) arrivals with a
//! probability that rises with the average queue length.
//!
//! - Average (§4, Fig. 2): at every arrival, `avg ← (1 − wq)·avg + wq·q`, `q` the packets waiting
//!   (the arrival not counted). An arrival that finds the queue empty instead decays the average
//!   for the idle time: `avg ← (1 − wq)^m·avg` with `m = idle time / s`, the number of packets
//!   the link could have sent meanwhile (Fig. 2's `m ← f(time − q_time)`).
//! - `s`, the time the link takes per packet, is learnt from the departures (Floyd's "typical
//!   transmission time of a small packet"; Linux derives it from the `bandwidth` and `avpkt` tc
//!   gives it, which a discipline here is not told): a dequeue that follows another with the
//!   queue backlogged in between measures one packet's service time, zero for packets sharing a
//!   delivery opportunity. `s` is their mean, each sample weighted 1/128 less per later sample
//!   (about the last 128 packets, so it follows a trace's changing rate). Until the link has
//!   sent two packets back to back `s` is unknown and an idle spell leaves `avg` as it was.
//! - Marking (§4, §7): below `min_th` nothing is dropped and `count = −1`. From `min_th` to
//!   `max_th`, `p_b = max_p·(avg − min_th)/(max_th − min_th)`, and with `count` the arrivals since
//!   the last mark (this one included), the arrival is dropped with
//!   `p_a = p_b/(1 − count·p_b)` (1 once `count·p_b ≥ 1`), which spaces drops evenly: the gap
//!   between two is uniform on 1 to `1/p_b − 1` arrivals (1 to 19 at `p_b` = 5 %) rather than
//!   geometric. Gentle: from
//!   `max_th` to `2·max_th`, `p_b` rises linearly from `max_p` to 1, with the same `count`
//!   spacing; at and above `2·max_th` (above `max_th` without `gentle`) every arrival is dropped.
//! - ECN (RFC 3168 §5): with `ecn=1` an ECN-capable arrival chosen by `p_a` is marked CE and
//!   queued instead of dropped; in the forced region every arrival is dropped, ECN-capable or
//!   not (ns-2's RED; Linux's marks there too unless `harddrop`). Marks alone do not stop
//!   traffic that ignores them: unresponsive ECT(0) at 120 % of a 12 Mbit/s link, marked in
//!   every region, waited 7.5 s on average in an unlimited queue over the second half of a
//!   one-minute run; dropped in the forced region it waits 30 ms (`2·max_th` packets).
//! - The limit: the arrival RED keeps (marked or not) is then dropped if the queue is full
//!   (`DropCause::Queue`), as in Linux, after it counted in `avg` and `count`.
//!
//! Parameters (`--uplink-queue red --uplink-queue-args ...`, thresholds in packets): `min_th` 5,
//! `max_th` 15 (`3·min_th` when only `min_th` is given), `max_p` 0.1, `wq` 0.002, `gentle` 1,
//! `ecn` 1 — Floyd's recommended values ("RED: Discussions of Setting Parameters", 1997, and
//! ns-2's defaults). RED has no Mahimahi or Linux default limit; it is 1000 packets (Linux's
//! default txqueuelen), or `4·max_th` if larger, so that the gentle region up to `2·max_th`
//! always fits.
//!
//! Deviations: thresholds count packets, not bytes (no byte mode); the arrival is not counted in
//! `q` (Linux's `qlen` before enqueue, the paper's "queue size" at arrival).

use std::fmt;

use super::fifo::Fifo;
use super::{Discipline, Dropper, QueueArgs, QueueLimit, Queued};
use crate::bounds::MAX_BUFFER;
use crate::event::DropCause;
use crate::rng::Rng;

/// How fast the estimate of the link's time per packet forgets: each sample weighs 1/128.
const SERVICE_TIME_GAIN: f64 = 1.0 / 128.0;

/// RED's parameters: Floyd's recommended values.
#[derive(Debug, Clone, PartialEq)]
pub struct RedParams {
    /// Below this average (packets) nothing is dropped.
    pub min_th: u64,
    /// At this average (packets) the drop probability reaches `max_p` (gentle: and rises to 1 at
    /// twice it).
    pub max_th: u64,
    /// The drop probability at `max_th`.
    pub max_p: f64,
    /// The weight of each arrival's queue length in the average.
    pub wq: f64,
    /// Rise from `max_p` to 1 between `max_th` and `2·max_th` instead of dropping everything
    /// above `max_th`.
    pub gentle: bool,
    /// Mark ECN-capable packets CE instead of dropping them, below the forced region.
    pub ecn: bool,
}

impl Default for RedParams {
    fn default() -> Self {
        RedParams { min_th: 5, max_th: 15, max_p: 0.1, wq: 0.002, gentle: true, ecn: true }
    }
}

impl RedParams {
    /// The limit when none is given: 1000 packets, or `4·max_th` if larger.
    pub fn default_limit(&self) -> QueueLimit {
        QueueLimit::Packets(self.max_th.saturating_mul(4).max(1000))
    }

    /// `min_th`, `max_th` (packets, `max_th` above `min_th`; `3·min_th` when only `min_th` is
    /// given, Floyd's rule), `max_p` in [0, 1], `wq` in (0, 1], `gentle` and `ecn` (1/0).
    pub fn from_args(args: &mut QueueArgs) -> Result<Self, String> {
        let d = RedParams::default();
        let min_th = args.count("min_th", d.min_th, 0, MAX_BUFFER - 1)?;
        let max_th = args.count("max_th", min_th.saturating_mul(3).clamp(min_th + 1, MAX_BUFFER), 1, MAX_BUFFER)?;
        if max_th <= min_th {
            return Err(format!("red max_th: must be above min_th ({min_th}), got '{max_th}'"));
        }
        let max_p = args.number("max_p", d.max_p, 0.0, 1.0)?;
        let wq = args.number("wq", d.wq, 0.0, 1.0)?;
        if wq == 0.0 {
            return Err("red wq: expected a number above 0 and at most 1, got '0'".to_string());
        }
        Ok(RedParams {
            min_th,
            max_th,
            max_p,
            wq,
            gentle: args.flag("gentle", d.gentle)?,
            ecn: args.flag("ecn", d.ecn)?,
        })
    }

    /// What RED does to an arrival at average queue length `avg` (§4, gentle 2000).
    fn region(&self, avg: f64) -> Region {
        let (min_th, max_th) = (self.min_th as f64, self.max_th as f64);
        if avg < min_th {
            Region::Below
        } else if avg < max_th {
            Region::Early(self.max_p * (avg - min_th) / (max_th - min_th))
        } else if self.gentle && avg < 2.0 * max_th {
            Region::Early(self.max_p + (1.0 - self.max_p) * (avg - max_th) / max_th)
        } else {
            Region::Forced
        }
    }
}

impl fmt::Display for RedParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "min_th={},max_th={},max_p={},wq={},gentle={},ecn={}",
            self.min_th,
            self.max_th,
            self.max_p,
            self.wq,
            u8::from(self.gentle),
            u8::from(self.ecn)
        )
    }
}

/// Where the average queue length lies.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Region {
    /// Below `min_th`: keep.
    Below,
    /// Drop with `p_a` from this `p_b`.
    Early(f64),
    /// Drop every arrival.
    Forced,
}

/// What happens to an arrival.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Verdict {
    Keep,
    /// Drop, or mark an ECN-capable packet.
    Signal,
    /// Drop whatever the codepoint.
    Drop,
}

/// §7: the probability of dropping the `count`-th arrival since the last drop, `p_b` given.
fn spaced_probability(p_b: f64, count: i64) -> f64 {
    let spent = count as f64 * p_b;
    if spent >= 1.0 {
        1.0
    } else {
        p_b / (1.0 - spent)
    }
}

#[derive(Debug)]
pub struct Red<P> {
    params: RedParams,
    limit: QueueLimit,
    fifo: Fifo<P>,
    /// Draws the random drops.
    rng: Rng,
    /// The average queue length, packets.
    avg: f64,
    /// Arrivals since the last drop while the average was in the early region; −1 below it.
    count: i64,
    /// While the queue is empty: since when (µs), or since the last arrival that found it so.
    idle_since_us: Option<u64>,
    /// When the last dequeue happened, if it left packets behind (the next one measures a
    /// service time).
    backlogged_since_us: Option<u64>,
    /// Decaying sums of the service times measured (µs) and of their number: `s` is their ratio.
    service_us_sum: f64,
    service_samples: f64,
}

impl<P> Red<P> {
    pub fn new(limit: QueueLimit, params: RedParams, seed: u64) -> Self {
        Red {
            params,
            limit,
            fifo: Fifo::default(),
            rng: Rng::new(seed),
            avg: 0.0,
            count: -1,
            idle_since_us: None,
            backlogged_since_us: None,
            service_us_sum: 0.0,
            service_samples: 0.0,
        }
    }

    /// The link's mean time per packet, µs, once measured.
    fn service_time_us(&self) -> Option<f64> {
        (self.service_samples > 0.0).then(|| self.service_us_sum / self.service_samples)
    }

    /// Folds an arrival at `t_us` into the average (§4).
    fn update_average(&mut self, t_us: u64) {
        if !self.fifo.is_empty() {
            self.avg += self.params.wq * (self.fifo.len_packets() as f64 - self.avg);
            return;
        }
        if let (Some(since_us), Some(s_us)) = (self.idle_since_us, self.service_time_us()) {
            if s_us > 0.0 {
                let m = t_us.saturating_sub(since_us) as f64 / s_us;
                self.avg *= (1.0 - self.params.wq).powf(m);
            }
        }
        // The idle time up to now is spent: if this arrival is dropped, the next decays from here.
        self.idle_since_us = Some(t_us);
    }

    /// What RED does with the arrival, updating `count` (§4, Fig. 2).
    fn verdict(&mut self) -> Verdict {
        match self.params.region(self.avg) {
            Region::Below => {
                self.count = -1;
                Verdict::Keep
            }
            Region::Early(p_b) => {
                self.count += 1;
                let p_a = spaced_probability(p_b, self.count);
                if p_a >= 1.0 || (p_a > 0.0 && self.rng.next_f64() < p_a) {
                    self.count = 0;
                    Verdict::Signal
                } else {
                    Verdict::Keep
                }
            }
            Region::Forced => {
                self.count = 0;
                Verdict::Drop
            }
        }
    }
}

impl<P: Send + fmt::Debug> Discipline<P> for Red<P> {
    fn enqueue(&mut self, t_us: u64, mut item: Queued<P>, drop: &mut Dropper<'_, P>) {
        self.update_average(t_us);
        let dropped = match self.verdict() {
            Verdict::Keep => false,
            Verdict::Signal => !(self.params.ecn && item.mark_ce()),
            Verdict::Drop => true,
        };
        if dropped {
            drop(item, DropCause::Aqm);
            return;
        }
        if !self.limit.admits(self.fifo.len_packets(), self.fifo.len_bytes(), item.size_bytes()) {
            drop(item, DropCause::Queue);
            return;
        }
        self.fifo.push_back(item);
        self.idle_since_us = None;
    }

    fn dequeue(&mut self, t_us: u64, _drop: &mut Dropper<'_, P>) -> Option<Queued<P>> {
        let item = self.fifo.pop_front()?;
        if let Some(since_us) = self.backlogged_since_us {
            let keep = 1.0 - SERVICE_TIME_GAIN;
            self.service_us_sum = keep * self.service_us_sum + t_us.saturating_sub(since_us) as f64;
            self.service_samples = keep * self.service_samples + 1.0;
        }
        if self.fifo.is_empty() {
            self.backlogged_since_us = None;
            self.idle_since_us = Some(t_us);
        } else {
            self.backlogged_since_us = Some(t_us);
        }
        Some(item)
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

    fn red(params: RedParams) -> Red<u32> {
        Red::new(QueueLimit::Infinite, params, 11)
    }

    /// Enqueues packet `id` (1500 bytes, codepoint `ecn`) at `t_us`; the cause if it was dropped.
    fn arrive(q: &mut Red<u32>, id: u32, ecn: Ecn, t_us: u64) -> Option<DropCause> {
        let mut dropped = Vec::new();
        enqueue(q, packet(id, 1500, 0, ecn, t_us), &mut dropped);
        dropped.pop().map(|(_, cause)| cause)
    }

    #[test]
    fn the_average_follows_arrivals_and_decays_while_idle() {
        let mut q = red(RedParams { wq: 0.25, ..RedParams::default() });
        // Arrivals find 0, 1, 2, 3 packets: avg = 0, 0.25, 0.75·0.25 + 0.25·2 = 0.6875,
        // 0.75·0.6875 + 0.25·3 = 1.265625.
        let mut avgs = Vec::new();
        for id in 0..4 {
            arrive(&mut q, id, Ecn::NotEct, 0);
            avgs.push(q.avg);
        }
        assert_eq!(avgs, vec![0.0, 0.25, 0.6875, 1.265625]);
        // The link sends one packet a ms: three back-to-back departures measure s = 1000 µs.
        for t_us in [1000, 2000, 3000, 4000] {
            dequeue(&mut q, t_us, &mut Vec::new());
        }
        assert!((q.service_time_us().unwrap() - 1000.0).abs() < 1e-9);
        // Idle from 4 ms to 14 ms: m = 10 packet times, avg = 1.265625·0.75^10.
        arrive(&mut q, 4, Ecn::NotEct, 14_000);
        assert!((q.avg - 1.265625 * 0.75f64.powi(10)).abs() < 1e-12, "avg {}", q.avg);
    }

    #[test]
    fn probabilities_at_chosen_averages() {
        let gentle = RedParams::default();
        // min_th 5, max_th 15, max_p 0.1: p_b = 0.1·(10 − 5)/10 = 0.05 at 10 packets; gentle,
        // 0.1 + 0.9·(22.5 − 15)/15 = 0.55 at 22.5; everything dropped from 30 = 2·max_th.
        assert_eq!(gentle.region(4.99), Region::Below);
        assert_eq!(gentle.region(5.0), Region::Early(0.0));
        assert_eq!(gentle.region(10.0), Region::Early(0.05));
        assert_eq!(gentle.region(15.0), Region::Early(0.1));
        assert_eq!(gentle.region(22.5), Region::Early(0.55));
        assert_eq!(gentle.region(30.0), Region::Forced);
        let harsh = RedParams { gentle: false, ..RedParams::default() };
        assert_eq!(harsh.region(15.0), Region::Forced);
        // p_a = p_b/(1 − count·p_b): 0.05 at count 0, 0.05/(1 − 0.5) = 0.1 at 10, 1 from 20.
        assert_eq!(spaced_probability(0.05, 0), 0.05);
        assert!((spaced_probability(0.05, 10) - 0.1).abs() < 1e-15);
        assert_eq!(spaced_probability(0.05, 20), 1.0);
        assert_eq!(spaced_probability(0.55, 2), 1.0);
    }

    #[test]
    fn drops_are_spaced_uniformly_between_one_and_nineteen_arrivals() {
        // avg held at 10 packets (10 queued, one leaving per arrival): p_b = 0.05. The j-th
        // arrival after a mark is marked with 0.05/(1 − 0.05·j), so the gap g is
        // P(g) = prod_{j<g}(1 − 0.05/(1 − 0.05j))·0.05/(1 − 0.05g) = 0.05/0.95 = 1/19 for
        // g = 1..19, and never more than 19 (p_a = 1 at j = 20).
        let mut q = red(RedParams::default());
        for id in 0..10 {
            arrive(&mut q, id, Ecn::Ect0, 0);
        }
        // As if the last arrival had just been marked.
        (q.avg, q.count) = (10.0, 0);
        let mut gaps = [0usize; 20];
        let mut since_mark = 0;
        for id in 10..200_010 {
            arrive(&mut q, id, Ecn::Ect0, 0);
            since_mark += 1;
            if q.count == 0 {
                gaps[since_mark - 1] += 1;
                since_mark = 0;
            }
            dequeue(&mut q, 0, &mut Vec::new());
        }
        assert_eq!(q.avg, 10.0);
        assert_eq!(gaps[19], 0, "no gap of 20");
        // 200 000 arrivals make 200 000/10 = 20 000 gaps (mean 10, variance (19² − 1)/12 = 30),
        // ± 5·sqrt(200 000·30/10³) = ± 387; each length has probability 1/19: per length
        // total/19 ± 4.4·sqrt(total·(1/19)(18/19)), ± 138 (99.999 %, for 19 lengths at once).
        let total: usize = gaps.iter().sum();
        assert!((19_613..=20_387).contains(&total), "{total} gaps");
        let expected = total as f64 / 19.0;
        let bound = 4.4 * (total as f64 * (1.0 / 19.0) * (18.0 / 19.0)).sqrt();
        for (len, &n) in gaps[..19].iter().enumerate() {
            assert!((n as f64 - expected).abs() < bound, "gap {}: {n} of {total}", len + 1);
        }
    }

    #[test]
    fn early_drops_mark_ect_and_forced_drops_drop_everything() {
        let mut q = Red::new(QueueLimit::Packets(40), RedParams::default(), 3);
        for id in 0..35 {
            arrive(&mut q, id, Ecn::NotEct, 0);
        }
        // In the early region with count·p_b ≥ 1 (p_a = 1): ECT(0) is marked and queued, Not-ECT
        // dropped by the AQM.
        (q.avg, q.count) = (25.0, 10);
        assert_eq!(arrive(&mut q, 35, Ecn::NotEct, 0), Some(DropCause::Aqm));
        q.count = 10;
        assert_eq!(arrive(&mut q, 36, Ecn::Ect0, 0), None);
        assert_eq!(q.len_packets(), 36);
        // At 2·max_th every arrival is dropped, ECN-capable or not.
        q.avg = 30.0;
        assert_eq!(arrive(&mut q, 37, Ecn::Ect0, 0), Some(DropCause::Aqm));
        assert_eq!(arrive(&mut q, 38, Ecn::Ect1, 0), Some(DropCause::Aqm));
        // Below min_th nothing is dropped early and count is reset; the limit still binds.
        q.avg = 0.0;
        for id in 39..43 {
            assert_eq!(arrive(&mut q, id, Ecn::NotEct, 0), None);
        }
        assert_eq!(arrive(&mut q, 43, Ecn::NotEct, 0), Some(DropCause::Queue));
        assert_eq!(q.count, -1);
    }

    #[test]
    fn args_round_trip_and_errors_name_the_key() {
        let (aqm, limit) = Aqm::parse("red", "min_th=20,max_th=300,max_p=0.02,wq=0.001,gentle=0,ecn=0").unwrap();
        let want = RedParams { min_th: 20, max_th: 300, max_p: 0.02, wq: 0.001, gentle: false, ecn: false };
        assert_eq!((aqm.clone(), limit), (Aqm::Red(want), None));
        assert_eq!(aqm.default_limit(), QueueLimit::Packets(1200));
        assert_eq!(Aqm::parse("red", &aqm.args_text()).unwrap().0, aqm);
        assert_eq!(RedParams::default().to_string(), "min_th=5,max_th=15,max_p=0.1,wq=0.002,gentle=1,ecn=1");
        assert_eq!(RedParams::default().default_limit(), QueueLimit::Packets(1000));
        // A min_th above the default max_th moves max_th's default with it.
        assert!(Aqm::parse("red", "min_th=40").is_ok());
        for (args, key) in [
            ("max_th=5", "red max_th: must be above min_th (5)"),
            ("min_th=9,max_th=3", "red max_th:"),
            ("max_p=1.5", "red max_p:"),
            ("wq=0", "red wq:"),
            ("gentle=maybe", "red gentle:"),
        ] {
            let err = Aqm::parse("red", args).unwrap_err();
            assert!(err.starts_with(key) && !err.contains('\n'), "{err}");
        }
    }
}
