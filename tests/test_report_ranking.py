"""The report's first page and Flent's pictures (issue 39 §1): the ranking of every scheme by the
archive's score with each mean's Student-t 95% confidence interval, worked out by hand for three
runs; the terminal summary in the same order; the delay CDF, the box plots and the overlaid
throughput, one line or box per scheme; the note beside the loss where the emulated queue is
infinite; and the one line `test local` and `sim` print of the path they emulate."""
from __future__ import annotations

import html
import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from pantheon.analysis import plots
from pantheon.analysis.analyze import analyze
from pantheon.analysis.cli import summary_text
from pantheon.analysis.ranking import t_quantile
from pantheon.analysis.report import INFINITE_QUEUE_NOTE
from pantheon.experiment import describe_path
from test_analysis_cli import write_run

LOST_AT_END = (0, 5, 10)
"""Cubic's three runs: of 100 packets, these never delivered (loss 0, 5 and 10 %)."""


def data_dir(root, emulator_options: list[str]):
    """BBR (30 ms, listed first), Cubic (20 ms: the better score) three valid runs each, and Vegas
    with one failed run."""
    root.mkdir()
    trials = [("bbr", k) for k in (1, 2, 3)] + [("cubic", k) for k in (1, 2, 3)] + [("vegas", 1)]
    (root / "metadata.json").write_text(json.dumps({
        "pantheon_version": "0.1.0", "git_commit": "0" * 40, "start_time": "2026-01-01T00:00:00+00:00",
        "arguments": {"runtime": 1.0, "flows": 1, "interval": 0, "run_times": 3, "seed": 0, "random_order": False},
        "emulator_options": emulator_options,
        "schemes": {name: {"display": f"TCP {name.capitalize()}", "version": "Linux 6"} for name in ("bbr", "cubic", "vegas")},
        "trials": [{"number": i + 1, "label": label, "repetition": k} for i, (label, k) in enumerate(trials)],
        "machine": {"hostname": "test", "kernel": "6", "cpus": 2, "python": "3.11"},
    }))
    for k in (1, 2, 3):
        write_run(root / "bbr" / f"run{k}", packets=100, lost_at_end=0, delay_ms=30)
        write_run(root / "cubic" / f"run{k}", packets=100, lost_at_end=LOST_AT_END[k - 1], delay_ms=20)
    write_run(root / "vegas" / "run1", packets=100, lost_at_end=0, delay_ms=10, ok=False)
    return root


def test_the_ranking_orders_by_score_with_hand_worked_confidence_intervals(tmp_path):
    analysis = analyze(data_dir(tmp_path / "data", ["--delay", "10"]), quiet=True)
    assert [r.label for r in analysis.ranking] == ["cubic", "bbr", "vegas"]
    cubic, bbr, vegas = analysis.ranking
    # k packets delivered of 1000 B, the first at 20 ms, the last at 10(k − 1) + 20 ms: 8000 k bits / 10 000 (k − 1) µs
    throughputs = [0.8 * k / (k - 1) for k in (100, 95, 90)]
    mean = sum(throughputs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in throughputs) / 2)
    assert t_quantile(2) == pytest.approx(4.302653, abs=1e-6)
    half = 4.302653 * sd / math.sqrt(3)
    assert cubic.throughput_mbps["mean"] == pytest.approx(mean)
    assert (cubic.throughput_mbps["ci_low"], cubic.throughput_mbps["ci_high"]) == pytest.approx((mean - half, mean + half))
    assert cubic.score == pytest.approx(math.log(mean / 20.0))
    assert bbr.score == pytest.approx(math.log(0.8 * 100 / 99 / 30.0))
    # loss 0, 5, 10 %: mean 5 %, sd 5 %, half-width 4.3027 · 5 / √3 = 12.42 %
    assert cubic.loss_rate["mean"] == pytest.approx(0.05)
    assert cubic.loss_rate["ci_high"] == pytest.approx(0.05 + 4.302653 * 0.05 / math.sqrt(3))
    assert (cubic.delay_p95_ms["mean"], cubic.delay_p95_ms["ci_low"], cubic.delay_p95_ms["ci_high"]) == (20.0, 20.0, 20.0)
    assert (vegas.score, vegas.valid_runs, vegas.runs, vegas.throughput_mbps["ci_low"]) == (None, 0, 1, None)

    page = (tmp_path / "data" / "report.html").read_text()
    ranking = page[page.index("<h2>Ranking</h2>"):page.index("<h2>Setup</h2>")]
    assert page.index("<h2>Ranking</h2>") < page.index("<h2>Setup</h2>")  # at the top
    cells = [re.findall(r"<td>([^<]*)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", ranking)][1:]  # below the header
    assert cells[0] == ["1. TCP Cubic", f"{math.log(mean / 20):.2f}", f"{mean:.2f}", f"{mean - half:.2f}–{mean + half:.2f}",
                        "20.0", "20.0–20.0", "5.00", "-7.42–17.42", "3 of 3"]
    assert cells[1][:2] == ["2. TCP Bbr", f"{math.log(0.8 * 100 / 99 / 30):.2f}"]
    assert cells[2] == ["TCP Vegas", "–", "–", "–", "–", "–", "–", "–", "0 of 1"]
    assert "Not ranked: TCP Vegas: no valid run (failed: flow 0 (vegas): sender exited early (status 1))." in ranking

    lines = summary_text(analysis).splitlines()
    assert lines[0].startswith(f"TCP Cubic: score {math.log(mean / 20):.2f}: ")
    assert lines[1].startswith("TCP Bbr: score ")
    assert lines[2].startswith("TCP Vegas: no valid run")


