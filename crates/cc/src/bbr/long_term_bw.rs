//! BBR's long-term bandwidth estimate: Linux's policer detection (`lt_bw`, net/ipv4/tcp_bbr.c
//! since 4.9; what Pantheon's `bbr` runs), which draft-00 and the ACM Queue article leave out.
//!
//! The idea: a token-bucket policer (Flach et al., "An Internet-Wide Analysis of Traffic
//! Policing", SIGCOMM 2016) lets bursts through at the link's rate while tokens last and then
//! drops whatever exceeds its contracted rate, so delivery-rate samples keep showing the link's
//! rate, BBR's max filter believes them, and it sends above the policed rate at a heavy loss rate
//! for as long as the flow lasts. Over a few round trips, though, the rate actually delivered is
//! the policer's, and steady: when two consecutive sampling intervals, each of 4 to 16 round
//! trips ending in a loss, both lost at least 50/256 (~20%) of what they delivered and their
//! delivery rates agree within 1/8 (or 4 kbit/s), the flow is policed, and BBR uses their average
//! as its bandwidth (with pacing gain 1 in ProbeBW) for 48 round trips before it probes again.
//!
//! Sampling starts at a loss; an application-limited sample or an interval that runs past 16
//! round trips without qualifying throws the intervals away (their rate would be an
//! underestimate), an interval too lossless to qualify starts the next one where it stands.
//! Rates are bytes delivered over time between the intervals' ends; the loss rate is bytes lost
//! over bytes delivered (Linux counts packets; pantheon-udp's are all one size).
//!
//! Deviation: Linux also starts an interval when the sender's RTO fires (`bbr_set_state` on
//! TCP_CA_Loss); here the controller sees a timeout's losses as losses and nothing more
//! (crates/cc/src/sent_packets.rs), so an interval starts at any loss.

/// An interval spans at least this many round trips (`bbr_lt_intvl_min_rtts`)...
const MIN_INTERVAL_ROUNDS: u32 = 4;
/// ...and is abandoned past this many.
const MAX_INTERVAL_ROUNDS: u32 = 4 * MIN_INTERVAL_ROUNDS;
/// An interval qualifies when it lost at least this share of what it delivered
/// (`bbr_lt_loss_thresh` = 50 / 256).
const LOSS_THRESHOLD: f64 = 50.0 / 256.0;
/// Two intervals' rates agree within this share of the first (`bbr_lt_bw_ratio`, 1/8)...
const RATE_RATIO: f64 = 1.0 / 8.0;
/// ...or within this (`bbr_lt_bw_diff`, 4000 bit/s).
const RATE_DIFF_BPS: u64 = 4_000;
/// The estimate is used for this many round trips in ProbeBW (`bbr_lt_bw_max_rtts`).
const MAX_USE_ROUNDS: u32 = 48;
/// An interval shorter than this is too short to time (Linux's 1 ms clock).
const MIN_INTERVAL_US: u64 = 1_000;

/// What BBR knows when an acknowledgement arrives, for the detector.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub now_us: u64,
    /// This acknowledgement began a new round trip.
    pub round_start: bool,
    pub in_probe_bw: bool,
    pub app_limited: bool,
    /// Bytes declared lost since the previous acknowledgement.
    pub lost_bytes: u64,
    /// The flow's bytes delivered and declared lost so far.
    pub delivered_total_bytes: u64,
    pub lost_total_bytes: u64,
}

/// What the estimate did on this acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The flow is policed: use `bw_bps()` from now on.
    Policed,
    /// 48 round trips are over: probe the path again.
    Expired,
}

#[derive(Debug, Clone, Default)]
pub struct LongTermBw {
    /// An interval is open (it began at a loss).
    sampling: bool,
    /// Round trips into the open interval, or, while the estimate is in use, in ProbeBW since.
    rounds: u32,
    /// The previous interval's rate, 0 if none; the estimate itself once in use.
    bw_bps: u64,
    in_use: bool,
    /// Where the open interval began.
    start_us: u64,
    start_delivered_bytes: u64,
    start_lost_bytes: u64,
}

impl LongTermBw {
    /// The policed rate, once detected.
    pub fn bw_bps(&self) -> Option<u64> {
        self.in_use.then_some(self.bw_bps)
    }

    /// Linux's `bbr_lt_bw_sampling`, on every acknowledgement that gave a rate sample.
    pub fn on_ack(&mut self, s: &Sample) -> Option<Change> {
        if self.in_use {
            if s.in_probe_bw && s.round_start {
                self.rounds += 1;
                if self.rounds >= MAX_USE_ROUNDS {
                    self.reset();
                    return Some(Change::Expired);
                }
            }
            return None;
        }
        if !self.sampling {
            if s.lost_bytes == 0 {
                return None;
            }
            self.start_interval(s);
            self.sampling = true;
        }
        if s.app_limited {
            self.reset();
            return None;
        }
        if s.round_start {
            self.rounds += 1;
        }
        if self.rounds < MIN_INTERVAL_ROUNDS {
            return None;
        }
        if self.rounds > MAX_INTERVAL_ROUNDS {
            self.reset();
            return None;
        }
        if s.lost_bytes == 0 {
            return None;
        }
        let delivered_bytes = s.delivered_total_bytes - self.start_delivered_bytes;
        let lost_bytes = s.lost_total_bytes - self.start_lost_bytes;
        if delivered_bytes == 0 || (lost_bytes as f64) < LOSS_THRESHOLD * delivered_bytes as f64 {
            return None;
        }
        let elapsed_us = s.now_us.saturating_sub(self.start_us);
        if elapsed_us < MIN_INTERVAL_US {
            return None;
        }
        self.interval_done(crate::rate_bps(delivered_bytes as f64, elapsed_us as f64), s)
    }

