"""A whole training of a RemyCC: the optimiser (optimise.py) stepped until it stops or the budget
runs out, its simulations here on every core or on a Dask cluster (pantheon.sim.runner), a
checkpoint after every accepted improvement, and the tree written at the end. `pantheon remy
train` (cli.py) turns its options into one `train` call.

The checkpoint (TREE.train.json beside the tree) is the optimiser's whole state plus the settings
it was made with (the prior's text, seed, networks): the same command resumes from it, and a
command with other settings refuses it rather than mixing two trainings. The time already spent
counts against `--time-budget-s` across resumes.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from pantheon import files
from pantheon.errors import PantheonError
from pantheon.remy import tree
from pantheon.remy.evaluation import Evaluator, Simulated
from pantheon.remy.optimise import Event, Optimiser, State, run
from pantheon.remy.prior import Prior
from pantheon.sim.runner import Runner


class CheckpointError(PantheonError):
    """A checkpoint that does not belong to this command."""


@dataclass(frozen=True)
class Settings:
    prior: Prior
    prior_text: str
    network_count: int
    seed: int
    generations: int | None
    time_budget_s: float | None

    def fingerprint(self) -> str:
        """What makes two trainings the same: the prior's text, the networks and the seed."""
        text = json.dumps([self.prior_text, self.network_count, self.seed])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Trained:
    tree: Path
    summary: Path
    state: State
    stopped: str
    """Why the training stopped."""
    wall_s: float
    simulated_s: float
    """Simulated seconds this command ran (all networks of all evaluations)."""


def checkpoint_path(out: Path) -> Path:
    return out.with_name(out.name + ".train.json")


def _load(path: Path, settings: Settings, resume: bool) -> tuple[State | None, float]:
    """(the checkpoint's state, its elapsed seconds), or (None, 0) for a fresh start."""
    if not path.exists():
        if resume:
            raise CheckpointError(f"--resume: {path} does not exist: there is nothing to resume (leave out --resume)")
        return None, 0.0
    try:
        data = json.loads(path.read_text())
        if data.get("fingerprint") != settings.fingerprint():
            raise CheckpointError(f"{path} is another training's (another prior, --networks or --seed): remove it "
                                  "or give that training's options")
        return State.from_json(data["state"]), float(data["elapsed_s"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path}: not a checkpoint this Pantheon can read ({e}); remove it to start again") from None


def _save(path: Path, settings: Settings, state: State, elapsed_s: float) -> None:
    files.write_atomic(path, json.dumps({"fingerprint": settings.fingerprint(), "elapsed_s": elapsed_s,
                                         "state": state.to_json()}, indent=1) + "\n")


def train(settings: Settings, out: Path, scheduler: str | None, resume: bool, quiet: bool,
          evaluator: Evaluator | None = None) -> Trained:
    """Trains a rule tree for `settings.prior`, writes it to `out` (Remy's format) and a summary
    beside it (OUT.json); resumes from OUT.train.json when it is this training's."""
    started = time.monotonic()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PantheonError(f"--out {out}: cannot make its directory ({e.strerror or e})") from None
    checkpoint = checkpoint_path(out)
    state, elapsed_before_s = _load(checkpoint, settings, resume)
    runner = None
    if evaluator is None:
        runner = Runner(scheduler)
        evaluator = Simulated(runner, settings.prior.delta)
    optimiser = Optimiser(settings.prior, settings.network_count, settings.seed, evaluator, settings.generations, state)

    def elapsed_s() -> float:
        return elapsed_before_s + time.monotonic() - started

    def keep_going() -> bool:
        return settings.time_budget_s is None or elapsed_s() < settings.time_budget_s

    def say(line: str) -> None:
        # Lines, not a bar: how many steps a generation takes is not known before it ends.
        if not quiet:
            print(line, file=sys.stderr, flush=True)

    def on_event(event: Event) -> None:
        say(f"[{elapsed_s():6.0f} s] {event.line}")
        if event.accepted:
            _save(checkpoint, settings, optimiser.state, elapsed_s())

    try:
        where = runner.where if runner is not None else "a given evaluator"
        how = "resuming" if state is not None else "starting"
        say(f"remy train: {how}; {settings.network_count} networks of {settings.prior.runtime_s:g} s per evaluation, "
            f"seed {settings.seed}; simulating {where}")
        final = run(optimiser, keep_going, on_event)
        if not optimiser.stopped:
            # The budget ran out: a search in progress keeps its best action so far.
            on_event(Event("stopped", f"time budget of {settings.time_budget_s:g} s spent", accepted=True))
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"interrupted: {checkpoint} keeps the last accepted improvement; the same command "
                                "resumes") from None
    finally:
        if runner is not None:
            runner.close()
    tree.write(final.tree, out)
    wall_s = time.monotonic() - started
    simulated_s = evaluator.simulated_s if isinstance(evaluator, Simulated) else 0.0
    summary = out.with_name(out.name + ".json")
    files.write_atomic(summary, json.dumps({
        "tree": str(out), "prior": settings.prior.source, "networks": settings.network_count, "seed": settings.seed,
        "runtime_s": settings.prior.runtime_s, "delta": settings.prior.delta, "rules": len(tree.rules(final.tree)),
        "generation": final.generation, "stopped": optimiser.stopped or "time budget spent",
        "evaluations": final.evaluations, "elapsed_s": elapsed_s(),
        "history": [asdict(h) for h in final.history],
        "splits": final.splits}, indent=1) + "\n")
    return Trained(out, summary, final, optimiser.stopped or "time budget spent", wall_s, simulated_s)
