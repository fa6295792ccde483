"""A RemyCC's rule tree as plain data (Winstein & Balakrishnan, SIGCOMM 2013, §4.1–4.3): the
memory space — four congestion signals, (rec_send_ewma, rec_rec_ewma, rtt_ratio,
slow_rec_rec_ewma), the last from the learnability paper (Sivaraman et al., SIGCOMM 2014, §2) —
cut into boxes, each box a rule whose action is (window multiple m, window increment b, intersend
time τ): on each ack the window becomes m·cwnd + b, and packets leave at most one per τ ms.

The tree's nodes are boxes; a node has children (boxes that tile it) or is a leaf with an action.
The rules are the leaves numbered depth-first, children in order: the numbering crates/cc's `tao`
uses when it records each rule's use (`record=1`).

A rule is split, when the optimiser asks, at the median of the memories it saw (2013 §4.3: the
most-used rule is cut at its memory samples' median in each dimension): on every axis where the
median lies strictly inside the box, 2^k children for k such axes, each with the parent's action
and generation; where the median is the box's lower edge, the box's midpoint instead (Remy's
code's rule for a box whose samples sit on its edge); an axis of zero width is not cut.

The file format is Remy's own (protobuf, so Remy's published trees run in our controller);
`pantheon-sim tree json|write|show` converts it to and from this module's JSON form.
"""
from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pantheon.binaries import binary
from pantheon.errors import PantheonError

AXES = ("rec_send_ewma", "rec_rec_ewma", "rtt_ratio", "slow_rec_rec_ewma")
"""The memory's axes, in the order of a box's `lower` and `upper`."""
MAX_MEMORY = 163840.0
"""The root box's upper edge on every axis (Remy's MAX_MEMORY): above any signal a flow sees."""
PROGRAM = "pantheon-sim"
MAX_TREE_BYTES = 64 << 20

Memory = tuple[float, float, float, float]


class TreeError(PantheonError):
    """A tree file that cannot be read or written: one line."""


@dataclass(frozen=True)
class Action:
    window_increment: int
    """b, packets added to the window on each ack."""
    window_multiple: float
    """m, the window's multiplier on each ack."""
    intersend_ms: float
    """τ, the least time between two sends, ms."""


@dataclass(frozen=True)
class Node:
    lower: Memory
    upper: Memory
    """The box [lower, upper) in memory space."""
    children: tuple[Node, ...] = ()
    action: Action | None = None
    """A leaf's action; None for an inner node."""
    generation: int = 0
    """A leaf's generation: the optimiser improves a rule in generation g only while this is <= g."""

    @property
    def is_leaf(self) -> bool:
        return not self.children


def root(action: Action) -> Node:
    """One rule over the whole memory space (Remy's starting point)."""
    return Node((0.0, 0.0, 0.0, 0.0), (MAX_MEMORY,) * 4, action=action)


def rules(tree: Node) -> list[Node]:
    """The leaves, numbered depth-first (the controller's numbering)."""
    if tree.is_leaf:
        return [tree]
    return [leaf for child in tree.children for leaf in rules(child)]


def rule_at(tree: Node, memory: Memory) -> int:
    """The number of the rule whose box holds `memory` (lower edge inclusive, upper exclusive), as
    the controller's lookup finds it; -1 when none does."""
    return next((i for i, leaf in enumerate(rules(tree))
                 if all(lo <= x < hi for lo, x, hi in zip(leaf.lower, memory, leaf.upper))), -1)


START_MEMORY: Memory = (0.0, 0.0, 0.0, 0.0)
"""A flow's memory before its first acknowledgement: the controller's first window and intersend
are the action of the rule that holds it (a lookup the uses do not count; crates/cc's tao)."""


def _map_rule(tree: Node, index: int, fn: Callable[[Node], Node]) -> Node:
    """The tree with rule `index` (depth-first) replaced by fn(rule)."""
    if not 0 <= index < len(rules(tree)):
        raise IndexError(f"rule {index} of {len(rules(tree))}")
    count = 0

    def visit(node: Node) -> Node:
        nonlocal count
        if node.is_leaf:
            count += 1
            return fn(node) if count - 1 == index else node
        return replace(node, children=tuple(visit(child) for child in node.children))

    return visit(tree)


def with_rule(tree: Node, index: int, action: Action, generation: int) -> Node:
    """The tree with rule `index`'s action and generation set."""
    return _map_rule(tree, index, lambda leaf: replace(leaf, action=action, generation=generation))


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def cuts(leaf: Node, memories: Sequence[Memory], axes: Sequence[int] = range(len(AXES))) -> dict[int, float]:
    """Where to cut `leaf` on each axis: the median of `memories` on it, or the box's midpoint
    where the median is its lower edge; axes that cannot be cut (zero width) are left out."""
    found = {}
    for axis in axes:
        lo, hi = leaf.lower[axis], leaf.upper[axis]
        at = _median([m[axis] for m in memories]) if memories else (lo + hi) / 2
        if not lo < at < hi:
            at = (lo + hi) / 2
        if lo < at < hi:
            found[axis] = at
    return found


