"""Remy's optimiser (Winstein & Balakrishnan, "TCP ex Machina", SIGCOMM 2013, §4.3; the tree and
memory of Sivaraman et al., SIGCOMM 2014, §2), as a state machine the driver steps: each `step()`
is one evaluation's worth of work, and the state after it is a checkpoint.

The loop:
1. Start from one rule over the whole memory space with the default action (prior.py's Search:
   Remy's 1 + 1·cwnd, 3 ms), every rule in generation 0.
2. Draw networks from the prior (networks.py) and evaluate the tree on them, recording each rule's
   uses and memories. Of the rules used that have not been improved in this generation (their
   generation <= the optimiser's), take the most used (ties: the lowest number).
3. Improve its action by local search: the candidates are every combination of each axis's
   alternatives (the current value and the value ± each step, Setting.alternatives: Remy's
   cartesian product; or, with the prior's `pattern = "axes"`, each axis's alternatives with the
   others held: at most 27 where the product has up to 735 for Tao-100x's ladders), all evaluated
   on the same networks as step 2 (common random numbers, so a difference is the action's, not
   the draw's); if the best beats the current objective it becomes
   the action and the search repeats from it, else the search ends (ties: the first candidate in
   the product's order, the current action before any other). The rule's generation becomes g+1.
   Only the networks whose runs used the rule in step 2 are run again: a run that never looks the
   rule up is the same whatever its action (the simulator is deterministic), so it keeps its score.
   The objectives are those of whole evaluations, exactly; later in the training, when rules
   cover a part of the prior each, this skips about half the runs.
4. When no used rule is left in generation g: if some rule's action changed in it, split the most
   used rule (or, with the prior's `split = "network-share"`, the rule with the largest share of
   the networks' uses, each network weighing 1) at the median of its memories (tree.py's split:
   2^k children with its action and generation) and start generation g+1; if none changed, stop:
   nothing improves.
5. Stop too after `generations` generations (a checkpoint resumed with more goes on), or when the
   driver's budget runs out.

Each rule's search draws its own networks (Remy's evaluator draws afresh for every rule it
improves), numbered by the state's `draw`, so a resumed run draws what the uninterrupted one would.
Deterministic: networks from (seed, draw), results in job order, ties broken as above; the number
of workers changes nothing.

Deviation: Remy's own code also cut the whole search short after a fixed five generations and then
compared the new tree with the old one on ten times the simulation, to refuse a regression; this
loop's improvements are only ever accepted on equal networks and it has no such final check.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from pantheon.remy import networks, tree
from pantheon.remy.evaluation import Evaluation, Evaluator
from pantheon.remy.networks import Network
from pantheon.remy.prior import Prior, Search
from pantheon.remy.tree import Action, Node

STATE_VERSION = 1


def default_action(search: Search) -> Action:
    return Action(int(search.window_increment.default), search.window_multiple.default, search.intersend_ms.default)


def candidates(action: Action, search: Search, pattern: str = "product") -> list[Action]:
    """The local search's candidates around `action`, the action itself first. "product": every
    combination of each axis's alternatives (Remy's). "axes": each axis's alternatives with the
    other two held, a compass search (Kolda, Lewis & Torczon, "Optimization by direct search",
    SIAM Review 45(3), 2003, §3): 1 + Σ(n_axis − 1) candidates instead of Π n_axis."""
    increments = search.window_increment.alternatives(action.window_increment, decimals=0)
    multiples = search.window_multiple.alternatives(action.window_multiple)
    intersends = search.intersend_ms.alternatives(action.intersend_ms)
    if pattern == "axes":
        return ([action] + [replace(action, window_increment=int(b)) for b in increments[1:]]
                + [replace(action, window_multiple=m) for m in multiples[1:]]
                + [replace(action, intersend_ms=tau) for tau in intersends[1:]])
    assert pattern == "product", pattern
    return [Action(int(b), m, tau) for b, m, tau in itertools.product(increments, multiples, intersends)]


@dataclass
class RuleSearch:
    """A rule's local search in progress."""
    rule: int
    start: Action
    action: Action
    objective: float
    start_objective: float
    draw: int
    """The networks' draw number: every step of this search evaluates on them."""
    uses: int
    total_uses: int
    steps: int = 0
    candidates_evaluated: int = 0
    networks: list[int] | None = None
    """The draw's networks whose runs use the rule (by number); None: all of them (a checkpoint
    written before this was kept)."""
    scores: list[float] | None = None
    """Each network's score with the current action."""


@dataclass(frozen=True)
class Improvement:
    """One rule's finished search, for the history and the progress lines."""
    generation: int
    rule: int
    rules: int
    use_share: float
    start: Action
    action: Action
    start_objective: float
    objective: float
    steps: int
    candidates_evaluated: int


