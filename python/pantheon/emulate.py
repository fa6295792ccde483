"""`pantheon emulate` and `pantheon emulators`: the Rust emulator (pantheon-emu) behind Pantheon's
command, with `--emulator NAME` expanded into a preset's options (presets.splice), and the list of
those presets.

pantheon-emu owns every other option, its help and its exit status: `pantheon emulate` execs it,
and shows its help under its own name with `--emulator` added.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess

from pantheon import presets
from pantheon.binaries import binary

EMULATOR_OPTION = ("--emulator <NAME|FILE.toml>",
                   "One of Pantheon's paths (pantheon emulators) or a preset file; options given here replace its")
"""The one option `pantheon emulate` takes itself; pantheon-emu owns every other."""


def _run_emulate(args: argparse.Namespace) -> int:
    """Hands the command line to the Rust emulator, which owns its options and exit status;
    `--emulator NAME` is expanded into the preset's options first (presets.splice)."""
    path = binary("pantheon-emu")
    options = args.argv[: args.argv.index("--")] if "--" in args.argv else args.argv
    if asked := next((arg for arg in options if arg in ("-h", "--help")), None):
        shown = subprocess.run([str(path), asked], capture_output=True, text=True, check=True).stdout
        print(emulate_help(shown), end="")
        return 0
    os.execv(path, [str(path), *presets.splice(args.argv)])
    return 0  # not reached


def emulate_help(text: str) -> str:
    """pantheon-emu's help (`-h`, one line an option, or `--help`, the option's help indented below
    it) as `pantheon emulate`'s: its name in the usage line, and --emulator first among the options."""
    lines = text.splitlines()
    lines = [line.replace("pantheon-emu", "pantheon emulate") if line.startswith("Usage:") else line for line in lines]
    at = lines.index("Options:") + 1
    flag, meaning = EMULATOR_OPTION
    first = lines[at]
    if short := re.match(r"\s*--\S+(?: <[^>]*>)?\s{2,}(?=\S)", first):
        entry = [f"{_indent(first)}{flag}  ".ljust(short.end()) + meaning]
    else:
        entry = [f"{_indent(first)}{flag}", _indent(lines[at + 1]) + meaning, ""]
    return "\n".join([*lines[:at], *entry, *lines[at:]]) + "\n"


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _emulators(args: argparse.Namespace) -> int:
    print(presets.table())
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """`pantheon emulate`, whose options and help are pantheon-emu's, and `pantheon emulators`."""
    emulate = sub.add_parser(
        "emulate",
        help="run a command behind an emulated network path (options: pantheon emulate --help; --emulator NAME for a preset)",
        add_help=False, verbatim=True,
    )
    emulate.set_defaults(run=_run_emulate)
    emulators = sub.add_parser(
        "emulators", help="list Pantheon's emulated paths (use one with --emulator NAME)",
        description="List Pantheon's emulated paths: the original Pantheon's calibrated emulators, policers, ACK "
        "aggregation and buffer sweeps, and paths behind today's AQMs (CoDel, FQ-CoDel, DualPI2) (presets/*.toml), "
        "each with its delay and both directions' delivery, queue and loss. Give one to pantheon emulate, test local "
        "or sim as --emulator NAME.",
        epilog="example:\n  pantheon emulators")
    emulators.set_defaults(run=_emulators)
