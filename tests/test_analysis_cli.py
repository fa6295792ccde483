"""`pantheon analyze` end to end on tiny synthetic data dirs (this harness's layout and the original
Pantheon's), with numbers worked out by hand; every output file is checked to exist and the report
to be self-contained."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from pantheon.analysis.cli import after_campaign
from pantheon.cli import main


def write_run(run_dir, *, packets: int, lost_at_end: int, delay_ms: int, ok: bool = True):
    """One flow of 1000-byte packets sent every 10 ms from t = 0; each arrives delay_ms later
    except the last lost_at_end; delivery opportunities of 1500 B every ms for 1 s."""
    run_dir.mkdir(parents=True)
    send = [i * 10_000 for i in range(packets)]
    recv = [t + delay_ms * 1000 if i < packets - lost_at_end else None for i, t in enumerate(send)]
    pq.write_table(pa.table({
        "flow": pa.array([0] * packets, pa.uint16()), "direction": ["data"] * packets,
        "uid": pa.array(range(packets), pa.uint64()), "size_bytes": pa.array([1000] * packets, pa.uint32()),
        "send_us": pa.array(send, pa.int64()), "recv_us": pa.array(recv, pa.int64()),
    }), run_dir / "records.parquet")
    lines = [(t, f"{t / 1000:.3f} # 1500") for t in range(0, 1_000_000, 1000)]
    lines += [(t, f"{t / 1000:.3f} + 1000 1") for t in send]
    lines += [(r, f"{r / 1000:.3f} - 1000 {delay_ms:.3f} 1") for r in recv if r is not None]
    (run_dir / "datalink.log").write_text("# init timestamp: 0.000\n" + "".join(f"{line}\n" for _, line in sorted(lines)))
    (run_dir / "run.json").write_text(json.dumps({
        "ok": ok, "failures": [] if ok else [f"flow 0 ({run_dir.parent.name}): sender exited early (status 1)"],
        "label": run_dir.parent.name, "repetition": int(run_dir.name[3:]), "runtime_s": 1.0, "t0_epoch_s": 1e9,
        "flows": [{"scheme": run_dir.parent.name, "start_s": 0.0, "duration_s": 1.0}]}))


@pytest.fixture
def data_dir(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "metadata.json").write_text(json.dumps({
        "pantheon_version": "0.1.0", "git_commit": "0" * 40, "start_time": "2026-01-01T00:00:00+00:00",
        "arguments": {"runtime": 1.0, "flows": 1, "interval": 0, "run_times": 2, "seed": 0, "random_order": False},
        "emulator_options": ["--delay", "20", "--uplink-rate", "12", "--downlink-rate", "12"],
        "schemes": {"cubic": {"display": "TCP Cubic", "version": "Linux 6"}, "bbr": {"display": "TCP BBR", "version": "Linux 6"}},
        "trials": [{"number": 1, "label": "cubic", "repetition": 1}, {"number": 2, "label": "bbr", "repetition": 1},
                   {"number": 3, "label": "cubic", "repetition": 2}],
        "machine": {"hostname": "test", "kernel": "6", "cpus": 2, "python": "3.11"},
    }))
    write_run(root / "cubic" / "run1", packets=100, lost_at_end=10, delay_ms=20)
    write_run(root / "cubic" / "run2", packets=50, lost_at_end=0, delay_ms=20)  # data for 0.51 s of 1 s: short
    write_run(root / "bbr" / "run1", packets=100, lost_at_end=0, delay_ms=30, ok=False)
    return root


def analyze(*args):
    return subprocess.run([sys.executable, "-m", "pantheon.cli", "analyze", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_analyze_writes_every_output_with_hand_worked_numbers(data_dir):
    done = analyze(data_dir)
    assert done.returncode == 0, done.stderr
    # score ln(0.809 Mbit/s / 20 ms)
    assert "TCP Cubic: score -3.21: 0.81 Mbit/s, 95th percentile delay 20.0 ms, loss 10.00 % (1 of 2 runs valid)" in done.stdout
    assert "TCP BBR: no valid run (0 of 1 runs valid)" in done.stdout
    for name in ("perf.json", "perf.csv", "perf.parquet", "summary_runs.png", "summary_means.png", "report.html", "report.pdf"):
        assert (data_dir / name).stat().st_size > 0, name
    for run in ("cubic/run1", "cubic/run2", "bbr/run1"):
        for name in ("throughput.png", "delay.png"):
            assert (data_dir / run / name).read_bytes()[:4] == b"\x89PNG"

    perf = json.loads((data_dir / "perf.json").read_text())
    run1 = perf["schemes"]["cubic"]["runs"]["1"]
    flow = run1["flows"]["1"]
    # 90 of 100 packets of 1000 B delivered, at 20 ms .. 910 ms: 720 000 bits / 890 000 us
    assert flow["throughput_mbps"] == pytest.approx(720_000 / 890_000)
    assert flow["delay_p95_ms"] == 20.0
    assert flow["loss_rate"] == pytest.approx(0.1)
    # 1000 opportunities of 1500 B from 0 to 999 ms: 12 000 000 bits / 999 000 us
    assert run1["capacity_mbps"] == pytest.approx(12_000_000 / 999_000)
    assert run1["utilization"] == pytest.approx((720_000 / 890_000) / (12_000_000 / 999_000))
    assert run1["valid"] and run1["flags"] == []
    run2 = perf["schemes"]["cubic"]["runs"]["2"]
    assert run2["flags"] == ["short: data moved for 0.5 s of 1 s", "short: flow 1 moved data for 0.5 s of 1 s"]
    assert perf["schemes"]["bbr"]["runs"]["1"]["flags"] == ["failed: flow 0 (bbr): sender exited early (status 1)"]
    summary = perf["schemes"]["cubic"]["summary"]
    assert (summary["valid_runs"], summary["runs"]) == (1, 2)
    assert summary["all"]["throughput_mbps"]["mean"] == pytest.approx(720_000 / 890_000)
    assert summary["all"]["throughput_mbps"]["sd"] is None  # one valid run

    table = pcsv.read_csv(data_dir / "perf.csv").to_pylist()
    assert len(table) == 2 * 3  # flow 1 and "all" of three runs
    row = next(r for r in table if r["scheme"] == "cubic" and r["run"] == 1 and str(r["flow"]) == "1")
    assert row["delay_p95_ms"] == 20.0 and row["valid"] is True
    assert pq.read_table(data_dir / "perf.parquet").num_rows == 6

    page = (data_dir / "report.html").read_text()
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)  # nothing fetched: opens offline
    assert page.count('src="data:image/png;base64,') == 2 + 3 + 2 * 3  # summary, side by side, per run
    assert "TCP Cubic" in page and "short: data moved for 0.5 s of 1 s" in page
    pdf = (data_dir / "report.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type /Page\b", pdf)) >= 1 + 3  # summary + one per run


def test_an_original_pantheon_data_dir(tmp_path):
    (tmp_path / "pantheon_metadata.json").write_text(json.dumps({"runtime": 0.01, "flows": 1, "interval": 0}))
    (tmp_path / "vegas_datalink_run1.log").write_text(
        "# init timestamp: 1504023415870\n0 + 1500\n1 + 1500\n2 + 1500\n10 - 1500 10\n12 - 1500 11\n")
    done = analyze(tmp_path, "--no-plots")
    assert done.returncode == 0, done.stderr
    perf = json.loads((tmp_path / "perf.json").read_text())
    assert perf["layout"] == "pantheon"
    run = perf["schemes"]["vegas"]["runs"]["1"]
    # 3000 B from 10 to 12 ms = 12 Mbit/s; one of three packets lost; delays 10, 11 ms
    assert run["flows"]["1"]["throughput_mbps"] == pytest.approx(12.0)
    assert run["flows"]["1"]["loss_rate"] == pytest.approx(1 / 3)
    assert run["flows"]["1"]["delay_p95_ms"] == 11.0
    assert run["valid"]  # 12 ms of data for a 10 ms run
    assert not (tmp_path / "report.html").exists()


def test_bad_data_dirs_are_one_line_errors(tmp_path, capsys):
    assert main(["analyze", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a directory" in err
    assert main(["analyze", str(tmp_path)]) == 2
    assert "neither metadata.json" in capsys.readouterr().err
    for bin_ms in ("-5", "nan", "inf", "1e-300", "1e300"):
        assert main(["analyze", str(tmp_path), "--bin-ms", bin_ms]) == 2
        assert "--bin-ms must be from 1 to 3.6e+06 ms (one hour), got " in capsys.readouterr().err


def test_a_failed_analysis_after_a_campaign_says_so_and_raises_nothing(tmp_path, capsys):
    assert after_campaign(tmp_path, quiet=True) is False
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the data is intact, retry with: pantheon analyze" in err


def test_records_and_their_text_form_give_the_same_metrics(data_dir):
    from pantheon.analysis.logs import read_records, read_text_log
    from pantheon.analysis.metrics import run_metrics

    run_dir = data_dir / "cubic" / "run1"
    exact, _ = read_records(run_dir / "records.parquet")
    text, problems = read_text_log(run_dir / "datalink.log")
    assert problems.messages() == []
    a, b = run_metrics(exact).all, run_metrics(text).all
    assert (a.throughput_mbps, a.delay_p95_ms, a.loss_rate, a.sent_bytes) == (b.throughput_mbps, b.delay_p95_ms, b.loss_rate, b.sent_bytes)
