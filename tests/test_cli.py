"""The `pantheon` command's contract with its user and with programs that run it: a user's mistake
is one line and exit status 2, a bug keeps its traceback and exits 70; `pantheon test local` and
`pantheon sim` list the same options, the emulator's included, in --help; every command's --help
says what it does and shows one example that runs; the demo drives the harness's API, not the
command line."""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator

import pytest

from conftest import EMU, REPO
from pantheon import cli, experiment, presets, schemes
from pantheon.analysis.datadir import DataDirError
from pantheon.analysis.logs import LogError
from pantheon.binaries import MissingBinary
from pantheon.errors import PantheonError
from pantheon.netns import NeedsRoot
from pantheon.plan import PlanError
from pantheon.schemes import SchemeError
from pantheon.sim.simulator import SimError
from pantheon.trials import DataDirTaken

PANTHEON = REPO / ".venv" / "bin" / "pantheon"


@pytest.mark.parametrize("error", [PlanError, SchemeError, DataDirError, LogError, SimError, MissingBinary, NeedsRoot,
                                   presets.PresetError, DataDirTaken])
def test_every_user_mistake_is_a_pantheon_error_and_no_value_error(error: type[Exception]) -> None:
    assert issubclass(error, PantheonError) and not issubclass(error, ValueError)