def _edge(values: list[float]) -> Memory:
    a, b, c, d = values
    return (a, b, c, d)


def split(leaf: Node, memories: Sequence[Memory], axes: Sequence[int] = range(len(AXES))) -> Node:
    """`leaf` as an inner node of 2^k children cut at `cuts`, each with its action and
    generation; the children's order is the lower half before the upper on each axis, the first
    axis the slowest to change (Remy's bisection's order). A leaf that cannot be cut stays one."""
    at = cuts(leaf, memories, axes)
    boxes: list[tuple[list[float], list[float]]] = [(list(leaf.lower), list(leaf.upper))]
    for axis, value in sorted(at.items()):
        halves = []
        for lower, upper in boxes:
            halves.append((lower, upper[:axis] + [value] + upper[axis + 1:]))
            halves.append((lower[:axis] + [value] + lower[axis + 1:], upper))
        boxes = halves
    if len(boxes) == 1:
        return leaf
    children = tuple(Node(_edge(lo), _edge(hi), action=leaf.action, generation=leaf.generation) for lo, hi in boxes)
    return Node(leaf.lower, leaf.upper, children=children)


def split_rule(tree: Node, index: int, memories: Sequence[Memory]) -> Node:
    """The tree with rule `index` split at the median of `memories` (see `split`)."""
    return _map_rule(tree, index, lambda leaf: split(leaf, memories))


def to_json(tree: Node) -> dict:
    """The node in `pantheon-sim tree`'s JSON form."""
    node: dict = {"domain": {"lower": list(tree.lower), "upper": list(tree.upper)}}
    if tree.is_leaf:
        assert tree.action is not None, "a leaf has an action"
        a = tree.action
        node["leaf"] = {"window_increment": a.window_increment, "window_multiple": a.window_multiple,
                        "intersend_ms": a.intersend_ms, "generation": tree.generation}
    else:
        node["children"] = [to_json(child) for child in tree.children]
    return node


def _memory(value: object, where: str) -> Memory:
    if (not isinstance(value, list) or len(value) != len(AXES)
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise TreeError(f"{where}: a box's edge must be {len(AXES)} numbers, got {value!r}")
    return _edge([float(v) for v in value])


def from_json(node: object, where: str = "tree") -> Node:
    """The tree a JSON node describes; a TreeError saying where it is wrong otherwise."""
    if not isinstance(node, dict) or not isinstance(node.get("domain"), dict):
        raise TreeError(f"{where}: a node must be an object with a domain")
    lower = _memory(node["domain"].get("lower"), f"{where}.domain.lower")
    upper = _memory(node["domain"].get("upper"), f"{where}.domain.upper")
    if "leaf" in node:
        leaf = node["leaf"]
        try:
            action = Action(int(leaf["window_increment"]), float(leaf["window_multiple"]), float(leaf["intersend_ms"]))
            generation = int(leaf.get("generation", 0))
        except (KeyError, TypeError, ValueError):
            raise TreeError(f"{where}.leaf: needs window_increment, window_multiple and intersend_ms") from None
        return Node(lower, upper, action=action, generation=generation)
    children = node.get("children")
    if not isinstance(children, list) or not children:
        raise TreeError(f"{where}: a node needs a leaf or children")
    return Node(lower, upper, children=tuple(from_json(c, f"{where}.children[{i}]") for i, c in enumerate(children)))


def _sim(args: list[str], stdin: str | None = None) -> str:
    try:
        done = subprocess.run([str(binary(PROGRAM)), "tree", *args], input=stdin, capture_output=True, text=True,
                              check=False)
    except OSError as e:
        raise TreeError(f"{PROGRAM} tree {args[0]}: cannot run ({e.strerror or e})") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        why = lines[-1].removeprefix(f"{PROGRAM}: ") if lines else f"exit status {done.returncode}"
        raise TreeError(f"{PROGRAM} tree {args[0]} {args[1] if len(args) > 1 else ''}: {why}".replace("  ", " "))
    return done.stdout


def read(path: Path) -> Node:
    """The tree in the file at `path` (Remy's format); a TreeError when it is not one."""
    if not Path(path).is_file():
        raise TreeError(f"{path}: no such tree file")
    text = _sim(["json", str(path)])
    try:
        return from_json(json.loads(text), str(path))
    except json.JSONDecodeError as e:
        raise TreeError(f"{path}: {PROGRAM} tree json gave no JSON ({e})") from None


def write(tree: Node, path: Path) -> None:
    """Writes `tree` to `path` in Remy's format."""
    _sim(["write", str(path)], stdin=json.dumps(to_json(tree)))


def encode(tree: Node) -> bytes:
    """The tree file's bytes."""
    with tempfile.TemporaryDirectory(prefix="pantheon-tree-") as tmp:
        path = Path(tmp) / "tree"
        write(tree, path)
        return path.read_bytes()


def show(path: Path) -> str:
    """The tree in words (`pantheon-sim tree show`)."""
    if not Path(path).is_file():
        raise TreeError(f"{path}: no such tree file")
    return _sim(["show", str(path)])
