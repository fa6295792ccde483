"""One evaluation of Remy's optimiser (Winstein & Balakrishnan, SIGCOMM 2013, §4.2): trees run
on the same drawn networks, each tree's objective (objective.py) and, when asked, how often each
rule was used and the memories it saw, which pick the rule to improve and where to split it.

The optimiser (optimise.py) knows only the `Evaluator` protocol, so its tests drive it with a
fake; `Simulated` is the real one: every (tree, network) pair a job of one batch, the trees'
files shipped with the jobs (pantheon.sim.runner's model files), the controller crates/cc's
`tao` (`tao:tree=FILE`, with `record=1` each flow's per-rule uses and sampled memories).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pantheon.errors import PantheonError
from pantheon.remy import objective, tree
from pantheon.remy.networks import Network
from pantheon.remy.tree import Memory, Node
from pantheon.sim.batch import FlowMetrics, Result
from pantheon.sim.runner import Runner, model_file

MAX_SAMPLES_PER_RULE = 4096
"""Memories kept per rule for its median: plenty for a median, and a bounded checkpoint."""


class EvaluationError(PantheonError):
    """The simulator could not run an evaluation's jobs."""


@dataclass(frozen=True)
class Evaluation:
    scores: tuple[float, ...]
    """Each network's score, in the networks' order."""
    uses_by_network: tuple[tuple[int, ...], ...] = ()
    """Per network, per rule (depth-first), how many times the rule chose the action; empty
    unless recorded."""
    memories: tuple[tuple[Memory, ...], ...] = field(default=())
    """Per rule, memories it was used at (a sample over all the networks); empty unless recorded."""

    @property
    def objective(self) -> float:
        """The mean over the networks of their scores."""
        return sum(self.scores) / len(self.scores)

    @property
    def uses(self) -> tuple[int, ...]:
        """Per rule, its uses on all the networks; empty unless recorded."""
        return tuple(map(sum, zip(*self.uses_by_network)))

    @property
    def network_shares(self) -> tuple[float, ...]:
        """Per rule, the sum over the networks of its share of the network's uses: each network
        weighs 1 however many acknowledgements it makes, as it does in the objective (a 316
        Mbit/s link makes a hundred times the uses of a 3.16 Mbit/s one); empty unless recorded."""
        shares = [[count / max(1, sum(row)) for count in row] for row in self.uses_by_network]
        return tuple(map(sum, zip(*shares)))


class Evaluator(Protocol):
    def evaluate(self, trees: Sequence[Node], networks: Sequence[Network], record: bool) -> list[Evaluation]:
        """Each tree's evaluation on all of `networks`, in the trees' order."""
        ...


def spec(tree_file: str, record: bool) -> str:
    """The controller running the rule tree in `tree_file`."""
    return f"tao:tree={tree_file}" + (",record=1" if record else "")


def rule_records(flow: FlowMetrics) -> list[tuple[int, list[Memory]]]:
    """(uses, sampled memories) of each rule in one flow, from the controller's record
    (FlowMetrics.rules: per rule its uses and at most 64 memories)."""
    if flow.rules is None:
        return []
    return [(int(count), [(m[0], m[1], m[2], m[3]) for m in seen])
            for count, seen in zip(flow.rules.uses, flow.rules.memories)]


def uses(rule_count: int, flows: Sequence[FlowMetrics]) -> tuple[int, ...]:
    """Every flow's uses of each rule, summed."""
    total = [0] * rule_count
    for flow in flows:
        for i, count in enumerate(flow.rules.uses[:rule_count] if flow.rules is not None else ()):
            total[i] += int(count)
    return tuple(total)


def memories(rule_count: int, flows: Sequence[FlowMetrics]) -> tuple[tuple[Memory, ...], ...]:
    """Every flow's sampled memories of each rule, joined in order: at most MAX_SAMPLES_PER_RULE
    each, taken evenly through the whole list so that every network counts."""
    joined: list[list[Memory]] = [[] for _ in range(rule_count)]
    for flow in flows:
        for i, (_, seen) in enumerate(rule_records(flow)[:rule_count]):
            joined[i].extend(seen)
    return tuple(tuple(seen[::max(1, -(-len(seen) // MAX_SAMPLES_PER_RULE))]) for seen in joined)


class Simulated:
    """Evaluations in the simulator, through `runner` (here or on Dask)."""

    def __init__(self, runner: Runner, delta: float, encode: Callable[[Node], bytes] = tree.encode) -> None:
        self.runner, self.delta, self.encode = runner, delta, encode
        self.simulated_s = 0.0
        """Simulated seconds of every job run so far."""

    def evaluate(self, trees: Sequence[Node], networks: Sequence[Network], record: bool) -> list[Evaluation]:
        models = [self.encode(t) for t in trees]
        # A network whose senders never switch on within the run (each is off for an exponential
        # time first) has nothing to simulate: no flows, a score of 0 (no sender's utility).
        live = [n for n in networks if n.on_periods]
        jobs = [n.job(spec(model_file(i), record)) for i in range(len(trees)) for n in live]
        results = iter(self.runner.run(jobs, models))
        self.simulated_s += sum(job.runtime_s for job in jobs)
        found = []
        for t in trees:
            flows: list[list[FlowMetrics]] = []
            for n in networks:
                result: Result | None = next(results) if n.on_periods else None
                if result is not None and not result.ok:
                    raise EvaluationError(f"the simulator could not run an evaluation: {result.error}")
                flows.append(result.flows if result is not None else [])
            scores = tuple(objective.score(n, f, self.delta) for n, f in zip(networks, flows))
            if record:
                count = len(tree.rules(t))
                found.append(Evaluation(scores, tuple(uses(count, f) for f in flows),
                                        memories(count, [one for f in flows for one in f])))
            else:
                found.append(Evaluation(scores))
        return found
