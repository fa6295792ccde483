//! Sprout (Winstein, Sivaraman & Balakrishnan, "Stochastic Forecasts Achieve High Throughput and
//! Low Delay over Cellular Networks", NSDI 2013).
//!
//! The idea: a cellular link's rate changes too fast to track by probing, but its deliveries can
//! be *forecast*. Sprout models the link as a Poisson process whose rate does a random walk with
//! sticky outages, infers the rate's distribution from the arrivals of every 20 ms tick, and
//! forecasts cautiously — the deliveries the link will exceed with 95% probability over the next
//! 160 ms. The sender then keeps in the network only what that forecast says will be delivered
//! within the delay target (100 ms): throughput when the link is good, a short queue when it
//! fades.
//!
//! Sections implemented (the model, filter and forecast are in `forecast.rs`):
//! - §3.1–3.3 the link model, the Bayesian filter over 256 rate bins with a precomputed
//!   transition matrix, the 5th-percentile cumulative forecast over 8 ticks.
//! - §3.4 the sender's window: send a packet only if, by the forecast, it will have left the link
//!   within the target of 100 ms. With T the end of the last tick observed (the forecast's
//!   origin), F(x) the cautious cumulative deliveries x after T (linear between ticks, held at
//!   the last tick beyond 160 ms), r_last the receiver's time of the latest arrival reported and
//!   r_now the receiver's time now, the packets queued are those sent and not yet seen by the
//!   receiver minus those the forecast says it has seen since r_last — (in flight) −
//!   (F(r_now − T) − F(r_last − T)) — and the window, counted in the driver's in-flight packets,
//!   is F(r_now + 100 ms − T) − F(r_last − T): the forecast deliveries in the next 100 ms plus
//!   what the queued-packet estimate subtracts.
//!
//! Deviation (where the filter runs): in the paper the receiver runs the filter and sends the
//! forecast back. Here the sender runs it from the per-packet acknowledgements, each carrying the
//! receiver's arrival time (`Acked::peer_recv_us`): ticks are laid on the receiver's clock from
//! its first arrival, and a tick's count is the packets whose arrival times fall in it. The
//! filter sees the same arrivals the receiver would, so the forecast is the same function of the
//! same data, delayed by the ack path's one-way delay — which the paper's forecast also is, since
//! it travels back to the sender over that path. A tick is closed when an acknowledgement
//! arrives for a packet received after its end, or — when nothing arrives, as in an outage — by a
//! timer one tick after the tick's arrivals were due at the sender (tick end + the smallest ack
//! lag seen + τ); arrivals reported after their tick was closed count in the current tick.
//!
//! Deviation (receiver's "now"): the sender cannot tell the receiver's clock from its own plus
//! the ack path's delay. It places r_now at its own time minus the smallest lag (ack time −
//! receiver time) seen, which is behind the receiver's real clock by the ack path's propagation
//! delay: Sprout assumes fewer deliveries since r_last than really happened, erring cautious,
//! as the paper's sender does by using a forecast as of its arrival.
//!
//! Deviation (idle link): §3.2's observation assumes the link had something to send all tick;
//! the paper's sender announces when it stops sending so the receiver can discount idle time.
//! Here a tick counts as a full observation only if the link had a backlog throughout it: some
//! packet not delivered by the tick's end had reached the bottleneck before the tick began —
//! with the bottleneck next to the receiver (Mahimahi's and pantheon-emu's order: delay, then
//! queue and link), a packet sent at s reaches it at about s + (smallest one-way delay seen) on
//! the receiver's clock. The packet tested is the one whose arrival closes the tick, or for a
//! tick closed by the timer the oldest packet still in flight. Other ticks are censored: k
//! arrivals say the rate was at least k per tick (likelihood P(K ≥ k)). Without this, a window
//! too small to fill the pipe would teach the filter a lower rate, shrinking the window further.
//!
//! Deviation (probe): with the forecast at zero (an outage) the window is still one packet, so
//! that an empty network always holds a probe whose arrival ends the outage in the filter.
//!
//! Constants: σ = 200 packets/s per √s, λz = 1 /s, 256 bins up to 1000 packets/s, τ = 20 ms,
//! 8-tick forecast at the 5th percentile, target 100 ms (§3, §4); window before the first
//! forecast 10 packets (RFC 6928); the window is re-evaluated every 5 ms (a quarter tick) since
//! r_now moves between arrivals. Configurable: `target_ms`, `max_rate_pps`, `bins`,
//! `initial_cwnd_packets`, `mss_bytes`. The paper's 1000 packets/s top bin is 11.7 Mbit/s of
//! 1464-byte packets: a faster link looks to the filter like a 1000 packets/s one.
//!
//! On a fixed-rate link the cautious forecast is about 83% of the deliveries over 100 ms: Sprout
//! fills the link while that exceeds the BDP and under-uses it beyond (docs/cc.md, "Sprout", with
//! the figures measured over pantheon-emu).
//!
//! Driver: window only, and a timer (tick closing and re-evaluation).

