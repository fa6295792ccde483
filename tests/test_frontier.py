"""bench/support/frontier.py, the throughput–delay plane bench/tao.py and test_behaviour.py's Tao
check judge by: dominance with and without a margin, on/off senders pooled as Remy pools them, and
Remy's objective, all on numbers worked by hand; and bench/tao.py's one-line refusal of a missing
tree."""
from __future__ import annotations

import math

import pytest

import tao as bench_tao
from support.frontier import FlowPart, Point, dominators, objective, sender_points


def test_objective_is_log_throughput_less_log_delay() -> None:
    # 10 Mbit/s at 100 ms: ln 10 − ln 100 = −ln 10.
    assert objective(10.0, 100.0) == pytest.approx(-math.log(10))
    assert objective(10.0, 100.0, delta=0.1) == pytest.approx(math.log(10) - 0.1 * math.log(100))


def test_dominance_needs_both_axes_and_the_margin() -> None:
    tao = Point(20.0, 100.0, 120.0)
    others = {"faster-and-quicker": Point(22.0, 90.0, 95.0),   # 1.10x the throughput, delay 100/1.111
              "faster-but-slower": Point(30.0, 101.0, 110.0),
              "same": Point(20.0, 100.0, 500.0),               # p95 plays no part
              "barely-ahead": Point(21.0, 95.0, 99.0)}        # 1.05x, 100/1.053: within 10%
    assert dominators(tao, others) == ["faster-and-quicker", "barely-ahead"]
    assert dominators(tao, others, margin=0.10) == ["faster-and-quicker"]
    assert dominators(tao, {"a hair short": Point(21.99, 90.0, 90.0)}, margin=0.10) == []


def test_an_on_off_sender_is_its_flows_pooled() -> None:
    # Sender 0: two on-periods, 1 s and 3 s, delivering 1000 and 3000 datagrams of 1464 bytes at
    # mean delays of 80 and 120 ms: 4000 × 1464 × 8 / 4 s = 11.712 Mbit/s; mean delay
    # (1000 × 80 + 3000 × 120) / 4000 = 110 ms; p95 (1000 × 90 + 3000 × 150) / 4000 = 135 ms.
    # Sender 1 was on but got nothing through: no point (Remy's utility is undefined there).
    flows = [FlowPart(0, 1.0, 1000, 80.0, 90.0), FlowPart(1, 2.0, 0, None, None), FlowPart(0, 3.0, 3000, 120.0, 150.0)]
    points = sender_points(flows)
    assert list(points) == [0]
    assert points[0].throughput_mbps == pytest.approx(11.712)
    assert points[0].delay_mean_ms == pytest.approx(110.0)
    assert points[0].delay_p95_ms == pytest.approx(135.0)


def test_a_missing_tree_is_one_line_and_exit_2(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_tao.main(["--tree", str(tmp_path / "none.dna")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "none.dna: no such file" in err, err
