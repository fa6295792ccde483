"""The clock estimator (pantheon.harness.clock) against synthetic exchanges whose truth is known:
the peer's clock is a line (offset, drift) in true time, optionally stepped; local time is true
time. Each exchange is timed as the tunnel times it (issue 16 §2): both endpoints probe, every 50 ms
for 2 s and then every 500 ms, over a path with a base delay each way and queueing on top."""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest

from pantheon.harness.clock import ClockError, Exchange, fit, read_clock_log

EPOCH_US = 1_795_000_000_000_000
"""A plausible 'now' (late 2026), µs since the Unix epoch: times are as large as the real ones."""
PROCESSING_US = 30
"""Time a responder takes between receiving a probe and answering it."""


@dataclass
class Truth:
    offset_us: float
    drift_us_per_s: float
    step_at_us: int | None = None
    step_us: float = 0.0

    def peer_us(self, t_us: float) -> int:
        """The peer's clock reading at true (= local) time t_us."""
        stepped = self.step_us if self.step_at_us is not None and t_us >= self.step_at_us else 0.0
        return round(t_us + self.offset_us + self.drift_us_per_s * (t_us - EPOCH_US) / 1e6 + stepped)

    def offset_at(self, t_us: int) -> int:
        return self.peer_us(t_us) - t_us


def schedule_us(start_us: int, duration_s: float) -> list[int]:
    fast = [start_us + k * 50_000 for k in range(40)]
    slow = list(range(fast[-1] + 500_000, start_us + int(duration_s * 1e6), 500_000))
    return fast + slow


def simulate(truth: Truth, *, forward_us: int = 10_000, back_us: int = 10_000, duration_s: float = 34.0,
             queued: float = 0.0, queue_mean_us: float = 2000.0, lost: float = 0.0, loaded_us: float = 0.0,
             seed: int = 1) -> tuple[list[Exchange], list[Exchange]]:
    """(local endpoint's log, peer endpoint's log). forward: local → peer one-way base delay;
    back: peer → local. A fraction `queued` of one-way trips waits an exponential extra time;
    a fraction `lost` of exchanges never completes; from 2.5 s to 2 s before the end (the run's
    flows), every forward trip waits loaded_us more in a full queue."""
    rng = np.random.default_rng(seed)
    load_from_us, load_to_us = EPOCH_US + 2_500_000, EPOCH_US + (duration_s - 2) * 1e6

    def trip(base_us: int, at_us: float = 0.0) -> float:
        loaded = loaded_us * (1 + rng.random()) if load_from_us <= at_us < load_to_us else 0.0
        return base_us + loaded + (rng.exponential(queue_mean_us) if rng.random() < queued else 0.0)

    local, peer = [], []
    for s in schedule_us(EPOCH_US, duration_s):
        there = s + trip(forward_us, s)
        back = there + PROCESSING_US + trip(back_us)
        if rng.random() >= lost:
            local.append(Exchange(s, truth.peer_us(there), truth.peer_us(there + PROCESSING_US), round(back)))
    for s in schedule_us(EPOCH_US + 17_000, duration_s):
        there = s + trip(back_us)
        back = there + PROCESSING_US + trip(forward_us, there)
        if rng.random() >= lost:
            peer.append(Exchange(truth.peer_us(s), round(there), round(there) + PROCESSING_US, truth.peer_us(back)))
    return local, peer


def worst_error_us(result, truth: Truth, duration_s: float = 34.0) -> float:
    """The largest error of the fitted peer clock over the run's span (1000 points), µs."""
    times = np.linspace(EPOCH_US + 200_000, EPOCH_US + duration_s * 1e6 - 600_000, 1000).astype(np.int64)
    return max(abs(result.local_to_peer_us(int(t)) - truth.peer_us(int(t))) for t in times)


