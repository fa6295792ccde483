"""Steal time (harness/steal.py): read from /proc/stat, recorded in run.json, and a run on a host
whose hypervisor stole more than a quiet host's share gets a warning and keeps its numbers."""
from __future__ import annotations

import json
from pathlib import Path

from pantheon.analysis.analyze import QUIET_STEAL_PCT, analyze
from pantheon.harness import steal
from support.datadir import data_dir


def proc_stat(path: Path, line: str) -> Path:
    path.write_text(f"{line}\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 12345\n")
    return path


def test_steal_is_the_stolen_share_of_the_ticks_between_two_readings(tmp_path: Path) -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice: guest time is inside user.
    before = steal.read(proc_stat(tmp_path / "a", "cpu  1000 0 200 8000 10 0 40 50 300 0"))
    after = steal.read(proc_stat(tmp_path / "b", "cpu  1300 0 260 8500 10 0 40 140 400 0"))
    assert before == steal.CpuTicks(steal=50, total=9300)
    assert after == steal.CpuTicks(steal=140, total=10250)
    # 90 of 950 ticks.
    assert steal.stolen_pct(before, after) == 9.47
    assert steal.stolen_pct(after, after) is None
    assert steal.stolen_pct(None, after) is None


def test_a_kernel_without_the_column_or_a_missing_file_measures_nothing(tmp_path: Path) -> None:
    assert steal.read(proc_stat(tmp_path / "old", "cpu  1000 0 200 8000 10 0 40")) is None
    assert steal.read(proc_stat(tmp_path / "odd", "cpu  1000 0 200 8000 10 0 40 x")) is None
    assert steal.read(tmp_path / "missing") is None
    assert steal.read() is not None  # this machine's: Linux has counted steal since 2.6.11


def test_a_run_on_a_stolen_host_is_warned_of_and_keeps_its_numbers(tmp_path: Path) -> None:
    root = data_dir(tmp_path / "d", runs=3)
    for run, pct in ((1, 12.5), (2, QUIET_STEAL_PCT)):
        info_path = root / "cubic" / f"run{run}" / "run.json"
        info_path.write_text(json.dumps({**json.loads(info_path.read_text()), "host_steal_pct": pct}))
    analysis = analyze(root, draw=False, quiet=True)
    warnings = {r.source.number: r.warnings for r in analysis.runs}
    assert warnings[1] == ["the hypervisor stole 12.5% of the host's CPU time during the run (/proc/stat): its "
                           "programs stood still that share of the time, so its delays and rates are the host's as "
                           "well as the path's"]
    assert warnings[2] == warnings[3] == []
    runs = json.loads((root / "perf.json").read_text())["schemes"]["cubic"]["runs"]
    assert [runs[k]["host_steal_pct"] for k in "123"] == [12.5, QUIET_STEAL_PCT, None]
    assert all(runs[k]["valid"] for k in "123")
    assert runs["1"]["flows"]["all"]["throughput_mbps"] == runs["3"]["flows"]["all"]["throughput_mbps"]
