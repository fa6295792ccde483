"""The harness's plans and trial order, without running anything."""
from __future__ import annotations

from pathlib import Path

import pytest

from pantheon import plan
from pantheon.trials import trial_order


def test_uniform_flows_start_staggered_and_stop_together() -> None:
    p = plan.uniform("cubic", flows=3, interval_s=3, runtime_s=10)
    assert [(f.start_s, f.duration_s, f.end_s) for f in p.flows] == [(0, 10, 10), (3, 7, 10), (6, 4, 10)]


@pytest.mark.parametrize(("flows", "interval", "runtime", "message"), [
    (1, 0, 0, "--runtime must be a positive, finite number"),
    (1, 0, float("nan"), "--runtime must be a positive, finite number of seconds up to 86400 \\(one day\\), got nan"),
    (1, 0, float("inf"), "--runtime must be a positive, finite number of seconds up to 86400 \\(one day\\), got inf"),
    (2, float("nan"), 10, "--interval must be a finite number of seconds"),
    (0, 0, 10, "--flows must be from 1 to 100"),
    (101, 0, 10, "--flows must be from 1 to 100, got 101"),
    (1, 0, 1e300, "--runtime must be a positive, finite number of seconds up to 86400 \\(one day\\), got 1e\\+300"),
    (1, 0, 86_400.5, "--runtime must be a positive, finite number of seconds up to 86400"),
    (4, 5, 10, "the last of 4 flows would start at 15 s"),
])
def test_uniform_rejects_impossible_plans(flows: int, interval: float, runtime: float, message: str) -> None:
    with pytest.raises(plan.PlanError, match=message):
        plan.uniform("cubic", flows, interval, runtime)


def test_scenario_mixes_schemes(tmp_path: Path) -> None:
    path = tmp_path / "mix.toml"
    path.write_text('name = "mix"\n[[flow]]\nscheme = "cubic"\nstart_s = 0\nduration_s = 20\n'
                    '[[flow]]\nscheme = "bbr"\nstart_s = 5\nduration_s = 10\n')
    p = plan.scenario(path)
    assert p.label == "mix" and p.runtime_s == 20 and p.schemes == ["bbr", "cubic"]


@pytest.mark.parametrize(("text", "message"), [
    ("", "no \\[\\[flow\\]\\] entries \\(nor \\[\\[workload\\]\\]\\)"),
    ("[[flow]]\nscheme = 'cubic'\nstart_s = 0\n", "flow 1: needs scheme, start_s and duration_s"),
    ("[[flow]]\nscheme = 'cubic'\nstart_s = -1\nduration_s = 3\n", "flow 1: start_s must be a number of seconds >= 0, got -1"),
    ("[[flow]]\nscheme = 'cubic'\nstart_s = 0\nduration_s = nan\n", "flow 1: duration_s must be a number of seconds > 0, got nan"),
    ("[[flow]]\nscheme = 'cubic'\nstart_s = 0\nduration_s = inf\n", "flow 1: duration_s must be a number of seconds > 0, got inf"),
    ("runtime_s = nan\n[[flow]]\nscheme = 'cubic'\nstart_s = 0\nduration_s = 3\n", "runtime_s must be a positive, finite"),
    ("[[flow]\n", "not valid TOML"),
    ("runtime_s = 1e300\n[[flow]]\nscheme = 'cubic'\nstart_s = 0\nduration_s = 3\n", "up to 86400 \\(one day\\)"),
    ("[[flow]]\nscheme = 'cubic'\nstart_s = 0\nduration_s = 1e300\n", "runtime_s must be .* up to 86400"),
    ("runtime_s = 'soon'\n[[flow]]\nscheme = 'cubic'\nstart_s = 0\nduration_s = 3\n", "runtime_s must be a number of seconds"),
    ("runtime_s = true\n[[flow]]\nscheme = 'cubic'\nstart_s = 0\nduration_s = 3\n", "runtime_s must be a number of seconds"),
    ("[[flow]]\nscheme = 'cubic'\nstart_s = true\nduration_s = 3\n", "flow 1: start_s must be a number of seconds >= 0, got True"),
    ("[[flow]]\nscheme = 'cubic'\nstart_s = 0\nduration_s = 3\n" * 101, "101 flows, more than the 100 a run may have"),
])
def test_bad_scenarios_say_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(plan.PlanError, match=message):
        plan.scenario(path)


def test_trial_order_is_round_robin_and_seeded() -> None:
    plans = [plan.uniform(s, 1, 0, 5) for s in ("a", "b", "c")]
    fixed = trial_order(plans, run_times=2, random_order=False, seed=0)
    assert [(t.plan.label, t.repetition) for t in fixed] == [("a", 1), ("b", 1), ("c", 1), ("a", 2), ("b", 2), ("c", 2)]
    shuffled = [t.plan.label for t in trial_order(plans, 3, True, seed=4)]
    assert shuffled[:3] == shuffled[3:6] == shuffled[6:] and sorted(shuffled[:3]) == ["a", "b", "c"]
    assert shuffled == [t.plan.label for t in trial_order(plans, 3, True, seed=4)]