def test_the_schemes_side_by_side_one_line_or_box_each(tmp_path):
    analysis = analyze(data_dir(tmp_path / "data", []), quiet=True)
    for key, name in (("cdf", "summary_delay_cdf.png"), ("boxes", "summary_boxes.png"), ("overlay", "summary_throughput.png")):
        assert analysis.figures[key] == tmp_path / "data" / name and analysis.figures[key].read_bytes()[:4] == b"\x89PNG"
    page = (tmp_path / "data" / "report.html").read_text()
    assert "<h2>Schemes side by side</h2>" in page
    for caption in ("the CDF of the one-way delays", "95th-percentile delay (quartiles", "first valid run, in the bins"):
        assert page.count(caption) == 2  # the image's alt text and its caption

    looks = analysis.data.looks
    cubic = next(r for r in analysis.runs if r.source.label == "cubic")
    assert cubic.delay_sample_ms is not None and cubic.delay_sample_ms.size == 100 and cubic.delay_stride == 1
    delays = {"cubic": (np.full(10, 20.0), np.ones(10)), "bbr": (np.full(10, 30.0), np.ones(10))}
    assert len(plots.delay_cdf_figure(delays, looks).axes[0].lines) == 2
    boxes = plots.boxes_figure({"cubic": [(0.8, 20.0), (0.81, 20.0)], "bbr": [(0.8, 30.0)]}, looks)
    assert [len(ax.patches) for ax in boxes.axes] == [2, 2]
    overlay = plots.overlay_figure({"cubic": (np.array([0.0, 0.5]), np.array([1.0, 2.0])),
                                    "bbr": (np.array([0.0, 0.5]), np.array([2.0, 1.0]))}, looks)
    assert len(overlay.axes[0].lines) == 2


def test_a_weighted_sample_gives_the_packets_cdf():
    # each value stands for `weight` packets: 1, 2, 3 once, 4 five times (8 packets)
    x, p = plots.cdf_points(np.array([4.0, 1.0, 3.0, 2.0]), np.array([5.0, 1.0, 1.0, 1.0]), points=8)
    assert list(p) == [k / 8 for k in range(9)]
    assert list(x) == [1.0, 1.0, 2.0, 3.0, 4.0, 4.0, 4.0, 4.0, 4.0]


NOTE = html.escape(INFINITE_QUEUE_NOTE)


def test_the_loss_note_only_where_the_queue_is_infinite(tmp_path):
    analyze(data_dir(tmp_path / "infinite", ["--delay", "10", "--seed", "0"]), quiet=True)
    analyze(data_dir(tmp_path / "limited", ["--uplink-queue", "droptail", "--uplink-queue-packets", "100"]), quiet=True)
    assert NOTE in (tmp_path / "infinite" / "report.html").read_text()
    assert NOTE not in (tmp_path / "limited" / "report.html").read_text()


def sim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pantheon.cli", "sim", "--schemes", "copa", "--runtime", "1", *args],
                          capture_output=True, text=True, timeout=120)


def test_sim_prints_the_path_and_its_report_notes_the_infinite_queue(tmp_path):
    done = sim("--data-dir", str(tmp_path / "default"))
    assert done.returncode == 0, done.stderr
    assert ("pantheon: path: 12 Mbit/s each way, 0 ms, infinite queues (the default; --emulator NAME or the path options "
            "to change it)\n") in done.stderr
    assert NOTE in (tmp_path / "default" / "report.html").read_text()
    done = sim("--data-dir", str(tmp_path / "limited"), "--uplink-queue", "droptail", "--uplink-queue-packets", "50",
               "--delay", "20", "--quiet")
    assert done.returncode == 0, done.stderr
    assert "path:" not in done.stderr
    assert NOTE not in (tmp_path / "limited" / "report.html").read_text()


def test_the_path_in_one_line():
    assert describe_path([]) == ("12 Mbit/s each way, 0 ms, infinite queues "
                                 "(the default; --emulator NAME or the path options to change it)")
    assert describe_path(["--delay", "20", "--uplink-rate", "24", "--uplink-queue", "droptail",
                          "--uplink-queue-packets", "100"]) == (
        "uplink 24 Mbit/s, downlink 12 Mbit/s, 20 ms, uplink queue DropTail 100 packets, downlink queue infinite")
    assert describe_path(["--uplink-trace", "/t/x.trace", "--downlink-trace", "/t/x.trace", "--delay", "28",
                          "--uplink-loss", "0.01", "--downlink-loss", "0.01", "--uplink-queue-bytes", "9000",
                          "--downlink-queue-bytes", "9000", "--timing", "mahimahi"], "nepal-wifi") == (
        "nepal-wifi: trace x.trace, loss 0.01 each way, 28 ms, DropTail queues of 9000 bytes, Mahimahi's millisecond timing")