pub mod forecast;

use self::forecast::{LinkModel, LinkModelConfig, FORECAST_TICKS};
use crate::params::{Params, SpecError};
use crate::{Acked, CongestionControl, Decision, Lost, Sent, DEFAULT_INITIAL_CWND_PACKETS, DEFAULT_MSS_BYTES};

/// How often the window is re-evaluated between events, µs.
const REFRESH_US: u64 = 5_000;
/// Packets whose send times are remembered, to find the oldest one in flight (a power of two,
/// far above any window the forecast allows: 160 ms at the top rate).
const RING_PACKETS: usize = 1 << 14;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SproutConfig {
    pub mss_bytes: u64,
    pub initial_cwnd_packets: u64,
    /// The delay target: packets sent now should leave the link within this (§3.4).
    pub target_us: u64,
    pub link: LinkModelConfig,
}

impl Default for SproutConfig {
    fn default() -> Self {
        SproutConfig {
            mss_bytes: DEFAULT_MSS_BYTES,
            initial_cwnd_packets: DEFAULT_INITIAL_CWND_PACKETS,
            target_us: 100_000,
            link: LinkModelConfig::default(),
        }
    }
}

impl SproutConfig {
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let d = SproutConfig::default();
        let bins = p.u64_at_least("bins", 2, d.link.bins as u64)?;
        if bins > 1024 {
            return Err(SpecError(format!("sprout: bins must be <= 1024, got {bins}")));
        }
        Ok(SproutConfig {
            mss_bytes: p.u64_at_least("mss_bytes", 1, d.mss_bytes)?,
            initial_cwnd_packets: p.u64_at_least("initial_cwnd_packets", 1, d.initial_cwnd_packets)?,
            target_us: (p.positive_f64("target_ms", d.target_us as f64 / 1000.0)? * 1000.0) as u64,
            link: LinkModelConfig {
                max_rate_pps: p.positive_f64("max_rate_pps", d.link.max_rate_pps)?,
                bins: bins as usize,
                ..d.link
            },
        })
    }
}

#[derive(Debug, Clone)]
pub struct Sprout {
    config: SproutConfig,
    tick_us: i64,
    model: LinkModel,
    /// The cautious cumulative deliveries 1..8 ticks after `origin_r_us`, packets.
    forecast: [f64; FORECAST_TICKS],
    has_forecast: bool,
    /// Receiver-clock start of the tick being counted; `None` before the first arrival.
    tick_start_r_us: Option<i64>,
    /// Arrivals counted in that tick.
    count: u64,
    /// Receiver-clock end of the last tick observed: where the forecast starts.
    origin_r_us: i64,
    /// Latest receiver arrival time reported, receiver clock.
    last_recv_r_us: i64,
    /// Smallest (ack time − receiver arrival time): the ack path's delay plus the clocks' offset.
    min_ack_lag_us: i64,
    /// Smallest (receiver arrival time − send time): the forward path's delay plus the offset.
    min_owd_us: i64,
    /// Send time of each of the last `RING_PACKETS` sequence numbers, and whether it is still
    /// in flight.
    sent_us: Box<[u64]>,
    in_flight: Box<[bool]>,
    /// The oldest sequence number possibly in flight, and the next to be sent.
    oldest_seq: u64,
    next_seq: u64,
    cwnd_bytes: u64,
    wake_at_us: Option<u64>,
    ticks_observed: u64,
    ticks_censored: u64,
}

