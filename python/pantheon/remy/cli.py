"""`pantheon remy train`, `scheme` and `show`: a RemyCC's rule tree optimised for a prior over
the simulator (docs/remy.md), a tree file as a scheme of its own, and a tree file in words.

Training writes the tree (Remy's format, which crates/cc's `tao:tree=FILE` runs), beside it
TREE.json (the summary: each rule's search, each split, the time taken) and TREE.train.json (the
checkpoint: the same command resumes from it).
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from pantheon.errors import PantheonError
from pantheon.remy import prior, scheme, tree
from pantheon.remy.training import Settings, train
from pantheon.repository import ROOT

PRIORS_DIR = ROOT / "data" / "tao"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("remy", help="Remy, congestion control optimised for a prior (pantheon remy train --help)",
                       description="Remy (Winstein & Balakrishnan, SIGCOMM 2013): optimise a RemyCC's rule tree for "
                       "a prior over networks, in the simulator (docs/remy.md).",
                       epilog="example:\n  pantheon remy train --prior data/tao/tao-100x.toml --out tao-100x.dna")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    t = actions.add_parser("train", help="optimise a rule tree for a prior",
                           description="Optimise a RemyCC's rule tree for the networks of a prior (a TOML file: "
                           "link rate, RTT, senders, on/off times, buffer, delta; docs/remy.md) by Remy's "
                           "method: the most-used rule's action improved by local search on common networks, "
                           "rule after rule, the most-used rule split at its median each generation. The "
                           "simulations run here on every core or on a Dask cluster; a checkpoint after every "
                           "accepted improvement (TREE.train.json), from which the same command resumes.",
                           epilog=f"example:\n  pantheon remy train --prior {PRIORS_DIR.relative_to(ROOT)}/tao-100x.toml "
                           "--out tao-100x.dna --time-budget-s 1800")
    t.add_argument("--prior", type=Path, required=True, metavar="FILE.toml", help="the prior (e.g. data/tao/tao-100x.toml)")
    t.add_argument("--out", type=Path, required=True, metavar="TREE", help="the tree file to write (Remy's format; "
                   "run it as tao:tree=TREE)")
    t.add_argument("--seed", type=int, default=0, help="seed of the networks' draws (default 0)")
    t.add_argument("--networks", type=int, help="networks drawn per evaluation (default: the prior's [training] "
                   f"networks, else {prior.DEFAULT_NETWORKS}, Remy's)")
    t.add_argument("--generations", type=int, help="stop after this many generations (default: the prior's [training] "
                   "generations, else until a generation improves no rule)")
    t.add_argument("--time-budget-s", type=float, metavar="SECONDS", help="stop after this much wall-clock time, "
                   "resumed runs' included (default: none)")
    t.add_argument("--resume", action="store_true", help="continue from TREE.train.json (an error if there is none; "
                   "without it the same command resumes too, and a fresh one starts)")
    t.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler (tcp://HOST:8786) whose workers run the "
                   "simulations (default: here, on every core)")
    t.add_argument("--quiet", action="store_true", help="no progress")
    t.set_defaults(run=run_train)
    m = actions.add_parser("scheme", help="a tree file as a scheme of its own",
                           description="Write a scheme manifest DIR/NAME.toml whose sender runs the tree (pantheon-udp "
                           "--cc tao:tree=TREE): with DIR on $PANTHEON_SCHEMES_PATH, `pantheon test local` and "
                           "`pantheon sim` run it by name.",
                           epilog="example:\n  pantheon remy scheme tao-100x.dna --name tao-mine --dir ~/schemes\n"
                           "  PANTHEON_SCHEMES_PATH=~/schemes pantheon sim --schemes tao-mine,tao,cubic-user")
    m.add_argument("tree", type=Path, metavar="TREE")
    m.add_argument("--name", required=True, help="the scheme's name (lower-case letters, digits, '-')")
    m.add_argument("--dir", type=Path, required=True, metavar="DIR", help="where the manifest goes")
    m.set_defaults(run=run_scheme)
    s = actions.add_parser("show", help="a tree file in words", description="A rule tree (Remy's format) in words: "
                           "each rule's box in memory space and its action (pantheon-sim tree show).",
                           epilog="example:\n  pantheon remy show tao-100x.dna")
    s.add_argument("tree", type=Path, metavar="TREE")
    s.set_defaults(run=run_show)


def settings(args: argparse.Namespace) -> Settings:
    chosen = prior.load(args.prior)
    if args.networks is not None and args.networks < 1:
        raise PantheonError(f"--networks must be at least 1, got {args.networks}")
    if args.generations is not None and args.generations < 1:
        raise PantheonError(f"--generations must be at least 1, got {args.generations}")
    if args.time_budget_s is not None and not (math.isfinite(args.time_budget_s) and args.time_budget_s > 0):
        raise PantheonError(f"--time-budget-s must be a positive number of seconds, got {args.time_budget_s:g}")
    return Settings(chosen, args.prior.read_text(), args.networks or chosen.networks, args.seed,
                    args.generations or chosen.generations, args.time_budget_s)


def run_train(args: argparse.Namespace) -> int:
    trained = train(settings(args), args.out, args.scheduler, args.resume, args.quiet)
    s = trained.state
    last = s.history[-1].objective if s.history else float("nan")
    print(f"tree: {trained.tree} ({len(tree.rules(s.tree))} rules, generation {s.generation}, objective {last:.4f}); "
          f"stopped: {trained.stopped}")
    print(f"{s.evaluations} tree evaluations, {trained.simulated_s:.0f} simulated s in {trained.wall_s:.0f} s; "
          f"summary {trained.summary}; run it as tao:tree={trained.tree}")
    return 0


def run_scheme(args: argparse.Namespace) -> int:
    path = scheme.write(args.tree, args.name, args.dir)
    print(f"{path}: scheme {args.name}; run it with PANTHEON_SCHEMES_PATH={args.dir} pantheon sim --schemes {args.name} "
          "(or pantheon test local)")
    return 0


def run_show(args: argparse.Namespace) -> int:
    print(tree.show(args.tree), end="")
    return 0
