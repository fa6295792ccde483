"""`pantheon remy`: the prior's checks, the networks' draw, the tree's split at the median, the
local search and the whole optimiser's determinism (with a fake evaluator: the optimiser knows only
evaluation.Evaluator), the objective's numbers by hand, and one short real training."""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from pantheon import cli
from pantheon.remy import networks, objective, optimise, prior, tree
from pantheon.remy.evaluation import Evaluation
from pantheon.remy.networks import Network, OnPeriod
from pantheon.remy.optimise import Optimiser
from pantheon.remy.training import Settings, train
from pantheon.remy.tree import Action, Node
from pantheon.sim.batch import FlowMetrics

GOOD = """
delta = 1.0
[link]
rate_mbps = [10.0, 20.0]
min_rtt_ms = [50.0, 100.0]
buffer = "infinite"
[traffic]
senders = [1, 3]
mean_on_s = 1.0
mean_off_s = 0.5
[training]
runtime_s = 4.0
"""


def _with(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


@pytest.mark.parametrize("text, says", [
    (_with("delta = 1.0", "delta = 1.0\nspeed = 3"), "p.toml: unknown key 'speed'"),
    (_with("buffer = \"infinite\"", "buffer = \"infinite\"\nloss = 0.1"), "p.toml: unknown key link.loss"),
    (_with("[10.0, 20.0]", "[20.0, 10.0]"), "p.toml: link.rate_mbps: lo 20 is above hi 10"),
    (_with("[10.0, 20.0]", "[0.0, 10.0]"), "p.toml: link.rate_mbps must be positive, got 0"),
    (_with("[10.0, 20.0]", "[-5, 10.0]"), "p.toml: link.rate_mbps must be positive, got -5"),
    (_with("rate_mbps = [10.0, 20.0]\n", ""), "p.toml: link.rate_mbps is missing"),
    (_with("[50.0, 100.0]", "[100.0, 50.0]"), "p.toml: link.min_rtt_ms: lo 100 is above hi 50"),
    (_with("[1, 3]", "[1.5, 3]"), "p.toml: traffic.senders must be whole numbers"),
    (_with("[1, 3]", "[3, 1]"), "p.toml: traffic.senders: lo 3 is above hi 1"),
    (_with("[1, 3]", "7"), "p.toml: traffic.senders must be a range [lo, hi]"),
    (_with("mean_on_s = 1.0", "mean_on_s = 0"), "p.toml: traffic.mean_on_s must be above 0"),
    (_with("buffer = \"infinite\"", "buffer = \"deep\""), "p.toml: link.buffer must be \"infinite\""),
    (_with("buffer = \"infinite\"", "buffer = \"infinite\"\nbuffer_bdp = [1, 2]"), "give one of buffer"),
    (_with("rate_mbps = [10.0, 20.0]", "rate_mbps = [10.0, 20.0]\nrate_draw = \"normal\""), "link.rate_draw must be"),
    (_with("delta = 1.0", "delta = -1"), "p.toml.delta must be at least 0"),
    (GOOD + "[search.intersend_ms]\nmultiplier = 1\n", "search.intersend_ms.multiplier must be above 1"),
    (GOOD + "networks = 2.5\n", "p.toml: training.networks must be a whole number"),
    (GOOD + "runtime_s = 4.0\n", "p.toml: not TOML"),
    (GOOD + "[search.gain]\nmin = 1\n", "unknown key search.gain"),
    (GOOD + "pattern = \"random\"\n", "p.toml: training.pattern must be one of product, axes"),
    (GOOD + "split = \"widest\"\n", "p.toml: training.split must be one of uses, network-share"),
    ("delta = [", "p.toml: not TOML"),
])
def test_every_mistake_in_a_prior_is_one_line_naming_the_file_and_key(tmp_path: Path, text: str, says: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(prior.PriorError) as e:
        prior.load(path)
    assert says in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert cli.main(["remy", "train", "--prior", str(path), "--out", str(tmp_path / "t.dna"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err


def test_a_missing_prior_or_tree_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["remy", "train", "--prior", str(tmp_path / "none.toml"), "--out", str(tmp_path / "t")]) == 2
    assert cli.main(["remy", "show", str(tmp_path / "none.dna")]) == 2
    (tmp_path / "bad.dna").write_text("not a tree")
    assert cli.main(["remy", "show", str(tmp_path / "bad.dna")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and "cannot read the prior" in err[0] and "no such tree file" in err[1], err
    assert err[2].startswith(f"pantheon: pantheon-sim tree show {tmp_path / 'bad.dna'}: "), err


def test_the_shipped_100x_prior_is_the_papers() -> None:
    p = prior.load(prior.Path(cli.__file__).parents[2] / "data" / "tao" / "tao-100x.toml")
    assert (p.rate_mbps.lo, p.rate_mbps.hi) == (3.16, 316.0) and p.rate_mbps.hi / p.rate_mbps.lo == 100
    assert (p.min_rtt_ms.lo, p.min_rtt_ms.hi, p.senders) == (150.0, 150.0, (1, 2))
    assert (p.mean_on_s, p.mean_off_s, p.buffer_bytes, p.buffer_bdp, p.delta) == (1.0, 1.0, None, None, 1.0)


def test_networks_are_drawn_the_same_for_the_same_seed_and_draw() -> None:
    p = prior.parse(GOOD, "p.toml")
    first = networks.draw(p, 8, seed=7, draw_number=3)
    assert first == networks.draw(p, 8, seed=7, draw_number=3)
    assert first != networks.draw(p, 8, seed=7, draw_number=4) and first != networks.draw(p, 8, seed=8, draw_number=3)
    # Remy's anchors: the four corners of rate x RTT, every sender there.
    assert [(n.rate_mbps, n.min_rtt_ms, n.senders) for n in first[:4]] == [
        (10.0, 50.0, 3), (10.0, 100.0, 3), (20.0, 50.0, 3), (20.0, 100.0, 3)]
    for n in first:
        assert 10.0 <= n.rate_mbps <= 20.0 and 50.0 <= n.min_rtt_ms <= 100.0 and 1 <= n.senders <= 3
        for sender in range(n.senders):
            mine = [q for q in n.on_periods if q.sender == sender]
            # Off first, then on and off in turn: a sender's periods never overlap, all within the run.
            assert all(a.start_s + a.duration_s < b.start_s for a, b in zip(mine, mine[1:]))
            assert all(q.start_s > 0 and q.start_s + q.duration_s <= 4.0 + 1e-9 for q in mine)
    job = first[0].job("tao:tree=T")
    assert len(job.flows) == len(first[0].on_periods) and job.runtime_s == 4.0 and job.seed == first[0].seed
    assert job.flows[0].start_s == first[0].on_periods[0].start_s and "25.0" in job.path_options  # half the RTT


def test_the_buffer_in_bdps_and_a_log_uniform_rate() -> None:
    p = prior.parse(_with("buffer = \"infinite\"", "buffer_bdp = [2, 2]").replace(
        "rate_mbps = [10.0, 20.0]", "rate_mbps = [1.0, 1000.0]\nrate_draw = \"log-uniform\""), "p.toml")
    drawn = networks.draw(p, 400, seed=1)
    # 2 BDPs at 1 Mbit/s and 50 ms: 2 x 6250 bytes.
    assert drawn[0].buffer_bytes == 12_500
    rates = [n.rate_mbps for n in drawn[4:]]
    assert all(1.0 <= r <= 1000.0 for r in rates)
    # Log-uniform over three decades: about a third under 10 Mbit/s (uniform would put 0.9% there).
    assert 0.25 < sum(r < 10 for r in rates) / len(rates) < 0.42


def test_the_remys_steps_around_the_default_action() -> None:
    """Remy's steps from its default action (1 + 1·cwnd, 3 ms): increment 1 ± 1, 4, 16 within 0..256;
    multiple 1 - 0.01, 0.04, 0.16 (1 + anything is above 1); intersend 3 - 0.05, 0.2, 0.8 ms."""
    search = prior.Search()
    start = optimise.default_action(search)
    assert start == Action(1, 1.0, 3.0)
    assert search.window_increment.alternatives(1, decimals=0) == [1, 2, 0, 5, 17]
    assert search.window_multiple.alternatives(1.0) == [1.0, 0.99, 0.96, 0.84]
    assert search.intersend_ms.alternatives(3.0) == [3.0, 2.95, 2.8, 2.2]
    found = optimise.candidates(start, search)
    assert len(found) == 5 * 4 * 4 and found[0] == start and len(set(found)) == len(found)


def test_the_compass_pattern_moves_one_axis_at_a_time() -> None:
    """pattern = "axes": the action, then each axis's alternatives with the other two held; for
    Tao-100x's ladders, from the middle of the space, 24 candidates where Remy's product has 588."""
    search = prior.Search()
    start = optimise.default_action(search)
    found = optimise.candidates(start, search, "axes")
    assert found == [start, Action(2, 1.0, 3.0), Action(0, 1.0, 3.0), Action(5, 1.0, 3.0), Action(17, 1.0, 3.0),
                     Action(1, 0.99, 3.0), Action(1, 0.96, 3.0), Action(1, 0.84, 3.0),
                     Action(1, 1.0, 2.95), Action(1, 1.0, 2.8), Action(1, 1.0, 2.2)]
    tao = prior.load(Path(__file__).parents[1] / "data" / "tao" / "tao-100x.toml")
    middle = Action(40, 0.5, 1.0)
    assert len(optimise.candidates(middle, tao.search, "axes")) == 24
    assert len(optimise.candidates(middle, tao.search, "product")) == 588
    assert set(optimise.candidates(middle, tao.search, "axes")) <= set(optimise.candidates(middle, tao.search))


BOX = ((0.0, 0.0, 1.0, 0.0), (10.0, 10.0, 1.0, 10.0))
"""A leaf of zero width on rtt_ratio (axis 2): it can be cut on three axes only."""


def test_a_rule_is_split_at_the_median_of_its_memories_on_every_axis() -> None:
    leaf = Node(*BOX, action=Action(3, 0.5, 1.0), generation=2)
    # Medians: axis 0 of 1,2,3,4,9 is 3; axis 1 is all 0, the box's lower edge: its midpoint 5 instead.
    samples = [(1.0, 0.0, 1.0, 6.0), (2.0, 0.0, 1.0, 7.0), (3.0, 0.0, 1.0, 8.0), (4.0, 0.0, 1.0, 9.0),
               (9.0, 0.0, 1.0, 1.0)]
    assert tree.cuts(leaf, samples) == {0: 3.0, 1: 5.0, 3: 7.0}
    node = tree.split(leaf, samples)
    children = node.children
    assert len(children) == 8 and all(c.action == leaf.action and c.generation == 2 for c in children)
    assert (children[0].lower, children[0].upper) == ((0.0, 0.0, 1.0, 0.0), (3.0, 5.0, 1.0, 7.0))
    assert (children[1].lower, children[1].upper) == ((0.0, 0.0, 1.0, 7.0), (3.0, 5.0, 1.0, 10.0))
    assert (children[7].lower, children[7].upper) == ((3.0, 5.0, 1.0, 7.0), (10.0, 10.0, 1.0, 10.0))
    volume = sum(math.prod(h - lo for lo, h in zip(c.lower, c.upper) if h > lo) for c in children)
    assert volume == 1000.0  # the children tile the box
    # In a tree, the split rule's children take its place in the depth-first numbering.
    t = Node(*BOX, children=(Node(BOX[0], (5.0, 10.0, 1.0, 10.0), action=Action(1, 1.0, 3.0)),
                             Node((5.0, 0.0, 1.0, 0.0), BOX[1], action=Action(2, 1.0, 3.0))))
    after = tree.split_rule(t, 1, [(7.0, 4.0, 1.0, 2.0)])
    assert [r.action for r in tree.rules(after)] == [Action(1, 1.0, 3.0)] + [Action(2, 1.0, 3.0)] * 8
    assert tree.from_json(json.loads(json.dumps(tree.to_json(after)))) == after


class Fake:
    """An evaluator whose objective is known: a sample of memories per network (fixed by the draw),
    each sample scoring its rule's action against the best action at that memory, which differs
    between low and high slow_rec_rec_ewma, so that a split pays."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        """Trees per evaluation."""
        self.networks: list[int] = []
        """Networks per evaluation."""

    @staticmethod
    def best(m: tree.Memory) -> Action:
        return Action(6, 0.84, 2.2) if m[3] < 5 else Action(0, 0.5, 0.95)

    @staticmethod
    def memories(n: Network) -> list[tree.Memory]:
        return [(n.rate_mbps, n.min_rtt_ms, 1 + (i * n.seed % 97) / 32, float(i)) for i in range(16)]

    def evaluate(self, trees: Sequence[Node], nets: Sequence[Network], record: bool) -> list[Evaluation]:
        self.calls.append(len(trees))
        self.networks.append(len(nets))
        found = []
        for t in trees:
            leaves = tree.rules(t)
            uses: list[list[int]] = []
            seen: list[list[tree.Memory]] = [[] for _ in leaves]
            scores = []
            for n in nets:
                score = 0.0
                uses.append([0] * len(leaves))
                for m in self.memories(n):
                    i = tree.rule_at(t, m)
                    a, b = leaves[i].action, self.best(m)
                    assert a is not None
                    score -= (abs(a.window_increment - b.window_increment) / 10 + abs(a.window_multiple - b.window_multiple)
                              + abs(a.intersend_ms - b.intersend_ms))
                    uses[-1][i] += 1
                    seen[i].append(m)
                scores.append(score)
            found.append(Evaluation(tuple(scores), tuple(map(tuple, uses)) if record else (),
                                    tuple(tuple(s) for s in seen) if record else ()))
        return found


def test_the_local_search_takes_the_best_candidate_on_common_networks() -> None:
    p = prior.parse(GOOD, "p.toml")
    fake = Fake()
    o = Optimiser(p, 4, seed=1, evaluator=fake)
    o.step()  # the base evaluation: one tree, recorded; rule 0 is the only one
    assert fake.calls == [1] and o.state.search is not None and o.state.search.draw == 0
    event = o.step()
    # 79 candidates besides the current action, each on the same draw 0; most memories are at
    # slow_rec_rec_ewma >= 5, whose best action is (0, 0.5, 0.95): the nearest candidate on every axis.
    assert fake.calls == [1, 79] and event.accepted and o.state.search.draw == 0
    assert o.state.search.action == Action(0, 0.84, 2.2)
    options = optimise.candidates(optimise.default_action(p.search), p.search)
    scores = [Fake().evaluate([tree.with_rule(tree.root(a), 0, a, 0)], o.networks(0), False)[0].objective
              for a in options]
    assert options[scores.index(max(scores))] == o.state.search.action
    while o.state.search is not None:
        o.step()
    done = o.state.history[0]
    assert done.objective > done.start_objective and tree.rules(o.state.tree)[0].generation == 1


def test_a_split_by_network_share_weighs_every_network_alike() -> None:
    """Remy splits the rule with the most uses, every acknowledgement counting, so a fast network's
    rules win; `split = "network-share"` sums each rule's share of each network's uses instead.
    Here a fast network uses rule 0 a thousand times, two slow ones use rule 1 ten times each:
    Remy's count splits rule 0, the network share (1 against 2) rule 1."""
    top = tree.root(Action(1, 1.0, 3.0)).upper
    edges = (0.0, 2.0, 6.0, top[0])
    seen = tuple(tuple((lo + 0.2 * k, float(k), 1.0 + k / 10, float(k)) for k in range(1, 9)) for lo in edges[:3])
    base = Evaluation((0.0, 0.0, 0.0), ((1000, 0, 0), (0, 10, 0), (0, 10, 0)), seen)
    assert base.uses == (1000, 20, 0) and base.network_shares == (1.0, 2.0, 0.0)
    three = Node((0.0,) * 4, top, children=tuple(
        Node((lo, 0.0, 0.0, 0.0), (hi, *top[1:]), action=Action(1, 1.0, 3.0), generation=1)
        for lo, hi in zip(edges, edges[1:])))
    assert len(tree.rules(three)) == 3
    split_rule = {}
    for how in prior.SPLITS:
        p = prior.parse(GOOD + f"split = \"{how}\"\n", "p.toml")
        o = Optimiser(p, 3, seed=0, evaluator=Fake(), state=optimise.State(three, improved=True))
        o._end_generation(base, tree.rules(three))
        split_rule[how] = o.state.splits[-1]["rule"]
    assert split_rule == {"uses": 0, "network-share": 1}


def _trained(p: prior.Prior, seed: int, steps: int | None = None, state: optimise.State | None = None) -> Optimiser:
    o = Optimiser(p, 3, seed=seed, evaluator=Fake(), generations=2, state=state)
    count = 0
    while not o.stopped and (steps is None or count < steps):
        o.step()
        count += 1
    return o


def test_the_same_seed_gives_the_same_tree_and_a_resumed_run_the_uninterrupted_ones() -> None:
    p = prior.parse(GOOD, "p.toml")
    whole = _trained(p, seed=5)
    assert whole.stopped == "2 generations done"
    assert [s["generation"] for s in whole.state.splits] == [0] and len(tree.rules(whole.state.tree)) == 16
    assert _trained(p, seed=5).state.to_json() == whole.state.to_json()
    assert _trained(p, seed=6).state.to_json() != whole.state.to_json()
    half = _trained(p, seed=5, steps=7)
    saved = json.loads(json.dumps(half.state.to_json()))
    resumed = _trained(p, seed=5, state=optimise.State.from_json(saved))
    assert resumed.state.to_json() == whole.state.to_json()
    # Splitting paid: on networks of a draw of their own, the tree beats its first rule's best action alone.
    single = tree.root(whole.state.history[0].action)
    final, first = Fake().evaluate([whole.state.tree, single], whole.networks(99), False)
    assert final.objective > first.objective


def test_a_run_resumed_with_more_generations_trains_the_uninterrupted_ones_tree() -> None:
    """Stopped at its generation limit, a run has evaluated the tree whose memories place the next
    split; resumed with more generations it must split there, as a run without the limit does (it
    drew other networks for the split until stop 49, so a training resumed at each generation's
    end made a tree no uninterrupted command makes)."""
    p = prior.parse(GOOD, "p.toml")

    def run(generations: int, state: optimise.State | None = None) -> Optimiser:
        o = Optimiser(p, 3, seed=5, evaluator=Fake(), generations=generations, state=state)
        while not o.stopped:
            o.step()
        return o

    whole = run(3)
    first = run(2)
    resumed = run(3, optimise.State.from_json(json.loads(json.dumps(first.state.to_json()))))
    assert [s["generation"] for s in whole.state.splits] == [0, 1]
    for key in ("tree", "splits", "history", "draw", "generation"):
        assert resumed.state.to_json()[key] == whole.state.to_json()[key], key


def test_training_checkpoints_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written: dict[Path, Node] = {}
    monkeypatch.setattr(tree, "write", lambda t, path: written.__setitem__(path, t))
    p = prior.parse(GOOD, "p.toml")
    settings = Settings(p, GOOD, 3, 5, 2, None)
    out = tmp_path / "t.dna"
    first = train(settings, out, None, resume=False, quiet=True, evaluator=Fake())
    assert written[out] == _trained(p, seed=5).state.tree and first.stopped == "2 generations done"
    checkpoint = json.loads((tmp_path / "t.dna.train.json").read_text())
    assert checkpoint["state"]["generation"] == 1 and checkpoint["state"]["search"] is None
    assert json.loads((tmp_path / "t.dna.json").read_text())["rules"] == len(tree.rules(written[out]))
    again = train(settings, out, None, resume=True, quiet=True, evaluator=Fake())
    assert again.state.tree == first.state.tree and again.state.history == first.state.history
    # The same checkpoint with one more generation goes on: a split, and the new rules improved.
    more = train(Settings(p, GOOD, 3, 5, 3, None), out, None, resume=True, quiet=True, evaluator=Fake())
    assert len(more.state.splits) == 2 and len(tree.rules(more.state.tree)) > len(tree.rules(first.state.tree))
    other = Settings(p, GOOD, 3, 6, 2, None)
    with pytest.raises(Exception, match="another training's"):
        train(other, out, None, resume=False, quiet=True, evaluator=Fake())
    with pytest.raises(Exception, match="nothing to resume"):
        train(settings, tmp_path / "u.dna", None, resume=True, quiet=True, evaluator=Fake())


def _flow(delivered: int, delay_ms: float | None) -> FlowMetrics:
    return FlowMetrics(0.0, None, delay_ms, None, None, delivered, delivered)


def test_the_objective_by_hand() -> None:
    """Sender 0 on for 1 s + 1 s, 1000 + 0 datagrams of 1464 B: 5.856 Mbit/s over its 2 s on, at a
    mean delay of 100 ms; sender 1 on 0.5 s, nothing delivered: the starved utility of a 10 s run,
    one datagram in 10 s taking 10 s: log(0.0011712) - log(10 000)."""
    n = Network(12.0, 100.0, None, 2, (OnPeriod(0, 0.0, 1.0), OnPeriod(1, 0.5, 0.5), OnPeriod(0, 3.0, 1.0)), 10.0, 0)
    flows = [_flow(1000, 100.0), _flow(0, None), _flow(0, None)]
    first = math.log(5.856) - 0.5 * math.log(100.0)
    starved = math.log(0.0011712) - 0.5 * math.log(10_000.0)
    assert objective.sender_utilities(n, flows, delta=0.5) == pytest.approx([first, starved])
    assert objective.score(n, flows, delta=0.5) == pytest.approx(first + starved)
    assert objective.starved_utility(10.0, 0.5) < objective.utility(1464 * 8 / 10.0 / 1e6 * 1.01, 9_999.0, 0.5)


TINY = GOOD.replace("runtime_s = 4.0", "runtime_s = 1.5\nnetworks = 3\ngenerations = 2") + """
[search.window_increment]
max_change = 4
[search.window_multiple]
max_change = 0.04
[search.intersend_ms]
max_change = 0.2
"""


def test_a_short_real_training_beats_the_initial_tree_and_its_file_shows(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Two generations of a tiny prior in the simulator (3 networks of 1.5 s, narrow steps): the
    trained tree beats the default action on networks neither was trained on, and its file is
    Remy's format, which `pantheon remy show` prints rule by rule."""
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    out = tmp_path / "tiny.dna"
    assert cli.main(["remy", "train", "--prior", str(path), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((tmp_path / "tiny.dna.json").read_text())
    assert summary["stopped"] in ("2 generations done", "generation 1 improved no rule") and summary["rules"] > 1
    first = summary["history"][0]
    assert first["objective"] > first["start_objective"]
    trained = tree.read(out)
    assert len(tree.rules(trained)) == summary["rules"]
    from pantheon.remy.evaluation import Simulated
    from pantheon.sim.runner import Runner

    p = prior.parse(TINY, "tiny.toml")
    initial = tree.root(optimise.default_action(p.search))
    after, before = Simulated(Runner(None), p.delta).evaluate([trained, initial], networks.draw(p, 8, seed=99), False)
    assert after.objective > before.objective
    capsys.readouterr()
    assert cli.main(["remy", "show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert f"{summary['rules']} rules" in shown and "0: rec_send_ewma=" in shown


def test_the_runner_writes_each_model_file_its_jobs_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from pantheon.sim import runner
    from pantheon.sim.batch import FlowSpec, Job

    seen: list[tuple[str, bytes]] = []

    def fake_batch(jobs: list[Job], jobs_parallel: int | None = None) -> list[str]:
        for job in jobs:
            path = Path(job.flows[0].cc.removeprefix("tao:tree="))
            seen.append((path.name, path.read_bytes()))
        return ["done"] * len(jobs)

    monkeypatch.setattr(runner, "run_batch", fake_batch)
    jobs = [Job([FlowSpec(f"tao:tree={runner.model_file(i)}")]) for i in (1, 0, 1)]
    assert runner.Runner(None).run(jobs, [b"tree zero", b"tree one"]) == ["done"] * 3
    assert seen == [("model1", b"tree one"), ("model0", b"tree zero"), ("model1", b"tree one")]


def test_a_search_runs_only_the_networks_that_use_its_rule_and_trains_the_same_tree() -> None:
    """The optimiser leaves out of a rule's search the networks whose runs never looked the rule
    up (their runs cannot change): the training is the one that runs every network, and it runs
    fewer."""
    p = prior.parse(GOOD, "p.toml")
    # Four networks: the draw's anchors, two rates by two RTTs, which the median split parts (with
    # three, the median is the lower rate and RTT, and every rule is left to every network).
    skipping, everywhere = (Optimiser(p, 4, seed=5, evaluator=Fake(), generations=2) for _ in range(2))
    while not skipping.stopped:
        skipping.step()
    while not everywhere.stopped:
        everywhere.step()
        if everywhere.state.search is not None:
            everywhere.state.search.networks = None  # as a checkpoint from before the skipping
    assert everywhere.state.to_json() == skipping.state.to_json() and len(skipping.state.history) > 1
    ran, all_ran = skipping.evaluator.networks, everywhere.evaluator.networks  # type: ignore[attr-defined]
    assert len(ran) == len(all_ran) and sum(ran) < sum(all_ran) and min(ran) >= 1


def test_a_run_that_never_uses_a_rule_is_the_same_whatever_its_action() -> None:
    """What lets the search skip networks, in the real simulator: a tree whose rules split the
    acknowledgements' EWMA of interarrival at 20 ms, on a fast link (acknowledgements 0.12 ms
    apart, and at most a round trip of 40 ms apart at the start: never past the cut) and a slow one
    (120 ms apart). Changing the slow rule's action changes the slow network's run, and leaves
    the fast one's score exactly as it was."""
    from pantheon.remy.evaluation import Simulated
    from pantheon.sim.runner import Runner

    always_on = (OnPeriod(0, 0.0, 3.0),)
    fast, slow = (Network(rate, 40.0, None, 1, always_on, 3.0, seed=1) for rate in (100.0, 0.1))
    whole = tree.root(Action(2, 1.0, 0.05))
    split = tree.split(whole, [(0.0, 20.0, 0.0, 0.0)], axes=[1])  # rec_rec_ewma
    slow_rule = tree.rule_at(split, (0.0, 30.0, 0.0, 0.0))
    assert slow_rule != tree.rule_at(split, tree.START_MEMORY)
    evaluator = Simulated(Runner(None), delta=1.0)
    base = evaluator.evaluate([split], [fast, slow], record=True)[0]
    assert base.uses_by_network[0][slow_rule] == 0 and base.uses_by_network[1][slow_rule] > 0
    changed = tree.with_rule(split, slow_rule, Action(0, 0.5, 20.0), 0)
    after = evaluator.evaluate([changed], [fast, slow], record=False)[0]
    assert after.scores[0] == base.scores[0] and after.scores[1] != base.scores[1], (base.scores, after.scores)


def test_a_tree_file_becomes_a_scheme_both_drivers_run_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`pantheon remy scheme` writes a manifest whose sender is pantheon-udp with `tao:tree=FILE`:
    the registry finds it on $PANTHEON_SCHEMES_PATH and `pantheon sim` runs it by name (paced at
    one datagram per 2 ms: 5.9 Mbit/s on a 12 Mbit/s link); a file that is no tree, or a name that
    is no scheme name, is one line and exit 2, and nothing is written."""
    from pantheon import schemes
    from pantheon.sim.simulable import cc_spec

    trees = tmp_path / "trees"
    trees.mkdir()
    paced = trees / "paced.dna"
    tree.write(tree.root(Action(64, 1.0, 2.0)), paced)
    directory = tmp_path / "schemes"
    assert cli.main(["remy", "scheme", str(paced), "--name", "tao-paced", "--dir", str(directory)]) == 0
    monkeypatch.setenv("PANTHEON_SCHEMES_PATH", str(directory))
    found = schemes.registry().schemes["tao-paced"]
    assert cc_spec(found) == f"tao:tree={paced.resolve()}" and found.unavailable_reason() is None
    data = tmp_path / "run"
    assert cli.main(["sim", "--schemes", "tao-paced", "--runtime", "4", "--delay", "10", "--uplink-rate", "12",
                     "--downlink-rate", "12", "--data-dir", str(data), "--quiet", "--no-analyze"]) == 0
    flow = json.loads((data / "tao-paced" / "run1" / "sim.json").read_text())["flows"][0]
    assert flow["throughput_mbps"] == pytest.approx(1464 * 8 / 2e-3 / 1e6, rel=0.03), flow
    capsys.readouterr()
    not_a_tree = trees / "notes.dna"
    not_a_tree.write_text("not a tree\n")
    for args, says in (([str(not_a_tree), "--name", "tao-x"], str(not_a_tree)),
                       ([str(paced), "--name", "Tao X"], "a scheme name is")):
        assert cli.main(["remy", "scheme", *args, "--dir", str(directory)]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err
    assert sorted(p.name for p in directory.iterdir()) == ["tao-paced.toml"]


def test_a_network_whose_senders_never_switch_on_scores_nothing() -> None:
    """Each sender is off for an exponential time first, so now and then a drawn network has no
    on-period in its run: it is not simulated (the simulator takes no job without flows), scores 0
    and uses no rule, and the other networks' scores are what they are alone."""
    from dataclasses import replace

    from pantheon.remy.evaluation import Simulated
    from pantheon.sim.runner import Runner

    p = prior.parse(TINY, "tiny.toml")
    live = networks.draw(p, 1, seed=3)[0]
    idle = replace(live, on_periods=())
    start = tree.root(optimise.default_action(p.search))
    evaluator = Simulated(Runner(None), p.delta)
    both = evaluator.evaluate([start], [idle, live], record=True)[0]
    alone = evaluator.evaluate([start], [live], record=True)[0]
    assert both.scores == (0.0, alone.scores[0]) and both.uses_by_network == ((0,), alone.uses_by_network[0])
    assert evaluator.simulated_s == 2 * p.runtime_s
