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
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path
from typing import NoReturn

from pantheon import presets, schemes_cli, userns
from pantheon.analysis import cli as analysis_cli
from pantheon.archive import cli as archive_cli
from pantheon.binaries import binary
from pantheon.calibrate import cli as calibrate_cli
from pantheon.demo import run_demo
from pantheon.errors import PantheonError
from pantheon.harness import cli as harness_cli
from pantheon.indigo import cli as indigo_cli
from pantheon.observe import cli as observe_cli
from pantheon.sim import cli as sim_cli

USER_MISTAKE = 2
"""Exit status of a PantheonError (argparse's, too): one line on stderr says what to change."""
BUG = 70
"""Exit status of any other exception (sysexits.h's EX_SOFTWARE), printed with its traceback."""


def _emulate(argv: list[str]) -> int:
    """Hands the command line to the Rust emulator, which owns its options and exit status;
    `--emulator NAME` is expanded here into the preset's options (explicit options win)."""
    path = binary("pantheon-emu")
    options, command = (argv[: argv.index("--")], argv[argv.index("--"):]) if "--" in argv else (argv, [])
    for i, arg in enumerate(options):
        if arg == "--emulator" or arg.startswith("--emulator="):
            name = arg.split("=", 1)[1] if "=" in arg else (options[i + 1] if i + 1 < len(options) else "")
            rest = options[:i] + options[i + (1 if "=" in arg else 2):]
            preset = presets.lookup(name)
            options = presets.merge(preset.options(presets.traces_cache()), rest)
            break
    os.execv(path, [str(path), *options, *command])
    return 0  # not reached


class OneLineParser(argparse.ArgumentParser):
    """A command line that does not parse is a user's mistake: one line (argparse's own prints the
    usage first, 10-15 lines), with where to look. Subcommands' parsers are of this class too
    (argparse makes them of their parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="pantheon",
        description="Pantheon: a training ground for Internet congestion-control research.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.add_parser(
        "emulate",
        help="run a command behind an emulated network path (options: pantheon emulate --help; --emulator NAME for a preset)",
        add_help=False,
    )
    sub.add_parser("emulators", help="list Pantheon's emulated paths (use one with --emulator NAME)")
    harness_cli.add_parser(sub)
    sim_cli.add_parser(sub)
    analysis_cli.add_parser(sub)
    calibrate_cli.add_parser(sub)
    schemes_cli.add_parser(sub)
    archive_cli.add_parser(sub)
    observe_cli.add_parser(sub)
    indigo_cli.add_parser(sub)
    demo = sub.add_parser("demo", help="every scheme that can run here over an emulated 12 Mbit/s, 20 ms path; a report")
    demo.add_argument("--runtime", type=float, default=10.0, help="seconds each scheme runs (default 10)")
    demo.add_argument("--schemes", help="comma-separated scheme names (default: all that can run here)")
    demo.add_argument("--data-dir", type=Path, help="where results go (default data/demo-DATE-TIME)")
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
    except Exception:
        traceback.print_exc()
        print("pantheon: this is a bug in Pantheon, not a mistake of yours: please report it with the traceback above",
              file=sys.stderr)
        return BUG


def _making_namespaces(args: argparse.Namespace) -> str | None:
    """The command's name where it makes network namespaces, which needs root or, for any other
    user, a user namespace of their own (userns); None where it does not. (`calibrate --confirm`
    runs `pantheon test local` as a command of its own, which enters one for itself.)"""
    if args.command == "test" and args.mode == "local":
        return "pantheon test local"
    if args.command == "schemes" and args.action == "check":
        return "pantheon schemes check"
    return "pantheon demo" if args.command == "demo" else None


def _command(argv: list[str]) -> int:
    if argv and argv[0] == "emulate":
        return _emulate(argv[1:])
    args = _parser().parse_args(argv)
    if task := _making_namespaces(args):
        userns.become_root(task, argv)
    if args.command == "test":
        return harness_cli.run(args)
    if args.command == "sim":
        return sim_cli.run(args)
    if args.command == "analyze":
        return analysis_cli.run(args)
    if args.command == "calibrate":
        return calibrate_cli.run(args)
    if args.command == "schemes":
        return schemes_cli.run(args)
    if args.command == "archive":
        return archive_cli.run(args)
    if args.command == "observe":
        return observe_cli.run(args)
    if args.command == "indigo":
        return indigo_cli.run(args)
    if args.command == "emulators":
        print(presets.table())
        return 0
    return run_demo(runtime_s=args.runtime, schemes=args.schemes, data_dir=args.data_dir)


if __name__ == "__main__":
    sys.exit(main())
