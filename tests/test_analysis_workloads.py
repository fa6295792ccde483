"""The metrics of workloads and harm on hand-built numbers (python/pantheon/analysis/transfers.py,
probes.py, workloads.py, harm.py; docs/analysis.md, "Workloads" and "Harm"): ideal FCTs and
slowdowns, size buckets, start lateness, probe RTTs under load and idle, RTT fairness, harm of A
on B and of a scheme on itself; and a data dir with transfers, probes and harm.json through
`pantheon analyze`, its perf.json, perf.csv and report."""
from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from pantheon.analysis import harm, probes, transfers
from pantheon.analysis.analyze import analyze
from pantheon.analysis.metrics import run_metrics
from pantheon.analysis.ranking import t_quantile
from pantheon.analysis.transfers import DATAGRAMS, KERNEL_TCP, Transfers, ideal_fct_ms
from test_analysis_cli import write_run
from test_analysis_metrics import events

OPPORTUNITY_MBPS = 1000 * 12_000 / 999_000
"""write_run's capacity: 1000 opportunities of 1500 B (12 000 bits), 1 ms apart, from 0 to 999 ms."""


def test_the_ideal_fct_of_each_transport():
    # 14 640 B = 10 datagrams of 1464 B = 15 000 B on the path: 120 000 bits at 12 Mbit/s = 10 ms
    assert DATAGRAMS.wire_bytes(14_640) == 15_000
    assert DATAGRAMS.wire_bytes(14_641) == 16_500  # an 11th datagram
    assert ideal_fct_ms(14_640, DATAGRAMS, 12.0, 20.0) == pytest.approx(20 + 10)  # no handshake
    # kernel TCP: 12-byte header + 14 108 B = 14 120 B = 10 segments of 1412 B; one round trip (40 ms) first
    assert KERNEL_TCP.wire_bytes(14_108) == 15_000
    assert ideal_fct_ms(14_108, KERNEL_TCP, 12.0, 20.0) == pytest.approx(40 + 20 + 10)


def test_slowdowns_buckets_and_lateness_of_a_flow_of_transfers():
    # five transfers, 1 Mbit/s path, no delay: the ideal FCT is wire bits / 1000 ms
    rows = [(1_464, 0, 0, 24_000),          # 1 datagram: ideal 12 ms, FCT 24 ms: slowdown 2
            (2_928, 100_000, 101_000, 125_000),  # 2 datagrams: ideal 24 ms, FCT 24 ms: 1
            (14_640, 200_000, 203_000, 323_000),  # 10: ideal 120 ms, FCT 120 ms: 1 (10 kB < size <= 100 kB)
            (146_400, 300_000, 330_000, 1_530_000),  # 100: ideal 1200 ms, FCT 1200 ms: 1 (100 kB - 1 MB)
            (2_000_000, 400_000, None, None)]  # never began
    t = Transfers.of(rows)
    slowdown = transfers.slowdowns(t, DATAGRAMS, 1.0, 0.0)
    assert slowdown[:4] == pytest.approx([2.0, 1.0, 1.0, 1.0]) and math.isnan(slowdown[4])
    summary = transfers.transfer_summary(t, slowdown)
    assert (summary["count"], summary["completed"]) == (5, 4)
    assert summary["fct_ms"] == {"p50": 24.0, "p99": 1200.0}  # 24 24 120 1200: 2nd and 4th
    assert summary["slowdown"] == {"p50": 1.0, "p99": 2.0}
    assert summary["by_size"] == [
        {"max_bytes": 10_000, "count": 2, "slowdown_p50": 1.0, "slowdown_p99": 2.0},
        {"max_bytes": 100_000, "count": 1, "slowdown_p50": 1.0, "slowdown_p99": 1.0},
        {"max_bytes": 1_000_000, "count": 1, "slowdown_p50": 1.0, "slowdown_p99": 1.0},
        {"max_bytes": 10_000_000, "count": 0, "slowdown_p50": None, "slowdown_p99": None},
        {"max_bytes": None, "count": 0, "slowdown_p50": None, "slowdown_p99": None}]
    # began − start: 0, 1, 3, 30 ms (the last never began): p50 the 2nd, p99 the 4th
    assert transfers.start_lateness_ms(t) == {"p50": 1.0, "p99": 30.0, "max": 30.0}


