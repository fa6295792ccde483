"""A topology as Python reads it (pantheon.topology): each flow's max-min fair share, its route's
delay, a trace link's rate over a stretch of the run, and a bad file's one line."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from pantheon import topology
from pantheon.calibrate.trace import LINK_LEAD_MS
from pantheon.topology import TopologyError, max_min_fair


def test_progressive_filling_gives_each_flow_its_max_min_fair_share() -> None:
    # One link: split evenly.
    assert max_min_fair({"a": 12.0}, [["a"], ["a"], ["a"]]) == [4.0, 4.0, 4.0]
    # A parking lot of equal hops: half a hop each, the long flow too.
    assert max_min_fair({"a": 12.0, "b": 12.0}, [["a", "b"], ["a"], ["b"]]) == [6.0, 6.0, 6.0]
    # A narrower second hop holds the long flow to half of it; the first hop's cross flow takes the rest.
    assert max_min_fair({"a": 12.0, "b": 4.0}, [["a", "b"], ["a"], ["b"]]) == [2.0, 10.0, 2.0]
    # Unlimited access links do not limit; a route of unlimited links alone is unbounded.
    shares = max_min_fair({"x": math.inf, "a": 9.0}, [["x", "a"], ["a"], ["x"]])
    assert shares[:2] == [4.5, 4.5] and math.isinf(shares[2])


def test_the_shipped_topologies_shares_and_delays() -> None:
    dumbbell = topology.load("dumbbell")
    assert dumbbell.fair_shares_mbps(0, 10) == [8.0, 8.0, 8.0]
    assert [dumbbell.base_delay_ms(f) for f in range(3)] == [15.0, 30.0, 50.0]
    lot = topology.load("parking-lot")
    assert lot.fair_shares_mbps(0, 10) == [6.0] * 4 and lot.base_delay_ms(0) == 30.0
    # The moving bottleneck: the first link's 8 Mbit/s before 5 s, the second's 4 after (traces on
    # the link's clock: written with the lead, read with it).
    moving = topology.load("moving-bottleneck")
    [before] = moving.fair_shares_mbps(0, 5)
    [after] = moving.fair_shares_mbps(5, 10)
    assert before == pytest.approx(8.0, rel=1e-3) and after == pytest.approx(4.0, rel=1e-3)
    fields = moving.fields({moving.traces()[0]: "@MODEL0@"})
    assert fields["link"][0]["path"][fields["link"][0]["path"].index("--uplink-trace") + 1] == "@MODEL0@"
    assert Path(fields["link"][1]["path"][fields["link"][1]["path"].index("--uplink-trace") + 1]).is_file()


def test_a_trace_rate_loops_with_its_period(tmp_path: Path) -> None:
    # One opportunity each ms for 1 s, then none for 1 s: 12 Mbit/s, then 0, then 12 again.
    trace = tmp_path / "t.trace"
    trace.write_text("".join(f"{t}\n" for t in range(1, 1001)) + "2000\n")
    (tmp_path / "t.toml").write_text('routes = [["a"]]\n[[link]]\nname = "a"\npath = ["--uplink-trace=t.trace"]\n')
    link = topology.load(str(tmp_path / "t.toml")).links[0]
    lead_s = LINK_LEAD_MS / 1e3
    assert link.rate_mbps(2 - lead_s, 2.5 - lead_s) == pytest.approx(12.0, rel=1e-2)
    assert link.rate_mbps(3.1 - lead_s, 3.9 - lead_s) == 0.0


@pytest.mark.parametrize(("text", "message"), [
    ('routes = [["a"]]', "no [[link]]"),
    ('routes = [["b"]]\n[[link]]\nname = "a"', "routes[0] names 'b', which is no link"),
    ('routes = [["a", "a"]]\n[[link]]\nname = "a"', "routes[0] names a link twice"),
    ('routes = [["a"]]\n[[link]]\nname = "a"\n[[link]]\nname = "a"', "a link name is used twice"),
    ('routes = [["a"]]\nflows = 2\n[[link]]\nname = "a"', "unknown key 'flows'"),
    ('routes = [["a"]]\n[[link]]\nname = "a"\npath = ["--uplink-rate", "fast"]', "link a:"),
])
def test_a_bad_topology_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(TopologyError, match=message.replace("[", r"\[").replace("]", r"\]")) as caught:
        topology.load(str(path))
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)
    with pytest.raises(TopologyError, match="no topology 'nowhere'"):
        topology.load("nowhere")
