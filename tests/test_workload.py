"""Scenario workloads (issue 35 §1): the size CDFs, the arrival models and their expansion into a
run's flows, drawn once with the scenario's seed; bad input in one line naming file, table and key."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from pantheon import plan, workload


def _scenario(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


def test_shipped_cdfs_have_their_papers_means() -> None:
    sizes = {name: workload.load_sizes(name, Path(".")) for name in ("websearch", "datamining")}
    assert workload.shipped_sizes() == ["datamining", "websearch"]
    # pFabric's tables in 1460-byte packets: web search 1.67 MB on average, data mining 7.47 MB.
    assert sizes["websearch"].mean_bytes() == pytest.approx(1_665_831, rel=1e-6)
    assert sizes["datamining"].mean_bytes() == pytest.approx(7_470_236, rel=1e-6)
    # Half of the data-mining flows are one packet: the atom at the first point.
    rng = random.Random(1)
    draws = [sizes["datamining"].draw(rng) for _ in range(20_000)]
    assert sum(d == 1460 for d in draws) / len(draws) == pytest.approx(0.5, abs=0.01)


def test_a_cdf_is_inverted_with_linear_interpolation() -> None:
    cdf = workload.parse_cdf("# bytes p\n1000 0\n2000 0.5\n4000,1\n", "mine")
    assert cdf.mean_bytes() == pytest.approx(0.5 * 1500 + 0.5 * 3000)

    class Fixed(random.Random):
        def __init__(self, u: float) -> None:
            super().__init__()
            self.u = u

        def random(self) -> float:
            return self.u

    assert [cdf.draw(Fixed(u)) for u in (0.0, 0.25, 0.5, 0.75, 1.0)] == [1000, 1500, 2000, 3000, 4000]


@pytest.mark.parametrize(("text", "message"), [
    ("100 0.5\n50 1\n", "line 2: not a CDF: sizes and probabilities must not decrease"),
    ("100 0.5\n200 0.4\n300 1\n", "line 2: not a CDF"),
    ("100 0.5\n200 0.9\n", "its last probability must be 1, got 0.9"),
    ("-5 0\n100 1\n", "line 1: a size must be > 0"),
    ("100 0\n200 1.5\n", "line 2: a probability must be in \\[0, 1\\], got 1.5"),
    ("one two\n", "line 1: expected 'bytes probability'"),
    ("", "no points"),
])
def test_a_file_that_is_not_a_cdf_says_which_line(text: str, message: str) -> None:
    with pytest.raises(workload.WorkloadError, match=message):
        workload.parse_cdf(text, "bad")


def test_poisson_arrivals_offer_the_load() -> None:
    sizes = workload.parse_cdf("10000 0\n30000 1\n", "uniform")  # mean 20 kB
    arrivals = workload.poisson_arrivals(random.Random(7), sizes, load=0.5, rate_mbps=12, start_s=2, duration_s=200)
    # λ = 0.5 · 12e6 / (8 · 20 000) = 37.5 a second.
    assert len(arrivals) == pytest.approx(37.5 * 200, rel=0.03)
    assert all(2 <= t < 202 for t, _ in arrivals) and arrivals == sorted(arrivals)
    offered_mbps = sum(size for _, size in arrivals) * 8 / 200 / 1e6
    assert offered_mbps == pytest.approx(6.0, rel=0.03)
    assert workload.peak_arrivals_per_s([0.0, 0.5, 0.99, 1.0, 1.5, 3.0]) == 3  # e.g. 0.5, 0.99, 1.0


def test_on_periods_alternate_inside_the_window() -> None:
    fixed = workload.on_periods(random.Random(1), on_s=2, off_s=3, exponential=False, start_s=1, duration_s=11)
    assert fixed == [(1, 2), (6, 2), (11, 1)]
    drawn = workload.on_periods(random.Random(1), on_s=1, off_s=1, exponential=True, start_s=0, duration_s=1000)
    on_share = sum(d for _, d in drawn) / 1000
    assert on_share == pytest.approx(0.5, abs=0.05)


def test_a_scenario_expands_its_workloads_once_with_its_seed(tmp_path: Path) -> None:
    path = _scenario(tmp_path, """