def test_probe_rtts_pair_the_kth_acknowledgement_with_the_kth_delivery():
    # probes sent at 0, 100, 200, 300 ms; the one at 100 ms is lost, the ack of the one at 300 ms too;
    # the receiver acknowledges at once what it receives: acks sent at 20, 225 and 330 ms
    data_send = np.array([0, 100_000, 200_000, 300_000], dtype=float)
    data_recv = np.array([20_000, np.nan, 225_000, 330_000])
    ack_send = np.array([330_000, 20_000, 225_000], dtype=float)  # in any order: paired by send time
    ack_recv = np.array([np.nan, 40_000, 250_000])
    sent, rtt = probes.probe_rtts_us(data_send, data_recv, ack_send, ack_recv)
    assert sent.tolist() == [0, 200_000] and rtt.tolist() == [40_000, 50_000]
    assert probes.idle(np.array([0.0, 150.0, 300.0]), [(100.0, 200.0)]).tolist() == [True, False, True]


def test_rtt_fairness_is_the_shortest_rtts_throughput_over_the_longest():
    # two flows without extra delay (6 and 4 Mbit/s, mean 5) and one with 20 ms more each way (2 Mbit/s)
    assert transfers.rtt_fairness([0.0, 0.0, 20.0], [6.0, 4.0, 2.0]) == pytest.approx(2.5)
    assert transfers.rtt_fairness([10.0, 10.0], [6.0, 4.0]) is None  # one base RTT
    assert transfers.rtt_fairness([0.0, 20.0], [6.0, 0.0]) is None


def test_harm_of_a_on_b_and_of_a_scheme_on_itself():
    # B with B: 10 Mbit/s and 50 ms in each run; B with A: 3.9, 4.0, 4.1 Mbit/s (mean 4) and 80 ms
    alone = [harm.Share(10.0, 50.0), harm.Share(10.0, 50.0)]
    shared = [harm.Share(3.9, 80.0), harm.Share(4.0, 80.0), harm.Share(4.1, 80.0)]
    pair = harm.pair_harm(shared, alone)
    assert pair["throughput"].value == pytest.approx(0.6)  # (10 − 4) / 10
    assert pair["delay"].value == pytest.approx(0.375)  # (80 − 50) / 80
    # B's mean with A: 4 ± t(2) · 0.1 / √3, mapped through (10 − y) / 10
    half = t_quantile(2) * 0.1 / math.sqrt(3)
    assert pair["throughput"].ci == pytest.approx(((10 - 4 - half) / 10, (10 - 4 + half) / 10))
    assert pair["delay"].ci == pytest.approx((0.375, 0.375))  # no spread
    assert (pair["throughput"].runs, pair["throughput"].baseline_runs) == (3, 2)
    # B doing better with A is no harm; a scheme on itself does none
    assert harm.harm(10.0, 12.0, more_is_better=True) == 0.0
    matrix = harm.harm_matrix({("a", "b"): shared, ("b", "b"): alone, ("a", "a"): shared, ("b", "a"): alone})
    assert matrix["b"]["b"]["throughput"].value == 0.0 and matrix["b"]["b"]["delay"].value == 0.0
    assert matrix["a"]["a"]["throughput"].value == 0.0
    assert matrix["b"]["a"]["throughput"].value == 0.0  # B's 10 Mbit/s against A's own 4: A gains
    assert matrix["b"]["a"]["delay"].value == 0.0


def test_a_harm_campaigns_runs_give_the_matrix():
    def run(first: tuple[int, int], second: tuple[int, int]):
        """Two flows, each two packets of `bytes` delivered 1 ms apart `delay` ms after sending:
        bytes · 16 bits / 1000 µs."""
        (size_1, delay_1), (size_2, delay_2) = first, second
        return run_metrics(events(
            [(1, 0, size_1), (1, 0, size_1), (2, 0, size_2), (2, 0, size_2)],
            [(1, 0, delay_1 * 1000, size_1), (1, 0, delay_1 * 1000 + 1000, size_1),
             (2, 0, delay_2 * 1000, size_2), (2, 0, delay_2 * 1000 + 1000, size_2)]))
    # a+b: a 8 Mbit/s, b 4 Mbit/s at 79-80 ms; b+b: 10 Mbit/s each at 49-50 ms; a+a: 8 Mbit/s each
    shares = harm.pair_shares([(["a", "b"], run((500, 20), (250, 79))), (["b", "b"], run((625, 49), (625, 49))),
                               (["a", "a"], run((500, 20), (500, 20)))])
    assert shares[("a", "b")] == [harm.Share(pytest.approx(4.0), 80.0)]
    assert len(shares[("b", "b")]) == 2
    matrix = harm.harm_matrix(shares)
    assert matrix["a"]["b"]["throughput"].value == pytest.approx(0.6)  # (10 − 4) / 10
    assert matrix["a"]["b"]["delay"].value == pytest.approx(0.375)  # (80 − 50) / 80
    assert matrix["b"]["a"]["throughput"].value == pytest.approx(0.0)  # a kept its 8 Mbit/s
    assert matrix["a"]["a"]["throughput"].value == 0.0


