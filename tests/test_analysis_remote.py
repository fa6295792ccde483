"""`pantheon analyze` on a synthetic data dir of `pantheon test remote` (docs/remote.md; contracts:
metadata.json's "remote", run.json's "clock" and "flags"): the report says the path was real,
between which hosts and which way the data flowed; every one-way delay carries the run's clock
bound; a run the harness flagged for its clocks is shown flagged and left out of the means."""
from __future__ import annotations

import html
import json
import re

import pyarrow.csv as pcsv
import pytest

from pantheon.cli import main
from test_analysis_cli import write_run

CLOCK = {"t_ref_us": 1_795_000_015_000_000, "offset_us": -7_012_345.6, "drift_us_per_s": 21.4, "exchanges": 212,
         "kept": 37, "min_rtt_us": 402, "residual_us": 12.4, "bound_us": 213.4, "step": None}
"""A fit as harness/clock.py writes it: the bound is 0.2134 ms, printed rounded up as 0.22."""
STEP_FLAG = ("clock: the remote host's clock stepped by +200.000 ms at 11:06:55.250 UTC (local clock) during the run; "
             "one-way delays around it are off by up to that much")


def remote_run(run_dir, flags: list[str], **kwargs) -> None:
    write_run(run_dir, **kwargs)
    info = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**info, "clock": CLOCK, "flags": flags}))


@pytest.fixture
def remote_dir(tmp_path):
    root = tmp_path / "remote"
    root.mkdir()
    machine = {"hostname": "laptop", "kernel": "6.1", "cpus": 8, "python": "3.11"}
    (root / "metadata.json").write_text(json.dumps({
        "pantheon_version": "0.1.0", "git_commit": "a" * 40, "start_time": "2026-11-24T18:00:00+00:00",
        "arguments": {"runtime": 1.0, "flows": 1, "interval": 0, "run_times": 2, "seed": 0, "random_order": False},
        "emulator_options": [],
        "schemes": {"cubic": {"display": "TCP Cubic", "version": "Linux 6"}},
        "trials": [{"number": 1, "label": "cubic", "repetition": 1}, {"number": 2, "label": "cubic", "repetition": 2}],
        "machine": machine,
        "remote": {"host": "pantheon@node.example.org", "dir": "/srv/pantheon", "sender": "remote", "tunnel_server": "local",
                   "local_addr": "10.0.0.1", "remote_addr": "198.51.100.7", "local_desc": "Stanford wired",
                   "remote_desc": "Colombia cellular", "remote_machine": {**machine, "hostname": "node", "cpus": 4},
                   "remote_sysctls": {}, "remote_git_commit": "a" * 40, "remote_pantheon_version": "0.1.0"},
    }))
    remote_run(root / "cubic" / "run1", [], packets=100, lost_at_end=10, delay_ms=20)
    remote_run(root / "cubic" / "run2", [STEP_FLAG], packets=100, lost_at_end=0, delay_ms=30)
    return root


def test_a_remote_data_dir_says_where_the_path_ran_and_bounds_every_delay(remote_dir, capsys):
    assert main(["analyze", str(remote_dir)]) == 0
    out = capsys.readouterr().out
    assert ("Real path, data flowing Colombia cellular (198.51.100.7) → Stanford wired (10.0.0.1) (the remote host sent); "
            "tunnel server on the local host") in out
    # Only run 1 is valid: run 2's clock stepped.
    assert "TCP Cubic: score -3.21: 0.81 Mbit/s, 95th percentile delay 20.0 ms ± 0.22 ms (clock), loss 10.00 % (1 of 2 runs valid)" in out

    perf = json.loads((remote_dir / "perf.json").read_text())
    runs = perf["schemes"]["cubic"]["runs"]
    assert runs["1"]["delay_bound_ms"] == pytest.approx(0.2134) and runs["1"]["valid"]
    assert runs["2"]["flags"] == [STEP_FLAG] and not runs["2"]["valid"]
    assert perf["schemes"]["cubic"]["summary"]["delay_bound_ms"] == pytest.approx(0.2134)
    assert perf["schemes"]["cubic"]["summary"]["all"]["delay_p95_ms"]["mean"] == 20.0
    table = pcsv.read_csv(remote_dir / "perf.csv").to_pylist()
    assert [r["delay_bound_ms"] for r in table] == [pytest.approx(0.2134)] * 4

    page = html.unescape((remote_dir / "report.html").read_text())
    text = re.sub(r"<[^>]+>", " ", page)
    assert "a real path between Stanford wired (10.0.0.1), here, and Colombia cellular (198.51.100.7), reached over ssh" in text
    assert "Emulator options" not in text
    assert "Remote machine" in text and "node: Linux 6.1, 4 CPUs" in text
    assert "one-way delays are within ± 0.22 ms of the truth" in text
    assert "95th pct. delay (ms ± clock)" in text and "95th pct. delay (ms; clock ± 0.22)" in text
    # Every delay of the run tables (p95, mean, median of flow 1 in both runs) carries the bound.
    assert len(re.findall(r"<td>20\.0 ± 0\.22</td>", page)) == 3 and len(re.findall(r"<td>30\.0 ± 0\.22</td>", page)) == 3
    assert "the remote host's clock read -7012.346 ms from the local one, drifting +21.4 µs/s; 37 of 212 exchanges" in text
    assert f"<span class=flag>{STEP_FLAG}</span>" in page
    assert "Clock bound (a real path)" in text
    assert (remote_dir / "report.pdf").read_bytes().startswith(b"%PDF")


def test_a_local_data_dir_has_no_clock_bound(tmp_path, capsys):
    root = tmp_path / "local"
    root.mkdir()
    (root / "metadata.json").write_text(json.dumps({"arguments": {"runtime": 1.0}, "emulator_options": ["--delay", "20"],
                                                     "schemes": {"cubic": {}}}))
    write_run(root / "cubic" / "run1", packets=100, lost_at_end=0, delay_ms=20)
    assert main(["analyze", str(root), "--no-plots"]) == 0
    assert "95th percentile delay 20.0 ms, loss" in capsys.readouterr().out
    perf = json.loads((root / "perf.json").read_text())
    assert perf["schemes"]["cubic"]["runs"]["1"]["delay_bound_ms"] is None
    assert perf["schemes"]["cubic"]["summary"]["delay_bound_ms"] is None
