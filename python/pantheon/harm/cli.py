"""`pantheon harm --schemes A,B,C`: the harm matrix of the schemes on one path (issue 35 §3).

Every pair of the schemes shares the path for the whole run, each scheme with itself too (the
baseline: Ware et al., "Beyond Jain's fairness index", HotNets 2019, measure what A does to B
against what B does to B), repeated `--run-times`; over the emulator (`pantheon test local`'s
experiment) or, with `--sim`, in the simulator (`pantheon sim`'s). A pair's run `A+B` gives both
A's harm on B (flow 2) and B's on A (flow 1). The data dir is an ordinary one, analysable and
uploadable like any other; its analysis writes harm.json and the report's heat map
(analysis/harm.py), and this command prints the matrix with its 95% intervals.
"""
from __future__ import annotations

import argparse
import dataclasses
import os

from pantheon import experiment
from pantheon.analysis import harm
from pantheon.errors import PantheonError
from pantheon.harness.local import run_local
from pantheon.sim import cli as sim_cli

MAX_SCHEMES = 12
"""A matrix of 12 schemes is 78 pairs a repetition: minutes in the simulator, an hour a repetition of
30 s runs over the emulator."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "harm", help="the harm every scheme does to every other on a path (pantheon harm --help)",
        description="Run every pair of the schemes, and each scheme with itself, sharing one path, and compute the "
        "harm each does to the other (Ware et al., HotNets 2019): the throughput B loses and the delay it gains with "
        "A, against B with another B. Over the emulator, or in the simulator with --sim. The data dir holds "
        "harm.json and the report's heat map.",
        epilog="example:\n  pantheon harm --schemes cubic-user,bbr-user,copa,vegas-user --sim --run-times 5 "
        "--emulator bdp-codel")
    parser.add_argument("--schemes", required=True, help="comma-separated scheme names, at least two")
    experiment.add_run_options(parser, clock="", run_times_help="runs of each pair (default 1); run K uses seed "
                               "--seed + K - 1, the same for every pair", seed_help="seed of the path's randomness "
                               "(default 0)")
    parser.add_argument("--sim", action=_Simulated, nargs=0, default=False, help="simulate the runs (pantheon sim; "
                        "crates/cc schemes only) instead of running them over the emulator")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                        help="with --sim: runs simulated at once (default: every core this process may use)")
    experiment.add_output_options(parser, "harm")
    experiment.add_path_options(parser)
    parser.set_defaults(run=run, scenario=None, all=False, makes_namespaces=parser.prog)


class _Simulated(argparse.Action):
    """`--sim`: the runs are simulated, so the command makes no network namespaces (and needs no
    user namespace to make them without root: cli.py)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        namespace.sim, namespace.makes_namespaces = True, None


def run(args: argparse.Namespace) -> int:
    asked = experiment.Experiment.from_args(args, "harm")
    names = list(dict.fromkeys(asked.schemes))
    if not 2 <= len(names) <= MAX_SCHEMES:
        raise PantheonError(f"--schemes: give 2 to {MAX_SCHEMES} different schemes, got {len(names)}")
    if args.flows != 1 or args.interval:
        raise PantheonError("--flows and --interval do not apply: every run of pantheon harm is two flows, one of each "
                            "scheme of a pair, for the whole run")
    asked = dataclasses.replace(asked, pairs=True)
    arguments = asked.arguments(command="harm", sim=args.sim, jobs=args.jobs, no_analyze=args.no_analyze)
    if args.sim:
        status = sim_cli.simulate(asked, jobs=args.jobs, text_logs=False, analyze=not args.no_analyze,
                                  arguments=arguments)
    else:
        status = run_local(asked, random_order=False, analyze=not args.no_analyze, arguments=arguments)
    matrix_file = asked.data_dir / harm.HARM_FILE
    if matrix_file.exists() and not asked.quiet:
        print(matrix_text(harm.read_harm_json(matrix_file)))
    return status


def matrix_text(matrix: dict[str, dict[str, dict[str, harm.Harm]]]) -> str:
    """The matrix as a table: a row per A, a column per B, each cell the throughput and delay harm
    A does to B with their 95% intervals ("-" where there is none)."""
    def shown(h: harm.Harm) -> str:
        if h.value is None:
            return "-"
        ci = f" [{h.ci[0]:.2f},{h.ci[1]:.2f}]" if h.ci else ""
        return f"{h.value:.2f}{ci}"

    victims = sorted({b for row in matrix.values() for b in row})
    cells = [[a, *(f"{shown(matrix[a][b]['throughput'])} / {shown(matrix[a][b]['delay'])}" if b in matrix[a] else "-"
                   for b in victims)] for a in sorted(matrix)]
    header = ["harm A→B (throughput / p95 delay)", *victims]
    widths = [max(len(row[i]) for row in [header, *cells]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *cells])