def test_harm_json_holds_the_matrix_as_the_issue_says(tmp_path):
    pair = harm.pair_harm([harm.Share(4.0, 80.0)], [harm.Share(10.0, 50.0)])
    path = harm.write_harm_json({"cubic": {"vegas": pair}}, tmp_path / "harm.json")
    document = json.loads(path.read_text())
    assert document == {"cubic": {"vegas": {"throughput": pytest.approx(0.6), "delay": pytest.approx(0.375),
                                            "throughput_ci": None, "delay_ci": None, "runs": 1, "baseline_runs": 1}}}
    back = harm.read_harm_json(path)
    assert back["cubic"]["vegas"]["throughput"].value == pytest.approx(0.6)
    (tmp_path / "hand.json").write_text('{"a": {"b": {"throughput": 0.5, "delay": 0.25}}}')  # the issue's bare form
    assert harm.read_harm_json(tmp_path / "hand.json")["a"]["b"]["delay"] == harm.Harm(0.25, None, 0, 0)


def write_workload_run(run_dir):
    """Over write_run's path (20 ms, capacity OPPORTUNITY_MBPS): flow 0 finite (14 640 B, 100-160 ms),
    flow 1 Poisson (three transfers, the last incomplete), flow 2 probes every 300 ms from 0 with RTTs
    40, 50, 60 and 70 ms."""
    write_run(run_dir, packets=100, lost_at_end=0, delay_ms=20)
    rows = []  # flow, direction, send_us, recv_us
    rows += [(0, "data", 100_000 + 5_000 * k, 140_000 + 2_000 * k) for k in range(10)]
    rows += [(1, "data", 401_000, 421_000), (1, "data", 503_000, 523_000)]
    for k, rtt_ms in enumerate((40, 50, 60, 70)):
        sent = 300_000 * k
        rows += [(2, "data", sent, sent + 20_000), (2, "ack", sent + 20_000, sent + rtt_ms * 1000)]
    pq.write_table(pa.table({
        "flow": pa.array([r[0] for r in rows], pa.uint16()), "direction": [r[1] for r in rows],
        "uid": pa.array(range(len(rows)), pa.uint64()), "size_bytes": pa.array([1464] * len(rows), pa.uint32()),
        "send_us": pa.array([r[2] for r in rows], pa.int64()), "recv_us": pa.array([r[3] for r in rows], pa.int64()),
    }), run_dir / "records.parquet")
    planned = [(0, 0, 14_640, 100_000, 100_000, 160_000),
               (1, 0, 5_000, 400_000, 401_000, 449_000), (1, 1, 50_000, 500_000, 503_000, 583_000),
               (1, 2, 20_000_000, 700_000, 730_000, None)]
    names = ("flow", "transfer", "bytes", "start_us", "began_us", "end_us")
    types = (pa.uint16(), pa.uint32(), pa.uint64(), pa.int64(), pa.int64(), pa.int64())
    pq.write_table(pa.table({n: pa.array([r[i] for r in planned], t) for i, (n, t) in enumerate(zip(names, types))}),
                   run_dir / "transfers.parquet")
    info = json.loads((run_dir / "run.json").read_text())
    info["flows"] = [
        {"scheme": "cubic", "start_s": 0.1, "duration_s": 0.9, "role": "finite", "transfers": [{"start_s": 0.1, "bytes": 14_640}]},
        {"scheme": "cubic", "start_s": 0.4, "duration_s": 0.6, "role": "poisson", "extra_delay_ms": 0.0,
         "transfers": [{"start_s": 0.4, "bytes": 5_000}, {"start_s": 0.5, "bytes": 50_000}, {"start_s": 0.7, "bytes": 20_000_000}]},
        {"scheme": "cubic", "start_s": 0.0, "duration_s": 1.0, "role": "probes", "cc": "cbr:interval_ms=300"}]
    (run_dir / "run.json").write_text(json.dumps(info))