def test_hand_worked_exchanges_give_rfc5905_offset_and_delay():
    # RFC 5905 §8: θ = ((t2 − t1) + (t3 − t4)) / 2, δ = (t4 − t1) − (t3 − t2).
    # Peer 5 s ahead, 10 ms each way, 1 ms to answer: θ = (5_010_000 + 4_990_000) / 2 = 5 s, δ = 20 ms.
    local = [Exchange(t, t + 5_010_000, t + 5_011_000, t + 21_000) for t in (EPOCH_US + k * 1_000_000 for k in range(4))]
    result = fit(local)
    assert result.offset_us == pytest.approx(5_000_000, abs=1e-3)
    assert result.drift_us_per_s == pytest.approx(0, abs=1e-6)
    assert (result.min_rtt_us, result.kept, result.exchanges) == (20_000, 4, 4)
    assert result.residual_us == pytest.approx(0, abs=1e-3)
    assert result.bound_us == pytest.approx(10_000, abs=1e-3)
    assert result.step is None
    # Exchanges the peer initiated, logged on its side with the roles swapped (t1, t4 on its clock):
    # their θ is local minus peer, −5 s, and enters the fit as +5 s.
    peer = [Exchange(t + 5_000_000, t + 10_000, t + 11_000, t + 5_021_000) for t in (EPOCH_US + k * 1_000_000 for k in range(4))]
    assert fit([], peer).offset_us == pytest.approx(5_000_000, abs=1e-3)
    assert fit([], peer).min_rtt_us == 20_000


@pytest.mark.parametrize("offset_s", [10.0, -10.0])
@pytest.mark.parametrize("drift", [50.0, -50.0])
def test_offset_and_drift_recovered_within_the_bound(offset_s, drift):
    truth = Truth(offset_s * 1e6, drift)
    result = fit(*simulate(truth))
    assert worst_error_us(result, truth) <= result.bound_us
    assert result.drift_us_per_s == pytest.approx(drift, abs=1.0)
    assert result.bound_us < result.min_rtt_us / 2 + 1000
    assert result.min_rtt_us == pytest.approx(20_000, abs=5)
    assert result.step is None
    # Mapping back and forth agrees to the microsecond.
    for t in (EPOCH_US, EPOCH_US + 17_000_000, EPOCH_US + 33_000_000):
        assert abs(result.peer_to_local_us(result.local_to_peer_us(t)) - t) <= 1


def test_both_directions_are_used():
    truth = Truth(3e6, 20.0)
    local, peer = simulate(truth)
    both = fit(local, peer)
    assert both.exchanges == len(local) + len(peer)
    assert both.offset_us == pytest.approx(fit(local).offset_us, abs=50)
    assert both.offset_us == pytest.approx(fit([], peer).offset_us, abs=50)


def test_asymmetric_path_error_stays_within_the_bound():
    # 5 ms one way, 25 ms the other: the offset is off by (25 − 5)/2 = 10 ms, which no endpoint can
    # see; the bound (half the 30 ms RTT) covers it.
    truth = Truth(-2e6, 15.0)
    result = fit(*simulate(truth, forward_us=5000, back_us=25000))
    error = worst_error_us(result, truth)
    assert 9_000 < error <= result.bound_us
    assert result.bound_us < result.min_rtt_us / 2 + 1000


def test_queueing_noise_is_filtered_out():
    # 70 % of one-way trips queue for an exponential 2 ms on average: the filter keeps the
    # exchanges that did not, so the bound stays within 1 ms of half the RTT.
    truth = Truth(7e6, -30.0)
    result = fit(*simulate(truth, forward_us=8000, back_us=12000, queued=0.7))
    assert worst_error_us(result, truth) <= result.bound_us
    assert result.bound_us < result.min_rtt_us / 2 + 1000
    assert result.min_rtt_us < 20_000 + 200
    assert result.kept < result.exchanges / 2
    assert result.step is None


def test_a_loaded_path_during_the_run_is_left_to_the_exchanges_around_it():
    # The run's own flow keeps 50–100 ms queued in the data direction: every exchange during it
    # is 25–50 ms off. The fit rests on the exchanges before and after, and the bound stays tight.
    truth = Truth(-6e6, 25.0)
    result = fit(*simulate(truth, queued=0.3, loaded_us=50_000))
    assert worst_error_us(result, truth) <= result.bound_us
    assert result.bound_us < result.min_rtt_us / 2 + 1000
    assert result.step is None


def test_lost_probes():
    truth = Truth(1e6, 40.0)
    local, peer = simulate(truth, queued=0.5, lost=0.6, seed=3)
    result = fit(local, peer)
    assert result.exchanges == len(local) + len(peer) < 0.5 * len(schedule_us(EPOCH_US, 34.0)) * 2
    assert worst_error_us(result, truth) <= result.bound_us
    assert result.bound_us < result.min_rtt_us / 2 + 1000


