"""The `pantheon` command: one entry point, one subcommand per task.

    pantheon emulate [options] -- CMD ...   run CMD behind an emulated path (see --help);
                                            --emulator NAME picks one of Pantheon's paths
    pantheon emulators                      list those paths and their parameters
    pantheon test local --schemes cubic,bbr run schemes over an emulated path, every packet logged
    pantheon test remote HOST --schemes ...  the same over the real path to HOST (reached over ssh)
    pantheon sim --schemes copa,vegas-user  the same experiment, simulated (pantheon-sim) on every core
    pantheon analyze DATA_DIR               metrics, plots and a report (HTML, PDF) of a data dir
    pantheon calibrate DATA_DIR             fit an emulator preset to a data dir's results
    pantheon schemes list|setup|check       the scheme registry: status, set-up, a check run of each
    pantheon demo                           every scheme over an emulated 12 Mbit/s, 20 ms path, and a report
    pantheon archive serve|token|upload     the results archive: its website and API, upload tokens, uploads
    pantheon observe SCHEDULE.toml          the observatory: a schedule's experiments round after round, on Dask
    pantheon indigo train                   Indigo's LSTM trained by DAgger over the simulator
    pantheon remy train --prior FILE.toml   a RemyCC's rule tree optimised for a prior (Remy), over the simulator
    pantheon league MATRIX.toml --data-dir D every scheme over a matrix of environments, simulated on Dask, ranked

Each command's module registers itself: its `add_parser(sub)` declares the options, a description
and an example, and sets the parser's defaults `run` (the function that runs it, given the parsed
arguments) and, where it makes network namespaces, `makes_namespaces` (the command's name, for the
message when it cannot become root).
"""
from __future__ import annotations

import argparse
import itertools
import os
import signal
import sys
import textwrap
import traceback
from collections.abc import Iterable
from typing import Any, NoReturn

from pantheon import demo, emulate, userns
from pantheon.analysis import cli as analysis_cli
from pantheon.archive import cli as archive_cli
from pantheon.calibrate import cli as calibrate_cli
from pantheon.errors import PantheonError
from pantheon.harm import cli as harm_cli
from pantheon.harness import cli as harness_cli
from pantheon.indigo import cli as indigo_cli
from pantheon.league import cli as league_cli
from pantheon.observe import cli as observe_cli
from pantheon.remy import cli as remy_cli
from pantheon.schemes import cli as schemes_cli
from pantheon.sim import cli as sim_cli

USER_MISTAKE = 2
"""Exit status of a PantheonError (argparse's, too): one line on stderr says what to change."""
BUG = 70
"""Exit status of any other exception (sysexits.h's EX_SOFTWARE), printed with its traceback."""
SIGPIPE_EXIT = 128 + signal.SIGPIPE
"""Exit status when the reader of stdout closed it, as a shell reports a command SIGPIPE ended."""
class ExampleFormatter(argparse.HelpFormatter):
    """argparse's layout, except that an indented line of a description or an epilog (an example's
    command line) is kept whole, so that it can be copied; other lines are wrapped as argparse does."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        blocks = []
        for verbatim, lines in itertools.groupby(text.splitlines(), key=lambda line: line.startswith(" ")):
            block = "\n".join(lines)
            blocks.append(textwrap.indent(block, indent) if verbatim else super()._fill_text(block, width, indent))
        return "\n".join(blocks)


class OneLineParser(argparse.ArgumentParser):
    """A command line that does not parse is a user's mistake: one line (argparse's own prints the
    usage first, 10-15 lines), with where to look. Subcommands' parsers are of this class too
    (argparse makes them of their parent's class), with its help layout (ExampleFormatter).

    `verbatim=True` makes a parser that parses nothing: its defaults, and the arguments as given in
    `argv` (for `pantheon emulate`, whose options another program owns, `--` and all)."""

    def __init__(self, *args: Any, verbatim: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", ExampleFormatter)
        super().__init__(*args, **kwargs)
        self.verbatim = verbatim

    def parse_known_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> tuple[Any, list[str]]:
        if not self.verbatim:
            return super().parse_known_args(args, namespace)
        parsed, _ = super().parse_known_args([], namespace)
        parsed.argv = list(sys.argv[1:] if args is None else args)
        return parsed, []

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="pantheon",
        description="Pantheon: a training ground for Internet congestion-control research.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    emulate.add_parsers(sub)
    for command in (harness_cli, sim_cli, harm_cli, analysis_cli, calibrate_cli, schemes_cli, archive_cli, observe_cli,
                    indigo_cli, remy_cli, league_cli, demo):
        command.add_parser(sub)
    parser.set_defaults(makes_namespaces=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs one command; its exit status: 0 done, 1 some runs failed or a scheme asked for did not
    run, 2 a user's mistake (one line), 70 a bug (a traceback), 130 or 143 interrupted."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        return _command(argv)
    except PantheonError as e:
        print(f"pantheon: {e}", file=sys.stderr)
        return USER_MISTAKE
    except KeyboardInterrupt as e:
        # A campaign's Interrupted says what it kept and how it ended (130, or 143 for SIGTERM).
        print(f"pantheon: {str(e) or 'interrupted'}", file=sys.stderr)
        return getattr(e, "exit_status", 130)
    except BrokenPipeError:
        # The reader of our output went away (`pantheon emulators | head -3`): nobody is left to
        # tell, and Python's flush at exit must not find the pipe again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return SIGPIPE_EXIT
    except Exception:
        traceback.print_exc()
        print("pantheon: this is a bug in Pantheon, not a mistake of yours: please report it with the traceback above",
              file=sys.stderr)
        return BUG


def _command(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    # Network namespaces need root or, for any other user, a user namespace of their own (userns).
    # (`calibrate --confirm` runs `pantheon test local` as a command of its own, which enters one for itself.)
    if args.makes_namespaces:
        userns.become_root(args.makes_namespaces, argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
