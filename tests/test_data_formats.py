"""metadata.json and perf.json carry a format version: the analysis reads its own and every older
one, and refuses a newer one in one line (docs/analysis.md; Flent's resultset does the same)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pantheon import trials
from pantheon.analysis import LEGACY_HEAD_START_S, METADATA_FORMAT_VERSION, PERF_FORMAT_VERSION
from pantheon.analysis.datadir import DataDirError, open_data_dir
from pantheon.analysis.perf import read_perf_json
from pantheon.cli import main
from pantheon.plan import uniform
from support.datadir import data_dir


def _rewrite(path: Path, **changes: object) -> None:
    document = json.loads(path.read_text())
    document.update(changes)
    path.write_text(json.dumps(document))


def test_what_every_driver_writes_is_the_current_version_with_its_head_start() -> None:
    meta = trials.metadata({}, [], [], trials.trial_order([uniform("cubic", 1, 0, 5)], 1, False, 0), {}, head_start_s=0.0)
    assert meta["format_version"] == METADATA_FORMAT_VERSION == 2
    assert meta["head_start_s"] == 0.0


def test_a_data_dir_from_before_the_version_reads_with_the_head_start_of_its_day(tmp_path: Path) -> None:
    root = data_dir(tmp_path / "d")  # its metadata.json has no format_version: version 1
    assert "format_version" not in json.loads((root / "metadata.json").read_text())
    assert open_data_dir(root).head_start_s == LEGACY_HEAD_START_S == 1.0


def test_the_head_start_of_a_version_2_data_dir_is_read(tmp_path: Path) -> None:
    root = data_dir(tmp_path / "d")
    _rewrite(root / "metadata.json", format_version=2, head_start_s=0.0)
    assert open_data_dir(root).head_start_s == 0.0


@pytest.mark.parametrize(("changes", "says"), [
    ({"format_version": METADATA_FORMAT_VERSION + 1}, f"reads versions 1 to {METADATA_FORMAT_VERSION}"),
    ({"format_version": "2"}, "has format_version '2'"),
    ({"format_version": 2, "head_start_s": -1}, "head_start_s must be a number of seconds, not negative"),
])
def test_a_metadata_json_this_analysis_cannot_read_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               changes: dict, says: str) -> None:
    root = data_dir(tmp_path / "d")
    _rewrite(root / "metadata.json", **changes)
    assert main(["analyze", str(root), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and str(root / "metadata.json") in err


def test_perf_json_says_its_version_and_older_ones_read_and_newer_ones_do_not(tmp_path: Path) -> None:
    root = data_dir(tmp_path / "d")
    assert main(["analyze", str(root), "--no-plots"]) == 0
    perf = root / "perf.json"
    assert json.loads(perf.read_text())["format_version"] == PERF_FORMAT_VERSION == 2
    assert read_perf_json(perf)["schemes"]["cubic"]["runs"]["1"]["valid"]
    document = json.loads(perf.read_text())
    del document["format_version"]  # as version 1 wrote it
    perf.write_text(json.dumps(document))
    assert read_perf_json(perf)["schemes"]["cubic"]["runs"]["1"]["valid"]
    _rewrite(perf, format_version=PERF_FORMAT_VERSION + 1)
    with pytest.raises(DataDirError, match=f"reads versions 1 to {PERF_FORMAT_VERSION}"):
        read_perf_json(perf)


@pytest.mark.parametrize(("key", "value"), [
    ("start_time", 1700000000), ("arguments", ["--runtime", "10"]), ("schemes", ["cubic"]), ("schemes", "cubic"),
    ("schemes", {"cubic": "TCP Cubic"}), ("emulator_options", 3), ("emulator_options", [3]), ("machine", "vm-1"),
    ("remote", "host"), ("remote", {"host": ["a"], "sender": "local"}), ("remote", {"remote_machine": "vm"}),
    ("trials", {"label": "cubic"}), ("trials", [["cubic", 1]]), ("trials", [{"label": 1, "repetition": 1}]),
    ("pantheon_version", 1.0), ("git_commit", None),
])
def test_a_metadata_json_of_the_wrong_shape_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         key: str, value: object) -> None:
    """What a hand-edited or foreign metadata.json may hold (issue 39 §3): the analysis names the key."""
    root = data_dir(tmp_path / "d")
    _rewrite(root / "metadata.json", **{key: value})
    assert main(["analyze", str(root), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and key in err and str(root / "metadata.json") in err


@pytest.mark.parametrize("flows", ["cubic", [["cubic", 0, 1]], [{"scheme": "cubic", "start_s": "0", "duration_s": None}]])
def test_a_run_json_whose_flows_are_of_the_wrong_shape_flags_its_run(tmp_path: Path, flows: object) -> None:
    root = data_dir(tmp_path / "d", runs=2)
    run_json = root / "cubic" / "run2" / "run.json"
    run_json.write_text(json.dumps({"ok": True, "runtime_s": 1.0, "flows": flows}))
    assert main(["analyze", str(root), "--no-plots"]) == 0
    runs = json.loads((root / "perf.json").read_text())["schemes"]["cubic"]["runs"]
    assert runs["1"]["valid"] and not runs["2"]["valid"]
    assert str(run_json) in runs["2"]["flags"][0] and "flows" in runs["2"]["flags"][0]


def test_an_original_pantheon_metadata_of_the_wrong_shape_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cubic_datalink_run1.log").write_text("0 + 1500 0\n10 - 1500 10 0\n")
    (tmp_path / "pantheon_metadata.json").write_text(json.dumps({"runtime": "thirty", "flows": 1}))
    assert main(["analyze", str(tmp_path), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "runtime, flows and interval must be numbers" in err
