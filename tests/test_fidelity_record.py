"""bench/sim_fidelity.py's record of emulated runs (data/fidelity/emulated.json): a run written
there is read back, with its replay and its host's steal, where the matrix's data dir lacks it, and
is not emulated again; a record of another format is refused with one line; of a seed's runs
emulated more than once, the run on the quietest host counts. And a flagged cell's cause: a run on
a stolen host is named as such unless its replay agrees."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import sim_fidelity
from sim_fidelity import Cell, Emulated, Record, Where

DEMO = Where("demo", "shallow", 1)


def test_a_recorded_run_is_read_back_with_its_replay(tmp_path: Path) -> None:
    path = tmp_path / "emulated.json"
    record = Record(path)
    key = Record.key(DEMO, 10.0, 0, "cubic-user")
    assert key == "demo shallow 1 10s seed0 cubic-user" and record.get(key) is None
    record.put(key, Emulated((11.5, 31.2), (11.4, 30.9), None, 0.4), "cubic", "abc123")
    record.put(Record.key(DEMO, 10.0, 0, "copa"), Emulated(None, None, None, None), "copa", "abc123")
    record.save()
    again = Record(path)
    assert again.get(key) == Emulated((11.5, 31.2), (11.4, 30.9), None, 0.4)
    assert again.get(Record.key(DEMO, 10.0, 0, "copa")) == Emulated(None, None, None, None)
    assert len(path.read_text().splitlines()) == 1 + 2 + 1, "a line for each run, between the header and the end"


def test_the_matrix_takes_a_recorded_run_where_its_data_dir_lacks_it(tmp_path: Path) -> None:
    record = Record(tmp_path / "emulated.json")
    record.put(Record.key(DEMO, 10.0, 0, "cubic-user"), Emulated((11.5, 31.2), (11.4, 30.9), None, 7.5), "cubic",
               "abc123")
    # Not --sim-only: a run in neither the data dir nor the record would be emulated here; the
    # recorded one is read instead, and nothing runs.
    runs = sim_fidelity.emulated_side(tmp_path / "matrix", DEMO, ["cubic-user"], 1, 10.0, {"cubic-user": "cubic"},
                                      "def456", False, None, record)
    assert runs == {"cubic-user": [Emulated((11.5, 31.2), (11.4, 30.9), None, 7.5)]}


def test_of_a_seeds_runs_emulated_again_the_quietest_hosts_counts(tmp_path: Path) -> None:
    seed_dir = tmp_path / "matrix" / "demo" / "shallow" / "1flow" / "emu-10s" / "seed0"
    # Three campaigns of the seed, as --again-stolen leaves them (runs the analysis found invalid,
    # so that nothing is replayed here): cubic-user on a stolen host, then on quieter ones; copa
    # once, on a host whose steal was not measured.
    for part, schemes in enumerate([{"cubic-user": 12.0, "copa": None}, {"cubic-user": 3.1}, {"cubic-user": 0.2},
                                    {"cubic-user": 0.9}]):
        (seed_dir / f"part{part}").mkdir(parents=True)
        (seed_dir / f"part{part}" / "perf.json").write_text(json.dumps({"schemes": {
            name: {"runs": {"1": {"valid": False, "flows": {}, "host_steal_pct": pct}}} for name, pct in schemes.items()}}))
    record = Record(None)
    runs = sim_fidelity.emulated_side(tmp_path / "matrix", DEMO, ["cubic-user", "copa"], 1, 10.0,
                                      {"cubic-user": "cubic", "copa": "copa"}, "abc123", True, None, record)
    assert runs == {"cubic-user": [Emulated(None, None, None, 0.2)], "copa": [Emulated(None, None, None, None)]}
    assert sim_fidelity.quietest({Path("a"): {"x": [None]}, Path("b"): {"x": [5.0]}}) == {"x": (Path("b"), 5.0)}, \
        "a measured host beats an unmeasured one"


def test_a_cell_whose_host_was_stolen_says_so_unless_its_replay_agrees() -> None:
    def flagged(steal_pcts: list[float], replay_p95_ms: float) -> dict:
        # The emulator's p95 20% over the simulator's; throughput the same.
        cell = Cell("vegas-user", "vegas-user", DEMO, emu=[(10.0, 30.0), (10.0, 30.0)], sim=[(10.0, 25.0)] * 3,
                    replays=[(10.0, replay_p95_ms)] * 2, steal_pcts=steal_pcts)
        return sim_fidelity.judged(cell)

    stolen = flagged([0.3, 12.0], replay_p95_ms=25.0)
    assert (stolen["verdict"], stolen["causes"], stolen["emu_steal_pct"]) == ("flag", {"p95": "stolen"}, 12.0)
    assert sim_fidelity.verdict(stolen) == "flag: p95 stolen (12.0% of the CPUs)"
    assert flagged([0.3, 1.9], replay_p95_ms=25.0)["causes"] == {"p95": "hosts"}
    assert flagged([12.0], replay_p95_ms=29.0)["causes"] == {"p95": "draws"}
    assert "emu_steal_pct" not in flagged([], replay_p95_ms=25.0)


def test_a_record_of_another_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "emulated.json"
    path.write_text('{"format_version": 99, "runs": {}}\n')
    with pytest.raises(SystemExit, match="record format 99"):
        Record(path)