def test_few_probes_still_bounded_and_too_few_refused():
    truth = Truth(-9e6, 25.0)
    local, _ = simulate(truth, queued=0.5, seed=4)
    few = local[::25][:5]
    result = fit(few)
    assert result.exchanges == 5
    assert worst_error_us(result, truth, duration_s=(few[-1].t4_us - EPOCH_US) / 1e6 + 0.6) <= result.bound_us
    with pytest.raises(ClockError, match="only 3 usable clock exchanges of 3"):
        fit(local[:3])
    with pytest.raises(ClockError, match="only 0 usable"):
        fit([], [])


def test_unusable_exchanges_are_not_counted_as_usable():
    # t4 before t1: not an exchange a clock could produce.
    good = [Exchange(EPOCH_US + k * 1_000_000, 0, 10, EPOCH_US + k * 1_000_000 + 100) for k in range(3)]
    bad = Exchange(EPOCH_US + 5, 0, 10, EPOCH_US)
    with pytest.raises(ClockError, match="only 3 usable clock exchanges of 4"):
        fit([*good, bad])


def test_a_step_mid_run_is_detected_not_fitted():
    # ntpd steps a clock off by more than its 125 ms step threshold (RFC 5905): here +200 ms at 15.2 s.
    step_at = EPOCH_US + 15_200_000
    truth = Truth(4e6, 10.0, step_at_us=step_at, step_us=200_000)
    result = fit(*simulate(truth, queued=0.3))
    assert result.step is not None
    assert abs(result.step["at_us"] - step_at) <= 1_500_000
    assert result.step["size_us"] == pytest.approx(200_000, abs=500)
    # The one line cannot follow the step: its bound grows to cover it rather than hiding it.
    assert result.bound_us > 90_000
    assert worst_error_us(result, truth) <= result.bound_us


def test_a_small_step_below_the_bound_is_not_called_a_step():
    truth = Truth(4e6, 10.0, step_at_us=EPOCH_US + 15_200_000, step_us=3_000)
    result = fit(*simulate(truth, forward_us=20_000, back_us=20_000, queued=0.3))
    assert result.step is None
    assert worst_error_us(result, truth) <= result.bound_us


def test_read_clock_log(tmp_path):
    log = tmp_path / "flow0.sender.clock.log"
    log.write_text("# pantheon-tunnel clock exchanges\n# t1_us t2_us t3_us t4_us\n"
                   "1795000000000000 1795000005010000 1795000005010030 1795000000020030\n"
                   "\n1795000000500000 1795000005510000 1795000005510030 1795000000520030\n1795000001000000 17950")
    assert read_clock_log(log) == [
        Exchange(1795000000000000, 1795000005010000, 1795000005010030, 1795000000020030),
        Exchange(1795000000500000, 1795000005510000, 1795000005510030, 1795000000520030),
    ]
    log.write_text("1 2 3 4\nnot an exchange\n5 6 7 8\n")
    with pytest.raises(ClockError, match=r"clock.log:2: not an exchange"):
        read_clock_log(log)
    with pytest.raises(ClockError, match="cannot read the clock log"):
        read_clock_log(tmp_path / "missing.clock.log")


def test_two_exchanges_are_always_kept_at_two_times():
    # Four exchanges over 4 s, the least-delay one exactly half-way and the others 5 ms slower:
    # the first and the last half each keep their best, so a drift can still be fitted.
    delays = [25_000, 25_000, 20_000, 25_000]
    starts = [EPOCH_US + s * 1_000_000 - d // 2 for s, d in zip((0, 1, 2, 4), delays)]
    local = [Exchange(t, t + d // 2, t + d // 2, t + d) for t, d in zip(starts, delays)]
    result = fit(local)
    assert result.kept == 2
    assert result.drift_us_per_s == pytest.approx(0, abs=1e-6)


def test_to_json_has_the_contract_fields():
    result = fit(*simulate(Truth(1e6, 5.0)))
    assert json.loads(json.dumps(result.to_json())) == result.to_json()
    assert set(result.to_json()) == {"t_ref_us", "offset_us", "drift_us_per_s", "exchanges", "kept", "min_rtt_us",
                                     "residual_us", "bound_us", "step"}
