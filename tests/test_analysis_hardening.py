"""Bad input never stops or silently skews the analysis (issue 18 §4, §6), and the summary plot
puts each scheme's name by its dot (§7)."""
from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from matplotlib.text import Text

from pantheon.analysis import plots
from pantheon.analysis.analyze import analyze
from pantheon.cli import main
from support.datadir import data_dir


def test_a_corrupted_records_file_flags_its_run_and_the_others_are_analysed(tmp_path, capsys):
    root = data_dir(tmp_path / "d", runs=2)
    records = root / "cubic" / "run2" / "records.parquet"
    records.write_bytes(records.read_bytes()[:300])
    assert main(["analyze", str(root), "--no-report"]) == 0
    runs = json.loads((root / "perf.json").read_text())["schemes"]["cubic"]["runs"]
    assert runs["1"]["valid"]
    assert not runs["2"]["valid"] and str(records) in runs["2"]["flags"][0]
    assert "1 of 2 runs valid" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["metadata.json", "cubic/run1/run.json"])
def test_a_file_of_random_bytes_is_named(tmp_path, capsys, name):
    root = data_dir(tmp_path / "d")
    (root / name).write_bytes(b"\xe5" + os.urandom(200))
    code = main(["analyze", str(root), "--no-plots"])
    if name == "metadata.json":
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and str(root / name) in err and "not text" in err
    else:
        run = json.loads((root / "perf.json").read_text())["schemes"]["cubic"]["runs"]["1"]
        assert code == 0 and not run["valid"] and str(root / name) in run["flags"][0]


def test_a_datagram_logged_twice_counts_once_with_a_warning(tmp_path, capsys):
    clean = analyze(data_dir(tmp_path / "clean"), draw=False, quiet=True).runs[0].metrics.all
    twice = analyze(data_dir(tmp_path / "twice", duplicate_rows=3), draw=False, quiet=True)
    metrics = twice.runs[0].metrics.all
    assert metrics.throughput_mbps == clean.throughput_mbps
    assert (metrics.sent_packets, metrics.delivered_packets) == (100, 100)
    assert any("logged more than once" in w and ": 3 (rows 101, 102, 103)" in w for w in twice.runs[0].warnings)
    assert "logged more than once" in capsys.readouterr().err


@pytest.mark.parametrize(("kwargs", "why"), [({"delivered": 0}, "no delivery: nothing of the 100 packets sent"),
                                             ({"delay_ms": -5.0}, "clocks: every one-way delay was negative")])
def test_a_run_without_numbers_says_why_and_is_named_under_the_plot(tmp_path, capsys, kwargs, why):
    root = data_dir(tmp_path / "d", **kwargs)
    assert main(["analyze", str(root), "--no-report"]) == 0
    out = capsys.readouterr().out
    assert f"TCP Cubic: no valid run (0 of 1 runs valid); run 1: {why}" in out
    assert (root / "summary_means.png").exists() and (root / "summary_runs.png").exists()
    fig = plots.means_figure([], {}, ["TCP Cubic (no delivery)"])
    assert any("Not shown: TCP Cubic" in t.get_text() for t in fig.axes[0].texts)


def crowded_points(schemes: int) -> tuple[list[plots.RunPoint], dict]:
    """Means crowded in one corner, as the demo's 19 schemes on one path are, and a few apart."""
    rng = np.random.default_rng(1)
    looks = {f"s{i}": plots_look(f"Scheme number {i}", plots.flow_color(i)) for i in range(schemes)}
    points = [plots.RunPoint(f"s{i}", 1, float(60 - rng.uniform(0, 3) if i % 4 else rng.uniform(20, 60)),
                             float(11 + rng.uniform(0, 1) if i % 4 else rng.uniform(0, 12))) for i in range(schemes)]
    return points, looks


def plots_look(display: str, color: str):
    from pantheon.analysis.datadir import SchemeLook
    return SchemeLook(display, color)


