"""A whole training: every path's oracle, the DAgger iterations (resuming from the work
directory's checkpoints), then the chosen iteration's weights copied to the weights file and its
summary written beside it. `pantheon indigo train` (cli.py) turns its options into one call of
`train` and prints the result.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from pantheon.indigo import dagger, oracle
from pantheon.progress import Progress
from pantheon.sim.runner import Runner


@dataclass(frozen=True)
class Trained:
    """What a training made and how long it took."""
    weights: Path
    summary: Path
    """The JSON summary, beside the weights: the paths and their oracles, each iteration's figures, the times."""
    chosen: dagger.Iteration | None
    """The iteration whose network the weights are."""
    episodes: int
    wall_s: float


def train(settings: dagger.Settings, out: Path, work_dir: Path, scheduler: str | None, quiet: bool) -> Trained:
    """Trains Indigo's network by DAgger on `settings.paths`, its episodes simulated here on every
    core or on the Dask cluster of `scheduler`, its checkpoints in `work_dir` (the same call again
    resumes); writes the chosen network's weights to `out` and the summary beside it. Progress,
    line by line, unless `quiet`."""
    started = time.monotonic()
    runner = Runner(scheduler)
    progress = Progress(settings.iterations + 1, quiet=quiet)

    def say(line: str) -> None:
        if not quiet:
            progress.write(line)

    try:
        say(f"indigo train: {len(settings.paths)} paths, {settings.runtime_s:g} s episodes, {settings.hidden} units; "
            f"simulating {runner.where}")
        progress.started("oracles: best fixed windows")
        every = settings.paths + settings.validation
        oracles = oracle.oracles(every, settings.runtime_s, runner.run)
        oracle_s = time.monotonic() - started
        say(f"oracles ({oracle_s:.0f} s): " + ", ".join(
            f"{p.name} {o.cwnd_packets} pkt ({o.cwnd_packets / p.bdp_packets:.2f} BDP)" for p, o in zip(every, oracles)))
        trainer = dagger.Trainer(settings, oracles, work_dir, runner)
        for h in trainer.state.history:
            progress.ended(_line(h) + " (resumed)")
        while not trainer.done():
            k = trainer.next_iteration()
            progress.started(f"iteration {k}: rolling out {len(settings.paths)} episodes")

            def on_loss(step: int, loss: float, k: int = k) -> None:
                progress.started(f"iteration {k}: training, step {step}/{settings.steps}, loss {loss:.3f}")

            progress.ended(_line(trainer.iterate(on_loss)))
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"interrupted: {work_dir} keeps the finished iterations; the same command "
                                f"resumes") from None
    finally:
        progress.close()
        runner.close()
    best = trainer.best_weights()
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(best, out)
    wall_s = time.monotonic() - started
    history = trainer.state.history
    chosen = trainer.state.best()
    episodes = sum(h.episodes for h in history)
    trained = len(settings.paths)
    summary = {
        "weights": str(out), "settings": {k: v for k, v in vars(settings).items() if k not in ("paths", "validation")},
        "paths": [{"name": p.name, "options": list(p.options), "bdp_packets": p.bdp_packets, "validation": i >= trained,
                   "oracle_cwnd_packets": o.cwnd_packets, "oracle_score": o.score}
                  for i, (p, o) in enumerate(zip(every, oracles))],
        "history": [vars(h) for h in history], "chosen_iteration": chosen.iteration if chosen else None,
        "episodes": episodes, "wall_s": wall_s, "oracle_s": oracle_s,
        "rollout_s": sum(h.rollout_s for h in history), "train_s": sum(h.train_s or 0.0 for h in history),
    }
    out.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
    return Trained(out, out.with_suffix(".json"), chosen, episodes, wall_s)


def figures(h: dagger.Iteration) -> str:
    """An iteration's figures in words: on the training paths, and on the validation paths where measured."""
    line = (f"training paths: agreement {h.agreement:.1%}, held-out loss {h.heldout_loss:.3f}, window off the oracle "
            f"by {h.tracking_error:.1%} over episodes' last half, score {h.score:.3f}")
    if h.halved_tracking_error is not None:
        line += f"; halved episodes: window off by {h.halved_tracking_error:.1%}"
    if h.validation_agreement is not None:
        line += (f"; validation paths: agreement {h.validation_agreement:.1%}, window off by "
                 f"{h.validation_tracking_error:.1%}, score {h.validation_score:.3f}")
    return line


def _line(h: dagger.Iteration) -> str:
    line = f"iteration {h.iteration} ({h.policy}): {figures(h)}; {h.episodes / h.rollout_s:.0f} episodes/s"
    if h.train_loss is not None:
        line += f"; trained to loss {h.train_loss:.3f} in {h.train_s:.0f} s"
    return line
