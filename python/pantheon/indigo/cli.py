"""`pantheon indigo train`: Indigo's network trained by DAgger over the simulator (docs/indigo.md).

Writes the weights file the controller loads (`indigo:weights=FILE`), by default
data/indigo/indigo-synthetic.safetensors (the paper's synthetic paths) or, with
`--with-calibrated`, data/indigo/indigo.safetensors; beside it FILE.json, the summary: the paths
and their oracles, each iteration's figures, the time taken. The work directory keeps the
checkpoints: the same command again resumes.
"""
from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from pathlib import Path

from pantheon.errors import PantheonError
from pantheon.indigo import dagger, oracle, paths
from pantheon.indigo.runner import Runner
from pantheon.progress import Progress
from pantheon.repository import ROOT

WEIGHTS_DIR = ROOT / "data" / "indigo"
"""Where the committed weights live: crates/cc's build.rs builds each NAME.safetensors directly in it
into the controller as the model NAME (`indigo:model=NAME`); work directories are below it."""
QUICK_RATES_MBPS = (10, 20, 50)
QUICK_DELAYS_MS = (20, 40)
QUICK_VALIDATION = ((15, 15), (40, 25))
QUICK = dict(runtime_s=4.0, hidden=16, iterations=16, patience=8, steps=100, batch=8, learning_rate=1e-2)
"""--quick: 6 paths, 4-second episodes, a 16-unit network, at most 16 iterations: well under a minute of CPU."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("indigo", help="Indigo, the LSTM controller learned by imitation (pantheon indigo train --help)",
                       description="Indigo (Yan et al., ATC 2018, §6): train its network (docs/indigo.md).")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    t = actions.add_parser("train", help="train Indigo's network by DAgger over the simulator",
                           description="Train Indigo's LSTM by DAgger: per training path the best fixed window is "
                           "the oracle; episodes run in the simulator on every core (or a Dask cluster); the "
                           "weights go to a safetensors file the controller loads (indigo:weights=FILE).")
    t.add_argument("--quick", action="store_true", help="a small model on 4 synthetic paths, in well under a minute")
    t.add_argument("--with-calibrated", action="store_true",
                   help=f"add the calibrated real-path presets ({', '.join(paths.CALIBRATED)})")
    t.add_argument("--preset", action="append", default=[], metavar="NAME|FILE.toml",
                   help="add a preset (built-in name or preset file) to the training paths; repeatable")
    t.add_argument("--out", type=Path, help="the weights file (default data/indigo/indigo-synthetic.safetensors, "
                   "indigo.safetensors with --with-calibrated, quick/indigo-quick.safetensors with --quick: a file directly in "
                   "data/indigo/ is built into the controller as a model of its name)")
    t.add_argument("--work-dir", type=Path, help="checkpoints (default: beside --out, OUT_STEM.train/); the same "
                   "command resumes from them")
    t.add_argument("--iterations", type=int, help="the most DAgger iterations (default 60; 16 with --quick)")
    t.add_argument("--episode-s", type=float, help="simulated seconds per episode (default 10; 4 with --quick)")
    t.add_argument("--hidden", type=int, help="LSTM units (default 32, the paper's; 16 with --quick)")
    t.add_argument("--steps", type=int, help="Adam steps per iteration (default 150; 40 with --quick)")
    t.add_argument("--seed", type=int, default=0, help="seed of the initial weights and the minibatches (default 0)")
    t.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler (tcp://HOST:8786) whose workers run the "
                   "episodes (default: here, on every core)")
    t.add_argument("--quiet", action="store_true", help="no progress")


def _settings(args: argparse.Namespace) -> tuple[dagger.Settings, Path]:
    if args.quick:
        if args.with_calibrated or args.preset:
            raise PantheonError("--quick trains on its own 4 synthetic paths; leave out --with-calibrated and --preset")
        chosen = paths.synthetic(QUICK_RATES_MBPS, QUICK_DELAYS_MS)
        validation = [paths.synthetic_path(rate, delay) for rate, delay in QUICK_VALIDATION]
        base: dict = dict(QUICK)
        out = WEIGHTS_DIR / "quick" / "indigo-quick.safetensors"
    else:
        chosen = paths.training_set(args.with_calibrated, args.preset)
        validation = [paths.synthetic_path(rate, delay) for rate, delay in paths.VALIDATION]
        base = {}
        out = WEIGHTS_DIR / ("indigo.safetensors" if args.with_calibrated else "indigo-synthetic.safetensors")
    given = {"iterations": args.iterations, "runtime_s": args.episode_s, "hidden": args.hidden, "steps": args.steps}
    base.update({k: v for k, v in given.items() if v is not None})
    settings = dagger.Settings(chosen, validation, seed=args.seed, **base)
    for name, value, low in (("--iterations", settings.iterations, 1), ("--hidden", settings.hidden, 1),
                             ("--steps", settings.steps, 1)):
        if value < low:
            raise PantheonError(f"{name} must be at least {low}, got {value}")
    if not (math.isfinite(settings.runtime_s) and 0.5 <= settings.runtime_s <= 600):
        raise PantheonError(f"--episode-s must be between 0.5 and 600 simulated seconds, got {settings.runtime_s:g}")
    out = args.out or out
    if out.suffix != ".safetensors":
        raise PantheonError(f"--out {out}: the weights file must end in .safetensors")
    return settings, out


def run(args: argparse.Namespace) -> int:
    settings, out = _settings(args)
    work_dir = args.work_dir or out.with_name(out.stem + ".train")
    started = time.monotonic()
    runner = Runner(args.scheduler)
    progress = Progress(settings.iterations + 1, quiet=args.quiet)

    def say(line: str) -> None:
        if not args.quiet:
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
    if chosen:
        print(f"weights: {out} (iteration {chosen.iteration}'s network: {_figures(chosen)})")
    print(f"{episodes} episodes in {wall_s:.0f} s ({episodes / wall_s * 3600:.0f} per hour); "
          f"summary {out.with_suffix('.json')}")
    return 0


def _figures(h: dagger.Iteration) -> str:
    line = (f"training paths: agreement {h.agreement:.1%}, held-out loss {h.heldout_loss:.3f}, window off the oracle "
            f"by {h.tracking_error:.1%} over episodes' last half, score {h.score:.3f}")
    if h.validation_agreement is not None:
        line += (f"; validation paths: agreement {h.validation_agreement:.1%}, window off by "
                 f"{h.validation_tracking_error:.1%}, score {h.validation_score:.3f}")
    return line


def _line(h: dagger.Iteration) -> str:
    line = f"iteration {h.iteration} ({h.policy}): {_figures(h)}; {h.episodes / h.rollout_s:.0f} episodes/s"
    if h.train_loss is not None:
        line += f"; trained to loss {h.train_loss:.3f} in {h.train_s:.0f} s"
    return line