@pytest.mark.parametrize("schemes", [3, 19])
def test_every_scheme_name_is_by_its_dot_or_joined_to_it_and_none_overlap(schemes):
    points, looks = crowded_points(schemes)
    fig = plots.means_figure(points, looks)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    names = [a for a in ax.texts if a.get_text().startswith("Scheme number")]
    assert len(names) == schemes
    boxes = [Text.get_window_extent(a, renderer) for a in names]  # the name's box, without its leader
    near_px = 10 * fig.dpi / 72  # 10 pt: beside the dot, a reader pairs them without a line
    for a, box in zip(names, boxes):
        x, y = ax.transData.transform(a.xy)
        gap = np.hypot(max(box.x0 - x, 0, x - box.x1), max(box.y0 - y, 0, y - box.y1))
        assert gap <= near_px or a.arrow_patch is not None, f"{a.get_text()} is {gap:.0f} px from its dot, no leader"
    overlaps = [(i, j) for i in range(schemes) for j in range(i) if boxes[i].overlaps(boxes[j])]
    assert not overlaps


@pytest.mark.parametrize("schemes", [1, 21])
def test_the_runs_legend_and_title_leave_the_data_area_and_each_other_clear(schemes):
    """Issue 39 §1: 21 schemes' legend, inside the axes, covered the title ("Ea h run") and the
    points; now it stands beside them, and the figure holds it whole."""
    points, looks = crowded_points(schemes)
    fig = plots.runs_figure(points, looks)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    data_area = ax.get_window_extent(renderer)
    [legend] = fig.legends
    legend_box, title_box = legend.get_window_extent(renderer), ax.title.get_window_extent(renderer)
    assert len(legend.get_texts()) == schemes
    assert not legend_box.overlaps(data_area) and not title_box.overlaps(data_area)
    assert not legend_box.overlaps(title_box)
    assert fig.bbox.contains(legend_box.x0, legend_box.y0) and fig.bbox.contains(legend_box.x1, legend_box.y1)


def late_flows_dir(root, flows: int, late_s: float):
    """A 10 s run of `flows` flows planned from 0 s, whose first packets left late_s late, each
    delivering until 10 s; the machine has 2 CPUs."""
    root.mkdir()
    (root / "metadata.json").write_text(json.dumps({"schemes": {"cubic": {"display": "TCP Cubic"}},
                                                    "machine": {"cpus": 2}}))
    run_dir = root / "cubic" / "run1"
    run_dir.mkdir(parents=True)
    send = [int(late_s * 1e6) + k * 10_000 for k in range(int((10 - late_s) * 100))]
    rows = [(f, uid, t) for f in range(flows) for uid, t in enumerate(send)]
    pq.write_table(pa.table({
        "flow": pa.array([r[0] for r in rows], pa.uint16()), "direction": ["data"] * len(rows),
        "uid": pa.array([r[1] for r in rows], pa.uint64()), "size_bytes": pa.array([1000] * len(rows), pa.uint32()),
        "send_us": pa.array([r[2] for r in rows], pa.int64()), "recv_us": pa.array([r[2] + 20_000 for r in rows], pa.int64()),
    }), run_dir / "records.parquet")
    (run_dir / "run.json").write_text(json.dumps({"ok": True, "failures": [], "runtime_s": 10.0, "flows": [
        {"scheme": "cubic", "start_s": 0.0, "duration_s": 10.0}] * flows}))
    return root


def test_the_campaign_line_is_the_analysis_verdict_and_says_why_flows_were_short(tmp_path):
    from pantheon.analysis.cli import campaign_line

    root = late_flows_dir(tmp_path / "d", flows=50, late_s=2.5)
    line = campaign_line(root, 1, 0)
    assert line.startswith("pantheon: 1 of 1 runs ok, 0 of 1 runs valid; cubic run 1: short: ")
    flags = analyze(root, draw=False, quiet=True).runs[0].metrics.flags
    assert flags == ["short: data moved for 7.5 s of 10 s",
                     "short: 50 of 50 flows moved data for 7.5 s of 10 s: 50 sent their first packet 2.5 s after their "
                     "planned start (the machine could not start 50 flows on 2 CPUs on time)"]
    on_time = late_flows_dir(tmp_path / "e", flows=2, late_s=0.2)
    assert campaign_line(on_time, 1, 0) == f"pantheon: 1 of 1 runs ok, 1 of 1 runs valid; data in {on_time}"


def test_pantheon_sim_ends_with_the_analysis_verdict(tmp_path, capsys):
    assert main(["sim", "--schemes", "cubic-user", "--runtime", "1", "--data-dir", str(tmp_path / "d"), "--no-analyze"]) == 0
    assert f"pantheon: 1 of 1 runs ok, 1 of 1 runs valid; data in {tmp_path / 'd'}" in capsys.readouterr().err
