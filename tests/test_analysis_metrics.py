"""Pantheon's metrics on hand-built record sets; every expected number is worked out here by hand
(python/pantheon/analysis/metrics.py and series.py; docs/analysis.md)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pantheon.analysis.events import LinkEvents
from pantheon.analysis.metrics import length_flags, nearest_rank, run_metrics, scheme_summary
from pantheon.analysis.series import binned


def events(sends, deliveries, opportunities=None) -> LinkEvents:
    """sends: (flow, t_us, bytes); deliveries: (flow, send_t_us, recv_t_us, bytes)."""
    s = np.array(sends, dtype=np.int64).reshape(-1, 3)
    d = np.array(deliveries, dtype=np.int64).reshape(-1, 4)
    opp = None if opportunities is None else (opportunities, [1500] * len(opportunities))
    return LinkEvents.build((s[:, 0], s[:, 1], s[:, 2]), (d[:, 0], d[:, 2], d[:, 3], d[:, 2] - d[:, 1]), opp)


def test_nearest_rank_is_the_ceil_of_p_n_th_smallest():
    values = np.arange(1, 21, dtype=float)  # 1..20
    assert nearest_rank(values, 95) == 19  # ceil(0.95 * 20) = 19th smallest
    assert nearest_rank(values, 50) == 10  # ceil(10) = 10th
    assert nearest_rank(np.array([1.0, 2.0, 3.0]), 95) == 3  # ceil(2.85) = 3rd
    assert nearest_rank(np.array([7.0]), 95) == 7
    assert nearest_rank(np.arange(1, 101, dtype=float), 95) == 95  # exactly 95.0, no float round-up to 96


def test_one_flow_with_the_last_packet_still_queued():
    # four 1000-byte packets sent at 0, 1, 2, 3 ms; three arrive at 10, 12, 14 ms; the last never does
    run = run_metrics(events(
        [(1, 0, 1000), (1, 1000, 1000), (1, 2000, 1000), (1, 3000, 1000)],
        [(1, 0, 10_000, 1000), (1, 1000, 12_000, 1000), (1, 2000, 14_000, 1000)],
    ))
    flow = run.flows[0]
    assert flow.throughput_mbps == pytest.approx(3 * 8000 / 4000)  # 24 000 bits over 10..14 ms = 6 Mbit/s
    assert flow.ingress_mbps == pytest.approx(4 * 8000 / 3000)  # 32 000 bits over 0..3 ms = 10.67 Mbit/s
    assert flow.delay_p95_ms == 12  # delays 10, 11, 12 ms: ceil(0.95 * 3) = 3rd
    assert flow.delay_median_ms == 11  # ceil(1.5) = 2nd
    assert flow.delay_mean_ms == pytest.approx(11)
    assert flow.loss_rate == pytest.approx(0.25)  # 1 - 3000/4000
    assert flow.duration_s == pytest.approx(0.014)  # first send 0 to last delivery 14 ms
    assert run.all.throughput_mbps == pytest.approx(6)
    assert run.jain_index is None  # one flow
    assert run.capacity_mbps is None and run.utilization is None  # no opportunities: not emulated
    assert run.power == pytest.approx(math.log(6 / 12))


def test_two_overlapping_flows_and_all_flows_together():
    # flow 1: 1500 B at 0 and 1 ms, arriving 5 and 6 ms; flow 2: 500 B at 3, 4, 5 ms, arriving 7 and 9 ms, third lost
    run = run_metrics(events(
        [(1, 0, 1500), (1, 1000, 1500), (2, 3000, 500), (2, 4000, 500), (2, 5000, 500)],
        [(1, 0, 5000, 1500), (1, 1000, 6000, 1500), (2, 3000, 7000, 500), (2, 4000, 9000, 500)],
        opportunities=list(range(0, 10_001, 1000)),
    ), {1: "cubic", 2: "bbr"})
    one, two = run.flows
    assert one.throughput_mbps == pytest.approx(2 * 12_000 / 1000)  # 24 Mbit/s over 5..6 ms
    assert two.throughput_mbps == pytest.approx(2 * 4000 / 2000)  # 4 Mbit/s over 7..9 ms
    assert (one.scheme, two.scheme, run.all.scheme) == ("cubic", "bbr", None)
    assert two.loss_rate == pytest.approx(1 - 1000 / 1500)
    # all flows: 32 000 bits from the first delivery (5 ms) to the last (9 ms)
    assert run.all.throughput_mbps == pytest.approx(32_000 / 4000)
    assert run.all.delay_p95_ms == 5  # delays 5, 5, 4, 5 -> sorted 4 5 5 5, ceil(3.8) = 4th
    assert run.all.delay_mean_ms == pytest.approx(4.75)
    assert run.all.loss_rate == pytest.approx(1 - 4000 / 4500)
    assert run.all.sent_bytes == one.sent_bytes + two.sent_bytes == 4500
    # 11 opportunities of 1500 B from 0 to 10 ms: 132 000 bits / 10 000 us
    assert run.capacity_mbps == pytest.approx(13.2)
    assert run.utilization == pytest.approx(8 / 13.2)
    assert run.jain_index == pytest.approx((24 + 4) ** 2 / (2 * (24 ** 2 + 4 ** 2)))  # 784 / 1184
    assert run.power == pytest.approx(math.log(8 / 5))


def test_a_single_delivery_has_zero_throughput_and_no_sends_no_loss_rate():
    run = run_metrics(events([(1, 0, 1000)], [(1, 0, 20_000, 1000)]))
    assert run.all.throughput_mbps == 0.0  # no span: the original's convention
    assert run.all.delay_p95_ms == 20
    empty = run_metrics(events([], []))
    assert empty.all.loss_rate is None and empty.all.delay_p95_ms is None and empty.flows == []


def test_negative_delays_count_for_throughput_but_not_for_delay():
    run = run_metrics(events([(1, 0, 1000), (1, 1000, 1000)], [(1, 0, 3000, 1000), (1, 1000, 500, 1000)]))
    assert run.all.delivered_bytes == 2000
    assert run.all.delay_p95_ms == 3  # the -0.5 ms delay is left out


def test_a_run_whose_flows_stop_early_is_flagged():
    # runtime 10 s; flow 1 moves data from 0 to 5 s, flow 2 (configured for 4 s) from 6 to 9.5 s
    run = run_metrics(events([(1, 0, 1000), (2, 6_000_000, 1000)], [(1, 0, 5_000_000, 1000), (2, 6_000_000, 9_500_000, 1000)]))
    assert length_flags(run, 10.0, {"1": 10.0, "2": 4.0}, 1.0) == ["short: flow 1 moved data for 5.0 s of 10 s"]
    assert length_flags(run, 12.0, {}, 1.0) == ["short: data moved for 9.5 s of 12 s"]  # 9.5 < 0.8 * 12
    assert length_flags(run, 11.0, {}, 1.0) == []  # 9.5 >= 8.8


def test_a_short_flow_is_late_only_past_the_data_dirs_head_start():
    # flow 2, planned from 4 s for 6 s, sent its first packet at 6 s and moved data for 3.5 s
    run = run_metrics(events([(1, 0, 1000), (2, 6_000_000, 1000)], [(1, 0, 9_500_000, 1000), (2, 6_000_000, 9_500_000, 1000)]))
    starts = {"1": 0.0, "2": 4.0}
    late = "short: flow 2 moved data for 3.5 s of 6 s: its first packet left 2.0 s after its planned start"
    assert length_flags(run, 10.0, {"2": 6.0}, 1.0, starts) == [late]  # 2.0 s > 1.0 + 0.5
    assert length_flags(run, 10.0, {"2": 6.0}, 0.0, starts) == [late]  # the simulator's: no head start
    assert length_flags(run, 10.0, {"2": 6.0}, 1.5, starts) == ["short: flow 2 moved data for 3.5 s of 6 s"]  # 2.0 <= 2.0


def test_scheme_summary_averages_valid_runs_only():
    def run_with(size_bytes: int, delay_ms: int):
        """Two packets sent at 0, delivered 1 ms apart: 2 * size * 8 bits over 1000 us."""
        return run_metrics(events([(1, 0, size_bytes)] * 2, [(1, 0, delay_ms * 1000, size_bytes),
                                                              (1, 0, delay_ms * 1000 + 1000, size_bytes)]))
    # 375 B: 6000 bits / 1000 us = 6 Mbit/s; 500 B: 8 Mbit/s
    a, b, bad = run_with(375, 20), run_with(500, 30), run_with(5000, 1)
    assert a.all.throughput_mbps == pytest.approx(6) and b.all.throughput_mbps == pytest.approx(8)
    bad.flags = ["failed: interrupted"]
    summary = scheme_summary([a, b, bad])
    assert (summary["valid_runs"], summary["runs"]) == (2, 3)
    assert summary["all"]["throughput_mbps"]["mean"] == pytest.approx(7)
    assert summary["all"]["throughput_mbps"]["sd"] == pytest.approx(math.sqrt(2))  # sample sd of 6 and 8
    # p95 delays: run a: 20 and 21 ms -> 21; run b: 30 and 31 -> 31; mean 26
    assert summary["all"]["delay_p95_ms"]["mean"] == pytest.approx(26)
    assert summary["power_of_means"] == pytest.approx(math.log(7 / 26))
    assert summary["flows"]["1"]["throughput_mbps"]["n"] == 2


def test_bins_at_the_edges():
    # 500 ms bins: t = -1 us is in bin -1, 0 and 499 999 us in bin 0, 500 000 us in bin 1
    ev = events([(1, -1, 1250), (1, 0, 1250), (1, 499_999, 1250), (1, 500_000, 1250)],
                [(1, -1, 499_999, 1250), (1, 0, 500_000, 1250), (1, 499_999, 500_001, 1250)],
                opportunities=[0, 250_000, 750_000])
    s = binned(ev, 500)
    assert s.start_s.tolist() == [-0.5, 0.0, 0.5]
    # 1250 B = 10 000 bits per packet; over a 500 000 us bin that is 0.02 Mbit/s
    assert s.ingress_mbps[1] == pytest.approx([0.02, 0.04, 0.02])
    assert s.throughput_mbps[1] == pytest.approx([0.0, 0.02, 0.04])
    assert s.capacity_mbps == pytest.approx([0.0, 2 * 12_000 / 500_000, 12_000 / 500_000])
    # bin 0: one delivery of delay 500 ms; bin 1: delays 500 ms and 0.002 ms
    assert np.isnan(s.delay_p95_ms[1][0])
    assert s.delay_p95_ms[1][1:] == pytest.approx([500.0, 500.0])
    assert s.delay_mean_ms[1][2] == pytest.approx((500 + 0.002) / 2)


def test_per_bin_p95_is_nearest_rank():
    # twenty deliveries in one bin with delays 1..20 ms: the 19th smallest
    ev = events([(1, 0, 100)] * 20, [(1, 0, d * 1000, 100) for d in range(1, 21)])
    assert binned(ev, 500).delay_p95_ms[1][0] == 19