impl Sprout {
    pub fn new(config: SproutConfig) -> Self {
        Sprout {
            config,
            tick_us: config.link.tick_us as i64,
            model: LinkModel::new(config.link),
            forecast: [0.0; FORECAST_TICKS],
            has_forecast: false,
            tick_start_r_us: None,
            count: 0,
            origin_r_us: 0,
            last_recv_r_us: i64::MIN,
            min_ack_lag_us: i64::MAX,
            min_owd_us: i64::MAX,
            sent_us: vec![0; RING_PACKETS].into_boxed_slice(),
            in_flight: vec![false; RING_PACKETS].into_boxed_slice(),
            oldest_seq: 0,
            next_seq: 0,
            cwnd_bytes: config.initial_cwnd_packets * config.mss_bytes,
            wake_at_us: None,
            ticks_observed: 0,
            ticks_censored: 0,
        }
    }

    pub fn model(&self) -> &LinkModel {
        &self.model
    }

    /// The cautious forecast in use: cumulative deliveries 1..8 ticks after its origin.
    pub fn forecast(&self) -> Option<&[f64; FORECAST_TICKS]> {
        self.has_forecast.then_some(&self.forecast)
    }

    /// Ticks observed so far, and how many of them were censored (the link idled).
    pub fn ticks(&self) -> (u64, u64) {
        (self.ticks_observed, self.ticks_censored)
    }

    /// F(x): cautious deliveries within `x_us` of the forecast's origin.
    fn deliveries_within(&self, x_us: i64) -> f64 {
        if x_us <= 0 {
            return 0.0;
        }
        let ticks = x_us as f64 / self.tick_us as f64;
        let whole = ticks.floor() as usize;
        if whole >= FORECAST_TICKS {
            return self.forecast[FORECAST_TICKS - 1];
        }
        let below = if whole == 0 { 0.0 } else { self.forecast[whole - 1] };
        below + (ticks - whole as f64) * (self.forecast[whole] - below)
    }

    fn slot(seq: u64) -> usize {
        (seq as usize) & (RING_PACKETS - 1)
    }

    fn resolve(&mut self, seq: u64) {
        if seq >= self.oldest_seq && seq < self.next_seq {
            self.in_flight[Self::slot(seq)] = false;
        }
        while self.oldest_seq < self.next_seq && !self.in_flight[Self::slot(self.oldest_seq)] {
            self.oldest_seq += 1;
        }
    }

    /// Whether the bottleneck held a packet from before `start_r_us` (receiver clock) that was
    /// not delivered before the tick's end — the link was busy all tick.
    fn backlogged_since(&self, sent_us: u64, start_r_us: i64) -> bool {
        sent_us as i64 + self.min_owd_us <= start_r_us
    }

    /// Observes the tick being counted and starts the next one.
    fn close_tick(&mut self, backlogged: bool) {
        let start = self.tick_start_r_us.expect("a tick is open");
        self.model.tick(self.count, !backlogged);
        self.ticks_observed += 1;
        self.ticks_censored += u64::from(!backlogged);
        self.count = 0;
        self.origin_r_us = start + self.tick_us;
        self.tick_start_r_us = Some(self.origin_r_us);
        self.model.cautious_forecast(&mut self.forecast);
        self.has_forecast = true;
    }

    /// Sender-clock time by which the open tick's arrivals are overdue.
    fn tick_deadline_us(&self) -> Option<u64> {
        self.tick_start_r_us.map(|start| (start + 2 * self.tick_us + self.min_ack_lag_us).max(0) as u64)
    }

    fn update(&mut self, now_us: u64) {
        let mss = self.config.mss_bytes;
        if self.has_forecast {
            let r_now = now_us as i64 - self.min_ack_lag_us;
            let allowed = self.deliveries_within(r_now + self.config.target_us as i64 - self.origin_r_us)
                - self.deliveries_within(self.last_recv_r_us - self.origin_r_us);
            self.cwnd_bytes = (allowed.floor() as u64).max(1) * mss;
        }
        self.wake_at_us = self.tick_deadline_us().map(|d| d.min(now_us + REFRESH_US).max(now_us + 1));
    }
}