@pytest.mark.parametrize("argv, message", [
    (["sim", "--schemes", "copa", "--run-times", "0"], "pantheon: --run-times must be from 1 to 1000, got 0\n"),
    (["sim", "--schemes", "copa", "--run-times", "1000000000"], "pantheon: --run-times must be from 1 to 1000, got 1000000000\n"),
    (["sim", "--schemes", "copa", "--runtime", "0", "--data-dir", "unused"],
     "pantheon: --runtime must be a positive, finite number of seconds up to 86400 (one day), got 0\n"),
    (["sim", "--schemes", "copa", "--runtime", "nan", "--data-dir", "unused"],
     "pantheon: --runtime must be a positive, finite number of seconds up to 86400 (one day), got nan\n"),
    (["sim", "--schemes", "copa", "--runtime", "1e300", "--data-dir", "unused"],
     "pantheon: --runtime must be a positive, finite number of seconds up to 86400 (one day), got 1e+300\n"),
    (["sim", "--schemes", "nosuch", "--data-dir", "unused"], "pantheon: no scheme can be simulated: nosuch: unknown scheme"),
    (["sim", "--schemes", "copa", "--flows", "nan"], "pantheon sim: argument --flows: invalid int value: 'nan' (see pantheon sim --help)"),
    (["sim", "--scenario", "/dev/zero", "--data-dir", "unused"], "pantheon: /dev/zero: cannot read the scenario: not a regular file\n"),
    (["demo", "--runtime", "1e300", "--data-dir", "unused"],
     "pantheon: --runtime must be a positive, finite number of seconds up to 86400 (one day), got 1e+300\n"),
    (["sim", "--schemes", "copa", "--flows", "1000", "--data-dir", "unused"],
     "pantheon: --flows must be from 1 to 100, got 1000\n"),
    (["sim", "--schemes", "copa", "--emulator", "nope"], "pantheon: unknown emulator 'nope'; known: "),
    (["analyze", "/nonexistent/data"], "pantheon: /nonexistent/data is not a directory"),
])
def test_a_user_mistake_is_one_line_and_status_2(argv: list[str], message: str) -> None:
    done = subprocess.run([str(PANTHEON), *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(message) and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_a_bug_keeps_its_traceback_and_another_status(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    def broken_table() -> str:
        raise ValueError("a stray ValueError from a bug")

    monkeypatch.setattr(presets, "table", broken_table)
    assert cli.main(["emulators"]) == cli.BUG != cli.USER_MISTAKE
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert "ValueError: a stray ValueError from a bug" in err and "this is a bug in Pantheon" in err


def test_an_unknown_option_is_refused_before_anything_runs(tmp_path) -> None:
    done = subprocess.run([str(PANTHEON), "sim", "--schemes", "copa", "--data-dir", str(tmp_path / "d"), "--uplink-speed", "3"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "unrecognized arguments: --uplink-speed 3" in done.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("command", [["test", "local"], ["sim"]])
def test_help_lists_every_path_option(command: list[str]) -> None:
    done = subprocess.run([str(PANTHEON), *command, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    for flag, metavar, _ in experiment.PATH_OPTIONS:
        assert f"{flag} {metavar}" in done.stdout
    for shared in ("--schemes", "--all", "--scenario", "--run-times", "--runtime", "--flows", "--interval", "--seed",
                   "--data-dir", "--emulator", "--quiet", "--no-analyze"):
        assert shared in done.stdout


def test_host_options_are_the_emulators_alone(tmp_path) -> None:
    """`--stalls` models the emulator's host: test local passes it on, pantheon-emu takes it, sim refuses it."""
    local = subprocess.run([str(PANTHEON), "test", "local", "--help"], capture_output=True, text=True, timeout=60).stdout
    emu = subprocess.run([str(EMU), "--help"], capture_output=True, text=True, check=True).stdout
    for flag, metavar, _ in experiment.HOST_OPTIONS:
        assert f"{flag} {metavar}" in local and f"{flag} <{metavar}>" in emu
    done = subprocess.run([str(PANTHEON), "sim", "--schemes", "copa", "--data-dir", str(tmp_path / "d"), "--stalls", "10,1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "unrecognized arguments: --stalls 10,1" in done.stderr


def test_the_path_options_are_the_emulators() -> None:
    """The declared list and pantheon-emu's own options (less the logs, which the harness sets) agree."""
    help_text = subprocess.run([str(EMU), "--help"], capture_output=True, text=True, check=True).stdout
    emulator = {flag for flag in re.findall(r"^\s+(--[a-z-]+)", help_text, re.MULTILINE)
                if flag.startswith(("--delay", "--timing", "--uplink-", "--downlink-")) and not flag.endswith("-log")}
    assert emulator == {flag for flag, _, _ in experiment.PATH_OPTIONS}


def test_options_become_the_same_experiment_for_both_commands() -> None:
    parser = cli._parser()
    common = ["--schemes", "copa,vegas-user,copa", "--runtime", "4", "--flows", "2", "--interval", "1", "--seed", "3",
              "--data-dir", "d", "--emulator", "nepal-wifi", "--delay", "5", "--uplink-loss=0.1"]
    local = experiment.Experiment.from_args(parser.parse_args(["test", "local", *common]), "local")
    sim = experiment.Experiment.from_args(parser.parse_args(["sim", *common]), "sim")
    assert local == sim
    assert local.schemes == ("copa", "vegas-user", "copa") and local.runtime_s == 4 and local.interval_s == 1
    assert local.path_options == ("--delay", "5", "--uplink-loss", "0.1")


def test_the_demo_drives_the_harness_not_the_command_line() -> None:
    done = subprocess.run([sys.executable, "-c", "import sys, pantheon.demo; print('pantheon.cli' in sys.modules)"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_path_options_keep_the_order_given() -> None:
    args = cli._parser().parse_args(["sim", "--all", "--uplink-queue", "droptail", "--delay=20", "--uplink-queue-bytes", "9"])
    assert experiment.Experiment.from_args(args, "sim").path_options == (
        "--uplink-queue", "droptail", "--delay", "20", "--uplink-queue-bytes", "9")


def commands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every command and subcommand below `parser`, parents first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                yield command
                yield from commands(command)


def test_every_command_has_a_description_and_an_example_that_parses(capsys: pytest.CaptureFixture[str]) -> None:
    """Each command's --help (emulate's is pantheon-emu's, below) has a description and an example whose
    command line parses to that command, with schemes and emulators that exist."""
    found = {command.prog: command for command in commands(cli._parser()) if command.prog != "pantheon emulate"}
    assert {"pantheon emulators", "pantheon test local", "pantheon test remote", "pantheon sim", "pantheon analyze",
            "pantheon calibrate", "pantheon schemes list", "pantheon schemes setup", "pantheon schemes check",
            "pantheon demo", "pantheon archive serve", "pantheon archive token create", "pantheon archive token revoke",
            "pantheon archive upload", "pantheon observe", "pantheon indigo train"} <= set(found)
    known = schemes.registry().names()
    for prog, command in found.items():
        with pytest.raises(SystemExit) as exit:
            cli.main([*prog.split()[1:], "--help"])
        shown = capsys.readouterr().out
        assert exit.value.code == 0 and command.description, prog
        assert " ".join(command.description.split()[:4]) in " ".join(shown.split()), prog
        example = re.search(r"^example:\n  (pantheon .+)$", shown, re.MULTILINE)
        assert example, f"{prog} --help shows no example:\n{shown}"
        argv = shlex.split(example.group(1))[1:]
        args = cli._parser().parse_args(argv)
        assert f"pantheon {' '.join(argv)}".startswith(prog), (prog, example.group(1))
        if command.get_default("run"):
            assert args.run is command.get_default("run"), prog
        for name in [*(getattr(args, "schemes", None) or "").split(","), *getattr(args, "names", [])]:
            assert not name or name in known, (prog, name)
        if getattr(args, "emulator", None):
            presets.lookup(args.emulator)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_emulate_help_is_pantheon_emulates(flag: str) -> None:
    """pantheon-emu's help, under the name it is run by here and with the option this side adds."""
    done = subprocess.run([str(PANTHEON), "emulate", flag], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Usage: pantheon emulate [OPTIONS] <CMD>..." in done.stdout and "pantheon-emu" not in done.stdout
    assert re.search(r"^\s+--emulator <NAME\|FILE.toml>", done.stdout, re.MULTILINE)
    assert "--delay <MS>" in done.stdout and "Example: pantheon emulate " in done.stdout


def test_a_reader_that_closes_the_pipe_is_no_bug() -> None:
    """`pantheon emulators | head -3`: the reader left, so nothing is printed, and the exit status
    is a shell's for a command SIGPIPE ended (it was a BrokenPipeError's traceback and 70)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([str(PANTHEON), "emulators"], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (cli.SIGPIPE_EXIT, "")
