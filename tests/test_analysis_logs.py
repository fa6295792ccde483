"""Readers: the original Pantheon's merged text logs (well-formed and damaged) and this project's
records.parquet, into events and metrics worked out by hand (python/pantheon/analysis/logs.py)."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pantheon.analysis.logs import LogError, read_records, read_text_log
from pantheon.analysis.metrics import run_metrics

PANTHEON_LOG = """\
# init timestamp: 1504023415870.123
# base timestamp: 0
0.500 # 1500
1.000 + 1500 1
1.500 # 1500
2.000 + 1500 2
2.500 # 1500
3.000 + 1500 1
11.000 - 1500 10.000 1
12.500 - 1500 10.500 2
14.000 - 1500 11.000 1
14.500 # 1500
"""


def test_a_pantheon_multi_flow_log(tmp_path):
    path = tmp_path / "cubic_datalink_run1.log"
    path.write_text(PANTHEON_LOG)
    ev, problems = read_text_log(path)
    assert problems.messages() == []
    assert ev.flows == [1, 2]
    assert ev.send_t_us.tolist() == [1000, 2000, 3000]  # in line order
    assert sorted(ev.delay_us.tolist()) == [10_000, 10_500, 11_000]
    run = run_metrics(ev)
    one, two = run.flows
    # flow 1: 3000 B delivered at 11 and 14 ms -> 24 000 bits / 3000 us = 8 Mbit/s; flow 2: one delivery -> 0
    assert one.throughput_mbps == pytest.approx(8.0)
    assert two.throughput_mbps == 0.0
    # all: 36 000 bits from 11 to 14 ms = 12 Mbit/s; delays 10, 10.5, 11 -> p95 = 3rd = 11 ms
    assert run.all.throughput_mbps == pytest.approx(12.0)
    assert run.all.delay_p95_ms == pytest.approx(11.0)
    assert run.all.loss_rate == pytest.approx(0.0)
    # capacity: 4 opportunities of 1500 B from 0.5 to 14.5 ms: 48 000 bits / 14 000 us
    assert run.capacity_mbps == pytest.approx(48_000 / 14_000)


def test_a_single_flow_log_without_flow_numbers_is_flow_1(tmp_path):
    path = tmp_path / "datalink.log"
    path.write_text("# init timestamp: 0\n0 + 1000\n1 + 1000\n5 - 1000 5\n7 - 1000 6\n")
    ev, problems = read_text_log(path)
    assert problems.messages() == [] and ev.flows == [1]
    run = run_metrics(ev)
    assert run.all.throughput_mbps == pytest.approx(16_000 / 2000)  # 8 Mbit/s
    assert run.all.delay_p95_ms == 6


def test_bad_lines_are_counted_with_line_numbers_and_the_rest_is_analysed(tmp_path):
    path = tmp_path / "datalink.log"
    path.write_text(
        "# init timestamp: 5\n"          # 1
        "10.000 + 1500 1\n"              # 2 send A (flow 1, 10 ms)
        "11.000 x 1500 1\n"              # 3 unknown kind
        "\n"                             # 4 blank: ignored
        "12.0 - 1500 2.000 1\n"          # 5 delivery of A
        "13 - 1500 -1.000 2\n"           # 6 would have been sent at 14 ms by flow 2: no such send
        "14.0 -\n"                       # 7 truncated
        "15.0\t+  1500 2\n"              # 8 odd whitespace, still send B (flow 2, 15 ms)
        "16.0 + 1.2.3 1\n"               # 9 not a number
        "16.5 + 1500 1\n"                # 10 send C (flow 1, 16.5 ms)
        "16.0 - 1500 -0.500 1\n"         # 11 delivery of C half a ms before it was sent: clocks disagree
        "20.0 - 1500 5.000 2\n"          # 12 delivery of B
        "18.0 - 15\n"                    # 13 cut off
        "21.0 + 1000 1\n"                # 14 send D
        "30.0 - 1000 9.000 1\n"          # 15 delivery of D
        "31.0 - 1000 10.000 1\n"         # 16 D again: a duplicate
        "32.0 - 1000 11.000 "            # 17 single-flow form (trailing space, no newline): D a third time
    )
    ev, problems = read_text_log(path)
    assert problems.messages() == [
        "datalink.log: lines of unknown kind: 1 (line 3)",
        "datalink.log: truncated lines: 2 (lines 7, 13)",
        "datalink.log: malformed lines (not a number): 1 (line 9)",
        "datalink.log: deliveries without a matching send, left out: 3 (lines 6, 16, 17)",
        "datalink.log: negative one-way delays (clocks out of step?), left out of delay statistics: 1 (line 11)",
    ]
    assert sorted(ev.send_t_us.tolist()) == [10_000, 15_000, 16_500, 21_000]
    assert sorted(ev.recv_t_us.tolist()) == [12_000, 16_000, 20_000, 30_000]
    run = run_metrics(ev)
    assert run.all.loss_rate == 0.0  # 5500 B sent, the same 5500 B delivered
    assert run.all.delay_p95_ms == 9.0  # delays 2, 5, 9 ms (the -0.5 ms one left out): 3rd of 3
    assert run.all.throughput_mbps == pytest.approx(5500 * 8 / 18_000)  # 12 to 30 ms


def test_a_missing_log_is_a_one_line_error(tmp_path):
    with pytest.raises(LogError, match="cannot read"):
        read_text_log(tmp_path / "nope.log")


def test_records_parquet_flows_from_1_and_lost_packets(tmp_path):
    path = tmp_path / "records.parquet"
    table = pa.table({
        "flow": pa.array([0, 0, 0, 1, 0], pa.uint16()), "direction": ["data", "data", "data", "data", "ack"],
        "uid": pa.array([0, 1, 2, 0, 0], pa.uint64()), "size_bytes": pa.array([1000, 1000, 1000, 500, 40], pa.uint32()),
        "send_us": pa.array([0, 1000, 2000, 500, 100], pa.int64()),
        "recv_us": pa.array([20_000, 22_000, None, 400, 200], pa.int64()),
    })
    pq.write_table(table, path)
    ev, problems = read_records(path)
    assert ev.flows == [1, 2]
    assert problems.messages() == [
        "records.parquet: negative one-way delays (clocks out of step?), left out of delay statistics: 1 (row 4)"]
    run = run_metrics(ev)
    one = run.flows[0]
    assert one.throughput_mbps == pytest.approx(16_000 / 2000)  # 2000 B from 20 to 22 ms
    assert one.loss_rate == pytest.approx(1 / 3)  # the third packet never arrived
    assert one.delay_p95_ms == 21  # delays 20 and 21 ms
    acks, _ = read_records(path, direction="ack")
    assert acks.send_bytes.tolist() == [40] and acks.delay_us.tolist() == [100]
