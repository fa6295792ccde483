"""`pantheon indigo train`: Indigo's network trained by DAgger over the simulator (docs/indigo.md).

Writes the weights file the controller loads (`indigo:weights=FILE`), by default
data/indigo/indigo-synthetic.safetensors (the paper's synthetic paths) or, with
`--with-calibrated`, data/indigo/indigo.safetensors; beside it FILE.json, the summary: the paths
and their oracles, each iteration's figures, the time taken. The work directory keeps the
checkpoints: the same command again resumes.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from pantheon.errors import PantheonError
from pantheon.indigo import dagger, paths
from pantheon.indigo.training import figures, train
from pantheon.repository import ROOT

WEIGHTS_DIR = ROOT / "data" / "indigo"
"""The built-in models: crates/cc/build.rs builds each safetensors file here into the controller."""
TRAINED_DIR = WEIGHTS_DIR / "trained"
"""Where training writes by default: beside the built-in models, never over them (issue 39 §3)."""
"""Where the committed weights live: crates/cc's build.rs builds each NAME.safetensors directly in it
into the controller as the model NAME (`indigo:model=NAME`); work directories are below it."""
QUICK_RATES_MBPS = (10, 20, 50)
QUICK_DELAYS_MS = (20, 40)
QUICK_VALIDATION = ((15, 15), (40, 25))
QUICK_PATHS = len(QUICK_RATES_MBPS) * len(QUICK_DELAYS_MS)
QUICK = dict(runtime_s=4.0, hidden=16, iterations=16, patience=8, steps=100, batch=8, learning_rate=1e-2)
"""--quick: 6 paths, 4-second episodes, a 16-unit network, at most 16 iterations: well under a minute of CPU."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("indigo", help="Indigo, the LSTM controller learned by imitation (pantheon indigo train --help)",
                       description="Indigo (Yan et al., ATC 2018, §6): train its network (docs/indigo.md).",
                       epilog="example:\n  pantheon indigo train --quick")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    t = actions.add_parser("train", help="train Indigo's network by DAgger over the simulator",
                           description="Train Indigo's LSTM by DAgger: per training path the best fixed window is "
                           "the oracle; episodes run in the simulator on every core (or a Dask cluster); the "
                           "weights go to a safetensors file the controller loads (indigo:weights=FILE).",
                           epilog="example:\n  pantheon indigo train --quick")
    t.add_argument("--quick", action="store_true", help=f"a small model on {QUICK_PATHS} synthetic paths, in well under a minute")
    t.add_argument("--with-calibrated", action="store_true",
                   help=f"add the calibrated real-path presets ({', '.join(paths.CALIBRATED)})")
    t.add_argument("--preset", action="append", default=[], metavar="NAME|FILE.toml",
                   help="add a preset (built-in name or preset file) to the training paths; repeatable")
    t.add_argument("--out", type=Path, help="the weights file (default data/indigo/trained/indigo-synthetic.safetensors, "
                   "indigo.safetensors with --with-calibrated, indigo-quick.safetensors with --quick; never the committed "
                   "models: a file directly in data/indigo/ is built into the controller as a model of its name, so name "
                   "one there only to replace or add a built-in model)")
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
    t.set_defaults(run=run)


def _settings(args: argparse.Namespace) -> tuple[dagger.Settings, Path]:
    if args.quick:
        if args.with_calibrated or args.preset:
            raise PantheonError(f"--quick trains on its own {QUICK_PATHS} synthetic paths; leave out --with-calibrated and --preset")
        chosen = paths.synthetic(QUICK_RATES_MBPS, QUICK_DELAYS_MS)
        validation = [paths.synthetic_path(rate, delay) for rate, delay in QUICK_VALIDATION]
        base: dict = dict(QUICK)
        out = TRAINED_DIR / "indigo-quick.safetensors"
    else:
        chosen = paths.training_set(args.with_calibrated, args.preset)
        validation = [paths.synthetic_path(rate, delay) for rate, delay in paths.VALIDATION]
        base = {}
        out = TRAINED_DIR / ("indigo.safetensors" if args.with_calibrated else "indigo-synthetic.safetensors")
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
    trained = train(settings, out, args.work_dir or out.with_name(out.stem + ".train"), args.scheduler, args.quiet)
    if trained.chosen:
        print(f"weights: {trained.weights} (iteration {trained.chosen.iteration}'s network: {figures(trained.chosen)})")
    print(f"{trained.episodes} episodes in {trained.wall_s:.0f} s ({trained.episodes / trained.wall_s * 3600:.0f} per hour); "
          f"summary {trained.summary}")
    if out.resolve().parent != WEIGHTS_DIR.resolve():
        print(f"run it as indigo:weights={out}; to build it in as indigo:model=NAME, copy it to "
              f"{WEIGHTS_DIR}/NAME.safetensors (or train with that --out) and run ./setup.sh --no-run")
    return 0
