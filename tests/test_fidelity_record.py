"""bench/sim_fidelity.py's record of emulated runs (data/fidelity/emulated.json): a run written
there is read back, with its replay, where the matrix's data dir lacks it, and is not emulated
again; a record of another format is refused with one line."""
from __future__ import annotations

from pathlib import Path

import pytest

import sim_fidelity
from sim_fidelity import Record, Where

DEMO = Where("demo", "shallow", 1)


def test_a_recorded_run_is_read_back_with_its_replay(tmp_path: Path) -> None:
    path = tmp_path / "emulated.json"
    record = Record(path)
    key = Record.key(DEMO, 10.0, 0, "cubic-user")
    assert key == "demo shallow 1 10s seed0 cubic-user" and record.get(key) is None
    record.put(key, (11.5, 31.2), (11.4, 30.9), "cubic", "abc123")
    record.put(Record.key(DEMO, 10.0, 0, "copa"), None, None, "copa", "abc123")
    record.save()
    again = Record(path)
    assert again.get(key) == ((11.5, 31.2), (11.4, 30.9))
    assert again.get(Record.key(DEMO, 10.0, 0, "copa")) == (None, None)
    assert len(path.read_text().splitlines()) == 1 + 2 + 1, "a line for each run, between the header and the end"


def test_the_matrix_takes_a_recorded_run_where_its_data_dir_lacks_it(tmp_path: Path) -> None:
    record = Record(tmp_path / "emulated.json")
    record.put(Record.key(DEMO, 10.0, 0, "cubic-user"), (11.5, 31.2), (11.4, 30.9), "cubic", "abc123")
    # Not --sim-only: a run in neither the data dir nor the record would be emulated here; the
    # recorded one is read instead, and nothing runs.
    runs = sim_fidelity.emulated_side(tmp_path / "matrix", DEMO, ["cubic-user"], 1, 10.0, {"cubic-user": "cubic"},
                                      "def456", False, None, record)
    assert runs == {"cubic-user": [((11.5, 31.2), (11.4, 30.9), None)]}


def test_a_record_of_another_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "emulated.json"
    path.write_text('{"format_version": 99, "runs": {}}\n')
    with pytest.raises(SystemExit, match="record format 99"):
        Record(path)