@dataclass
class State:
    tree: Node
    generation: int = 0
    draw: int = 0
    """Networks drawn so far (the next draw's number)."""
    improved: bool = False
    """Whether some rule's action changed in this generation."""
    search: RuleSearch | None = None
    history: list[Improvement] = field(default_factory=list)
    splits: list[dict] = field(default_factory=list)
    evaluations: int = 0
    """Trees evaluated (each on every network of its draw)."""
    stopped: str | None = None
    """Why the optimiser stopped (it then takes no more steps); None while it runs."""

    def to_json(self) -> dict:
        return {"version": STATE_VERSION, "tree": tree.to_json(self.tree), "generation": self.generation,
                "draw": self.draw, "improved": self.improved,
                "search": None if self.search is None else asdict(self.search),
                "history": [asdict(h) for h in self.history], "splits": self.splits,
                "evaluations": self.evaluations, "stopped": self.stopped}

    @classmethod
    def from_json(cls, data: dict) -> State:
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"checkpoint version {data.get('version')!r}, this Pantheon reads {STATE_VERSION}")
        s = data["search"]
        search = None if s is None else RuleSearch(**{**s, "start": Action(**s["start"]),
                                                      "action": Action(**s["action"])})
        history = [Improvement(**{**h, "start": Action(**h["start"]), "action": Action(**h["action"])})
                   for h in data["history"]]
        return cls(tree.from_json(data["tree"], "checkpoint tree"), data["generation"], data["draw"], data["improved"],
                   search, history, data["splits"], data["evaluations"], data["stopped"])


@dataclass(frozen=True)
class Event:
    """What a step did, for the driver's progress line and its checkpoint."""
    kind: str
    """"searched" (a step of a rule's search), "improved" (a rule's search ended), "split", "stopped"."""
    line: str
    accepted: bool = False
    """An improvement was accepted: the driver writes a checkpoint."""


