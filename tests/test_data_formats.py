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