name = "web"
runtime_s = 30
seed = 3
[[flow]]
scheme = "cubic"
start_s = 0
duration_s = 30
extra_delay_ms = 40
[[flow]]
scheme = "copa"
start_s = 1
bytes = 100_000
[[workload]]
kind = "poisson"
scheme = "cubic-user"
load = 0.3
sizes = "websearch"
duration_s = 20
[[workload]]
kind = "onoff"
scheme = "vegas-user"
on_s = 2
off_s = 2
distribution = "fixed"
start_s = 10
duration_s = 10
[[workload]]
kind = "cbr"
rate_mbps = 2
[[workload]]
kind = "probes"
interval_ms = 50
extra_delay_ms = 5
[[workload]]
kind = "cbr"
rates_mbps = [1, 4, 0.5]
step_s = 2
""")
    p = plan.scenario(path, rate_mbps=100)
    roles = [f.role for f in p.flows]
    assert roles == ["bulk", "finite", "poisson", "onoff", "onoff", "onoff", "cbr", "probes", "cbr"]
    bulk, finite, poisson = p.flows[:3]
    assert bulk.extra_delay_ms == 40 and not bulk.transfers
    assert (finite.start_s, finite.duration_s, finite.transfers) == (1, 29, (plan.Transfer(1, 100_000),))
    # 0.3 of 100 Mbit/s over 20 s in 1.67 MB transfers: 45 expected.
    assert 25 <= len(poisson.transfers) <= 65 and poisson.end_s == 30
    assert [(f.start_s, f.duration_s) for f in p.flows[3:6]] == [(10, 2), (14, 2), (18, 2)]
    assert p.flows[6].cc == "cbr:rate_mbps=2" and p.flows[6].scheme == plan.CBR_SCHEME
    assert p.flows[7].cc == "cbr:interval_ms=50" and p.flows[7].extra_delay_ms == 5
    assert p.flows[8].cc == "cbr:rates_mbps=1/4/0.5,step_s=2"
    assert plan.scenario(path, rate_mbps=100) == p
    assert plan.scenario(_scenario(tmp_path, path.read_text().replace("seed = 3", "seed = 4")), rate_mbps=100) != p


@pytest.mark.parametrize(("text", "message"), [
    ("[[workload]]\nkind = 'burst'\nduration_s = 1\n", "workload 1: kind must be one of poisson, onoff, cbr, probes, got 'burst'"),
    ("[[workload]]\nkind = 'cbr'\nrate_mbps = 1\nduration_s = 1\nsize = 3\n", "workload 1 \\(cbr\\): unknown key 'size'"),
    ("[[flow]]\nscheme = 'cubic'\nstart_s = 0\nduration_s = 1\nbytez = 3\n", "flow 1: unknown key 'bytez'"),
    ("[[flow]]\nscheme = 'cubic'\nstart_s = 0\nduration_s = 1\nkind = 'cbr'\n", "flow 1: unknown key 'kind'"),
    ("[[workload]]\nkind = 'poisson'\nscheme = 'cubic'\nload = 1.5\nsizes = 'websearch'\nduration_s = 5\n",
     "workload 1 \\(poisson\\): load must be a fraction of the bottleneck's rate in \\(0, 1\\), got 1.5"),
    ("[[workload]]\nkind = 'poisson'\nscheme = 'cubic'\nload = 0\nsizes = 'websearch'\nduration_s = 5\n", "load must be"),
    ("[[workload]]\nkind = 'poisson'\nscheme = 'cubic'\nload = 0.5\nsizes = 'nope'\nduration_s = 5\n",
     "workload 1 \\(poisson\\): sizes: 'nope' is neither a shipped size distribution \\(datamining, websearch\\) nor a file"),
    ("[[workload]]\nkind = 'poisson'\nscheme = 'cubic'\nload = 0.5\nsizes = 'bad.cdf'\nduration_s = 5\n",
     "workload 1 \\(poisson\\): sizes: .*bad.cdf: line 2: not a CDF"),
    ("[[flow]]\nscheme = 'cubic'\nstart_s = 0\nbytes = 0\nduration_s = 3\n", "flow 1: bytes must be a whole number of bytes from 1"),
    ("[[workload]]\nkind = 'poisson'\nscheme = 'cubic'\nload = 0.5\nsizes = 'bad.cdf'\n", "say runtime_s"),
    ("[[workload]]\nkind = 'poisson'\nscheme = 'cubic'\nload = 0.9\nsizes = 'tiny.cdf'\nduration_s = 100\n",
     "about 1,350,000 arrivals, more than the 100,000 a run may have"),
    ("[[workload]]\nkind = 'onoff'\nscheme = 'cubic'\non_s = 0.01\noff_s = 0.01\ndistribution = 'fixed'\nduration_s = 10\n",
     "50[01] flows \\(on/off periods count one each\\), more than the 100"),
    ("[[workload]]\nkind = 'onoff'\nscheme = 'cubic'\non_s = 1\noff_s = 1\ndistribution = 'normal'\nduration_s = 10\n",
     "distribution must be exponential or fixed, got 'normal'"),
    ("[[flow]]\nscheme = 'cubic'\nstart_s = 0\nduration_s = 3\nextra_delay_ms = -1\n", "extra_delay_ms must be a number of ms"),
    ("seed = 'x'\n[[flow]]\nscheme = 'cubic'\nstart_s = 0\nduration_s = 3\n", "seed must be a whole number"),
    ("[[workload]]\nkind = 'cbr'\nrates_mbps = [1, 0]\nstep_s = 1\nduration_s = 3\n",
     "rates_mbps must be a list of 1 to 10000 rates, each a rate in Mbit/s of at least 0.023"),
    ("[[workload]]\nkind = 'cbr'\nrates_mbps = [1, 2]\nduration_s = 3\n", "needs step_s"),
    ("[[workload]]\nkind = 'cbr'\nrate_mbps = 1\nrates_mbps = [1, 2]\nstep_s = 1\nduration_s = 3\n", "not both"),
    ("[[workload]]\nkind = 'cbr'\nrate_mbps = 1\nstep_s = 1\nduration_s = 3\n", "step_s goes with rates_mbps"),
    ("flows = 1\n[[flow]]\nscheme = 'cubic'\nstart_s = 0\nduration_s = 3\n", "unknown key 'flows'"),
])
def test_bad_workloads_say_file_table_and_key(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "bad.cdf").write_text("100 0.5\n50 1\n")
    (tmp_path / "tiny.cdf").write_text("100 1\n")
    with pytest.raises(plan.PlanError, match=message):
        plan.scenario(_scenario(tmp_path, text), rate_mbps=12)


def test_a_load_needs_a_rate(tmp_path: Path) -> None:
    path = _scenario(tmp_path, "[[workload]]\nkind = 'poisson'\nscheme = 'cubic'\nload = 0.5\nsizes = 'websearch'\n"
                               "duration_s = 5\n")
    with pytest.raises(plan.PlanError, match="needs rate_mbps \\(must be the bottleneck's rate"):
        plan.scenario(path, rate_mbps=None)
    given = _scenario(tmp_path, path.read_text() + "rate_mbps = 48\n")
    assert plan.scenario(given, rate_mbps=None).flows[0].role == "poisson"