@pytest.fixture
def workload_dir(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "metadata.json").write_text(json.dumps({
        "arguments": {"runtime": 1.0, "run_times": 1}, "emulator_options": ["--delay", "20", "--uplink-rate", "12"],
        "schemes": {"cubic": {"display": "TCP Cubic", "kernel": "6"}, "bbr": {"display": "TCP BBR", "kernel": "6"}},
        "trials": [{"number": 1, "label": "cubic", "repetition": 1}, {"number": 2, "label": "bbr", "repetition": 1}],
    }))
    write_workload_run(root / "cubic" / "run1")
    write_run(root / "bbr" / "run1", packets=100, lost_at_end=0, delay_ms=30)  # a bulk run beside it
    return root


def test_a_data_dir_with_transfers_probes_and_harm(workload_dir):
    pair = harm.pair_harm([harm.Share(4.0, 80.0)], [harm.Share(10.0, 50.0)])
    harm.write_harm_json({"cubic": {"bbr": pair}, "bbr": {"cubic": pair}}, workload_dir / "harm.json")
    analysis = analyze(workload_dir, quiet=True)
    perf = json.loads((workload_dir / "perf.json").read_text())
    run = perf["schemes"]["cubic"]["runs"]["1"]
    assert run["valid"], run["flags"]
    assert run["capacity_mbps"] == pytest.approx(OPPORTUNITY_MBPS)
    finite, poisson, probing = run["flows"]["1"], run["flows"]["2"], run["flows"]["3"]
    # kernel TCP (metadata's "kernel"): 14 640 + 12 B = 11 segments of 1412 B = 16 500 B on the path
    ideal_ms = 2 * 20 + 20 + 16_500 * 8 / OPPORTUNITY_MBPS / 1000
    assert finite["fct_ms"] == pytest.approx(60.0)
    assert finite["slowdown"] == pytest.approx(60.0 / ideal_ms)
    assert finite["transfers"] is None and poisson["fct_ms"] is None
    t = poisson["transfers"]
    assert (t["count"], t["completed"]) == (3, 2)
    assert t["fct_ms"] == {"p50": 48.0, "p99": 80.0}
    assert poisson["start_lateness_ms"] == {"p50": 3.0, "p99": 30.0, "max": 30.0}
    # the probes at 0, 300 and 600 ms found no transfer under way; the one at 900 ms the incomplete one
    assert probing["probe_rtt_ms"] == {"p50": 50.0, "p99": 70.0}
    assert probing["probe_rtt_idle_ms"] == {"p50": 50.0, "p99": 60.0}
    assert run["rtt_fairness"] is None  # no bulk flows
    warnings = run["warnings"]
    assert "flow 2: 1 of 3 transfers did not complete by the run's end" in warnings
    assert any(w.startswith("transfers started late: flow 2's p99 start lateness 30.0 ms") for w in warnings)
    # the bulk run beside it has the keys, null
    bulk = perf["schemes"]["bbr"]["runs"]["1"]["flows"]["1"]
    assert bulk["fct_ms"] is None and bulk["probe_rtt_ms"] is None
    table = {(r["scheme"], r["flow"]): r for r in pcsv.read_csv(workload_dir / "perf.csv").to_pylist()}
    assert table[("cubic", "2")]["transfers_fct_ms_p99"] == pytest.approx(80.0)
    assert table[("cubic", "3")]["probe_rtt_idle_ms_p99"] == pytest.approx(60.0)
    for name in ("summary_fct_cdf.png", "summary_slowdown_cdf.png", "summary_slowdown_by_size.png", "harm.png",
                 "cubic/run1/probe_rtt.png"):
        assert (workload_dir / name).read_bytes()[:4] == b"\x89PNG", name
    page = (workload_dir / "report.html").read_text()
    for heading in ("<h2>Transfers</h2>", "<h2>Harm</h2>"):
        assert heading in page
    assert "Flow 1: FCT 60.0 ms" in page and "probe RTT p50 50.0 ms" in page
    assert analysis.figures["harm"].name == "harm.png"


def test_a_data_dir_without_workloads_has_no_workload_section(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "metadata.json").write_text(json.dumps({"arguments": {"runtime": 1.0}, "emulator_options": [],
                                                    "trials": [{"number": 1, "label": "cubic", "repetition": 1}]}))
    write_run(root / "cubic" / "run1", packets=100, lost_at_end=0, delay_ms=20)
    analysis = analyze(root, quiet=True)
    page = (root / "report.html").read_text()
    assert "<h2>Transfers</h2>" not in page and "<h2>Harm</h2>" not in page
    assert not {"fct_cdf", "harm"} & set(analysis.figures)
    assert not (root / "cubic" / "run1" / "probe_rtt.png").exists()