    /// Linux's `bbr_lt_bw_interval_done`: a qualifying interval ended at rate `bw_bps`.
    fn interval_done(&mut self, bw_bps: u64, s: &Sample) -> Option<Change> {
        if self.bw_bps > 0 {
            let diff_bps = bw_bps.abs_diff(self.bw_bps);
            if diff_bps as f64 <= RATE_RATIO * self.bw_bps as f64 || diff_bps <= RATE_DIFF_BPS {
                self.bw_bps = (bw_bps + self.bw_bps) / 2;
                self.in_use = true;
                self.rounds = 0;
                return Some(Change::Policed);
            }
        }
        self.bw_bps = bw_bps;
        self.start_interval(s);
        None
    }

    fn start_interval(&mut self, s: &Sample) {
        self.start_us = s.now_us;
        self.start_delivered_bytes = s.delivered_total_bytes;
        self.start_lost_bytes = s.lost_total_bytes;
        self.rounds = 0;
    }

    /// Forget everything (Linux's `bbr_reset_lt_bw_sampling`); the next loss starts afresh.
    fn reset(&mut self) {
        *self = LongTermBw::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flow policed to 12 Mbit/s (1500 B/ms delivered) losing 25% of what it sends: one
    /// acknowledgement a ms, a round trip every 40 ms, a loss every 4th ms.
    struct Policed {
        now_us: u64,
        delivered: u64,
        lost: u64,
    }

    impl Policed {
        fn step(&mut self, lt: &mut LongTermBw, loss_rate_per_4_ms: u64) -> Option<Change> {
            self.now_us += 1_000;
            self.delivered += 1_500;
            let ms = self.now_us / 1_000;
            let lost_bytes = if ms.is_multiple_of(4) { 1_500 * loss_rate_per_4_ms } else { 0 };
            self.lost += lost_bytes;
            lt.on_ack(&Sample {
                now_us: self.now_us,
                round_start: ms.is_multiple_of(40),
                in_probe_bw: true,
                app_limited: false,
                lost_bytes,
                delivered_total_bytes: self.delivered,
                lost_total_bytes: self.lost,
            })
        }
    }

    #[test]
    fn two_lossy_intervals_at_one_rate_set_the_policed_rate_for_48_rounds() {
        let mut lt = LongTermBw::default();
        let mut path = Policed { now_us: 0, delivered: 0, lost: 0 };
        let mut next_change = |lt: &mut LongTermBw| loop {
            if let Some(c) = path.step(lt, 1) {
                return (path.now_us, c);
            }
            assert!(path.now_us < 10_000_000, "no change in 10 s");
        };
        // Sampling starts at the first loss (4 ms); each interval needs 4 round starts (160 ms):
        // the first ends at 164 ms or so, the second 160 ms later.
        let (policed_us, change) = next_change(&mut lt);
        assert_eq!(change, Change::Policed);
        assert!((300_000..=340_000).contains(&policed_us), "{policed_us}");
        assert!(lt.bw_bps().unwrap().abs_diff(12_000_000) < 120_000, "{:?}", lt.bw_bps());
        // 48 round trips later (1.92 s) it expires.
        let (expired_us, change) = next_change(&mut lt);
        assert_eq!(change, Change::Expired);
        assert!((expired_us - policed_us).abs_diff(48 * 40_000) <= 40_000, "{expired_us}");
        assert_eq!(lt.bw_bps(), None);
    }

    #[test]
    fn light_losses_never_qualify() {
        // One packet lost in every 8 delivered: 12.5%, under 50/256.
        let mut lt = LongTermBw::default();
        let mut path = Policed { now_us: 0, delivered: 0, lost: 0 };
        for i in 0..5_000 {
            let lost = u64::from(i % 2 == 0);
            assert_eq!(path.step(&mut lt, lost), None);
        }
        assert_eq!(lt.bw_bps(), None);
    }

    #[test]
    fn an_application_limited_sample_discards_the_intervals() {
        let mut lt = LongTermBw::default();
        let mut path = Policed { now_us: 0, delivered: 0, lost: 0 };
        for _ in 0..200 {
            path.step(&mut lt, 1);
        }
        assert!(lt.sampling && lt.bw_bps > 0, "the first interval is done");
        lt.on_ack(&Sample {
            now_us: path.now_us + 1,
            round_start: false,
            in_probe_bw: true,
            app_limited: true,
            lost_bytes: 0,
            delivered_total_bytes: path.delivered,
            lost_total_bytes: path.lost,
        });
        assert!(!lt.sampling && lt.bw_bps == 0);
    }

    #[test]
    fn rates_that_disagree_start_over() {
        // The first interval at 12 Mbit/s, the second at 6: no estimate, the second's rate kept.
        let mut lt = LongTermBw::default();
        let mut path = Policed { now_us: 0, delivered: 0, lost: 0 };
        while lt.bw_bps == 0 {
            path.step(&mut lt, 1);
        }
        let first_bps = lt.bw_bps;
        let mut changes = Vec::new();
        for i in 0.. {
            if lt.bw_bps != first_bps || i == 1_000 {
                break;
            }
            // Half the deliveries: an acknowledgement every other ms.
            if i % 2 == 0 {
                path.delivered -= 1_500;
            }
            changes.extend(path.step(&mut lt, 1));
        }
        assert!(changes.is_empty(), "{changes:?}");
        assert!(lt.bw_bps.abs_diff(first_bps / 2) < first_bps / 10, "{} against {first_bps}", lt.bw_bps);
    }
}