impl CongestionControl for Sprout {
    fn name(&self) -> &'static str {
        "sprout"
    }

    fn on_sent(&mut self, e: &Sent) {
        if e.seq >= self.oldest_seq + RING_PACKETS as u64 {
            // Older packets than the ring remembers are taken as resolved.
            self.oldest_seq = e.seq + 1 - RING_PACKETS as u64;
        }
        let slot = Self::slot(e.seq);
        self.sent_us[slot] = e.now_us;
        self.in_flight[slot] = true;
        self.next_seq = self.next_seq.max(e.seq + 1);
    }

    fn on_ack(&mut self, e: &Acked) {
        let recv_r_us = e.peer_recv_us as i64;
        self.min_ack_lag_us = self.min_ack_lag_us.min(e.now_us as i64 - recv_r_us);
        self.min_owd_us = self.min_owd_us.min(recv_r_us - e.sent_us as i64);
        self.last_recv_r_us = self.last_recv_r_us.max(recv_r_us);
        self.resolve(e.seq);
        let start = *self.tick_start_r_us.get_or_insert(recv_r_us);
        let mut start = start;
        while recv_r_us >= start + self.tick_us {
            let backlogged = self.backlogged_since(e.sent_us, start);
            self.close_tick(backlogged);
            start += self.tick_us;
        }
        self.count += 1;
        self.update(e.now_us);
    }

    fn on_loss(&mut self, e: &Lost) {
        self.resolve(e.seq);
        self.update(e.now_us);
    }

    /// Sprout's forecast reads delivery times alone, and a loss only resolves its packet: a mark
    /// (whose packet is acknowledged next) changes nothing.
    fn on_congestion_mark(&mut self, _e: &Acked) {}

    fn on_timer(&mut self, now_us: u64) {
        while self.tick_deadline_us().is_some_and(|d| now_us >= d) {
            let start = self.tick_start_r_us.expect("a deadline implies an open tick");
            let oldest = (self.oldest_seq < self.next_seq).then(|| self.sent_us[Self::slot(self.oldest_seq)]);
            let backlogged = oldest.is_some_and(|s| self.backlogged_since(s, start));
            self.close_tick(backlogged);
        }
        self.update(now_us);
    }

    fn decision(&self) -> Decision {
        Decision { cwnd_bytes: Some(self.cwnd_bytes), pacing_rate_bps: None, wake_at_us: self.wake_at_us }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{percentile, FixedPath, MSS};

    fn sprout() -> Sprout {
        Sprout::new(SproutConfig::default())
    }

    /// Hand-driven events: `packets` packets sent at `t_us`, then received `spacing_us` apart
    /// from `recv_start_us` (receiver clock = sender clock here), each acknowledged 20 ms later.
    fn deliver(s: &mut Sprout, seq: &mut u64, t_us: u64, packets: u64, recv_start_us: u64, spacing_us: u64) {
        let first = *seq;
        for i in 0..packets {
            s.on_sent(&Sent { now_us: t_us, seq: first + i, bytes: MSS, inflight_bytes: (i + 1) * MSS });
        }
        for i in 0..packets {
            let recv = recv_start_us + i * spacing_us;
            let now = recv + 20_000;
            if s.decision().wake_at_us.is_some_and(|w| w <= now) {
                s.on_timer(now);
            }
            s.on_ack(&Acked { peer_recv_us: recv, ..crate::testing::ack(now, first + i, t_us, MSS) });
        }
        *seq += packets;
    }

    #[test]
    fn counts_arrivals_per_receiver_tick_and_learns_the_rate() {
        // 500 packets/s at the receiver (one every 2 ms), sent long before (backlogged): every
        // tick holds 10 arrivals and the filter's mean goes to 500 packets/s.
        let mut s = sprout();
        let mut seq = 0;
        deliver(&mut s, &mut seq, 0, 2000, 100_000, 2_000);
        let (observed, censored) = s.ticks();
        assert_eq!(observed, 199, "4 s of arrivals close 199 ticks");
        assert_eq!(censored, 0);
        let mean = s.model().mean_rate_pps();
        assert!((mean - 500.0).abs() < 50.0, "{mean}");
    }

    #[test]
    fn window_is_forecast_deliveries_in_the_target_minus_those_already_seen() {
        let mut s = sprout();
        let mut seq = 0;
        deliver(&mut s, &mut seq, 0, 2000, 100_000, 2_000);
        // Ticks start at the first arrival, 0.1 s, so the last one closed ended at 4.08 s (the
        // forecast's origin); the last arrival was at 4.098 s, acknowledged at 4.118 s over a
        // 20 ms ack path, so the receiver's "now" is 4.098 s.
        let f = *s.forecast().unwrap();
        let origin = 4_080_000i64;
        assert_eq!(s.origin_r_us, origin);
        let now = 4_118_000u64;
        let r_now = now as i64 - 20_000;
        let expected = s.deliveries_within(r_now + 100_000 - origin) - s.deliveries_within(4_098_000 - origin);
        assert_eq!(s.decision().cwnd_bytes, Some(expected.floor() as u64 * MSS));
        // The window reaches from 18 ms after the origin to 118 ms after it: about 100 ms of a
        // 500 packets/s link, 50 packets expected, of which the cautious forecast keeps less.
        assert!(expected > 25.0 && expected < 50.0, "{expected} from {f:?}");
    }

    #[test]
    fn an_outage_closes_the_window_to_one_probe() {
        let mut s = sprout();
        let mut seq = 0;
        deliver(&mut s, &mut seq, 0, 1000, 100_000, 2_000);
        // 30 packets are in flight, sent at 2.1 s, and nothing arrives: ticks close by the
        // timer, each a full observation of zero arrivals (the packets were at the bottleneck).
        for i in 0..30 {
            s.on_sent(&Sent { now_us: 2_100_000, seq: seq + i, bytes: MSS, inflight_bytes: (i + 1) * MSS });
        }
        let mut now = 2_120_000;
        while now < 2_400_000 {
            if s.decision().wake_at_us.is_some_and(|w| w <= now) {
                s.on_timer(now);
            }
            now += 1_000;
        }
        assert!(s.model().outage_probability() > 0.9, "{}", s.model().outage_probability());
        assert_eq!(s.decision().cwnd_bytes, Some(MSS));
    }

    #[test]
    fn fills_a_short_fixed_link_with_a_queue_under_the_target() {
        // 1000 packets/s (the model's top rate), 40 ms RTT: the cautious window (~83 packets
        // per 100 ms) exceeds the 40-packet BDP, so the link stays busy and the queue holds
        // roughly 83 − 40 packets, well under the 100 ms target.
        let path = FixedPath { service_us: 1000, base_rtt_us: 40_000, rtt_drift_us_per_s: 0 };
        let mut queue_ms = Vec::new();
        let mut acked_after_warmup = 0;
        path.run("sprout", 10_000_000, |a, _: &Sprout| {
            if a.now_us > 2_000_000 {
                queue_ms.push((a.rtt_us - 40_000) as f64 / 1000.0);
                acked_after_warmup += 1;
            }
        });
        let utilization = acked_after_warmup as f64 / 8000.0;
        let p95 = percentile(&queue_ms, 95);
        assert!(utilization > 0.95, "utilization {utilization}");
        assert!(p95 < 100.0 && p95 > 10.0, "p95 queueing {p95} ms");
    }

    #[test]
    fn under_uses_a_long_fixed_link() {
        // 1000 packets/s, 300 ms RTT (a 300-packet BDP): the window never exceeds ~100 ms of
        // forecast deliveries, so throughput is at most about a third of the link.
        let path = FixedPath { service_us: 1000, base_rtt_us: 300_000, rtt_drift_us_per_s: 0 };
        let mut acked_after_warmup = 0;
        path.run("sprout", 12_000_000, |a, _: &Sprout| {
            if a.now_us > 2_000_000 {
                acked_after_warmup += 1;
            }
        });
        let utilization = acked_after_warmup as f64 / 10_000.0;
        assert!(utilization < 0.4 && utilization > 0.15, "utilization {utilization}");
    }
}