class Optimiser:
    def __init__(self, prior: Prior, network_count: int, seed: int, evaluator: Evaluator,
                 generations: int | None = None, state: State | None = None) -> None:
        self.prior, self.network_count, self.seed, self.evaluator = prior, network_count, seed, evaluator
        self.generations = generations
        self.state = state or State(tree.root(default_action(prior.search)))
        self.limit_reached = False
        """The last generation allowed is done. Not part of the state: the same checkpoint resumed
        with more generations goes on (splits, and improves the next generation)."""

    @property
    def stopped(self) -> str | None:
        """Why the optimiser takes no more steps; None while it goes on."""
        if self.state.stopped:
            return self.state.stopped
        return f"{self.generations} generations done" if self.limit_reached else None

    def networks(self, draw: int) -> list[networks.Network]:
        return networks.draw(self.prior, self.network_count, self.seed, draw)

    def _evaluate(self, trees: list[Node], nets: list[Network], record: bool) -> list[Evaluation]:
        self.state.evaluations += len(trees)
        return self.evaluator.evaluate(trees, nets, record)

    def step(self) -> Event:
        """One evaluation's worth of the loop; an Event saying what it did."""
        s = self.state
        if self.stopped:
            return Event("stopped", self.stopped)
        if s.search is None:
            return self._choose()
        return self._search_step()

    def _choose(self) -> Event:
        s = self.state
        draw = s.draw
        base = self._evaluate([s.tree], self.networks(draw), record=True)[0]
        s.draw += 1
        leaves = tree.rules(s.tree)
        eligible = [i for i, leaf in enumerate(leaves) if i < len(base.uses) and base.uses[i] > 0
                    and leaf.generation <= s.generation]
        if eligible:
            rule = max(eligible, key=lambda i: (base.uses[i], -i))
            action = leaves[rule].action
            assert action is not None, "a rule is a leaf"
            # A run that never looks the rule up is the same whatever its action: its network is
            # left out of the search, its score kept (the start's lookup is one the uses miss).
            start = tree.rule_at(s.tree, tree.START_MEMORY)
            used = [j for j, by_rule in enumerate(base.uses_by_network) if rule == start or by_rule[rule] > 0]
            s.search = RuleSearch(rule, action, action, base.objective, base.objective, draw, base.uses[rule],
                                  sum(base.uses), networks=used, scores=list(base.scores))
            return Event("searched", f"generation {s.generation}: rule {rule} of {len(leaves)} "
                         f"({base.uses[rule] / max(1, sum(base.uses)):.0%} of uses), objective {base.objective:.4f}")
        return self._end_generation(base, leaves)

    def _end_generation(self, base: Evaluation, leaves: list[Node]) -> Event:
        s = self.state
        if not s.improved:
            return self._stop(f"generation {s.generation} improved no rule")
        if self.generations is not None and s.generation + 1 >= self.generations:
            # This evaluation's memories place the split that a run resumed with more generations
            # makes: its draw is given back, so the resumed run draws the same networks again (the
            # simulator is deterministic) and splits where an uninterrupted run does.
            s.draw -= 1
            self.limit_reached = True
            return Event("stopped", f"{self.generations} generations done", accepted=True)
        splittable = [i for i in range(len(leaves)) if i < len(base.uses) and base.uses[i] > 0
                      and tree.cuts(leaves[i], base.memories[i])]
        if not splittable:
            return self._stop("no used rule can be split")
        weight = base.network_shares if self.prior.split == "network-share" else base.uses
        rule = max(splittable, key=lambda i: (weight[i], -i))
        s.tree = tree.split_rule(s.tree, rule, base.memories[rule])
        at = sorted(tree.cuts(leaves[rule], base.memories[rule]).items())
        s.splits.append({"generation": s.generation, "rule": rule, "cuts": [[axis, value] for axis, value in at],
                         "uses": base.uses[rule]})
        s.generation += 1
        s.improved = False
        return Event("split", f"generation {s.generation - 1} done: rule {rule} split into "
                     f"{len(tree.rules(s.tree)) - len(leaves) + 1}, {len(tree.rules(s.tree))} rules", accepted=True)

    def _stop(self, why: str) -> Event:
        self.state.stopped = why
        return Event("stopped", why, accepted=True)

    def _search_step(self) -> Event:
        s = self.state
        search = s.search
        assert search is not None
        leaf = tree.rules(s.tree)[search.rule]
        options = [a for a in candidates(search.action, self.prior.search, self.prior.pattern) if a != search.action]
        trees = [tree.with_rule(s.tree, search.rule, a, leaf.generation) for a in options]
        nets = self.networks(search.draw)
        where = list(range(len(nets))) if search.networks is None else search.networks
        results = self._evaluate(trees, [nets[j] for j in where], record=False) if trees and where else []
        search.candidates_evaluated += len(trees)
        # Each candidate's scores on every network: the runs made, and the current action's elsewhere;
        # the objective their mean, as a whole evaluation computes it.
        scores = [_spliced(search.scores, where, r.scores, len(nets)) for r in results]
        objectives = [sum(x) / len(x) for x in scores]
        best = max(range(len(results)), key=lambda i: (objectives[i], -i), default=None)
        if best is not None and objectives[best] > search.objective:
            search.action, search.objective, search.scores = options[best], objectives[best], scores[best]
            search.steps += 1
            s.tree = tree.with_rule(s.tree, search.rule, search.action, leaf.generation)
            return Event("searched", f"generation {s.generation}: rule {search.rule} -> {_action(search.action)}, "
                         f"objective {search.objective:.4f} ({len(trees)} candidates on {len(where)} of {len(nets)} "
                         "networks)", accepted=True)
        s.tree = tree.with_rule(s.tree, search.rule, search.action, s.generation + 1)
        changed = search.action != search.start
        s.improved = s.improved or changed
        done = Improvement(s.generation, search.rule, len(tree.rules(s.tree)), search.uses / max(1, search.total_uses),
                           search.start, search.action, search.start_objective, search.objective, search.steps,
                           search.candidates_evaluated)
        s.history.append(done)
        s.search = None
        verdict = (f"{_action(done.start)} -> {_action(done.action)}, objective {done.start_objective:.4f} -> "
                   f"{done.objective:.4f}" if changed else f"{_action(done.action)} kept, objective {done.objective:.4f}")
        return Event("improved", f"generation {done.generation}: rule {done.rule} done, {verdict}", accepted=True)


def _spliced(scores: list[float] | None, where: list[int], run: tuple[float, ...], count: int) -> list[float]:
    """`scores` (None: none kept) with those of the networks numbered `where` replaced by `run`."""
    spliced = list(scores) if scores is not None else [0.0] * count
    for j, score in zip(where, run, strict=True):
        spliced[j] = score
    return spliced


def _action(a: Action) -> str:
    return f"(m={a.window_multiple:g}, b={a.window_increment}, tau={a.intersend_ms:g} ms)"


def run(optimiser: Optimiser, keep_going: Callable[[], bool], on_event: Callable[[Event], None]) -> State:
    """Steps `optimiser` until it stops or `keep_going()` says no (checked before each step)."""
    while not optimiser.stopped and keep_going():
        on_event(optimiser.step())
    return optimiser.state

