#!/usr/bin/env python3
"""The bad-input and fault matrix of issue 18 (§9): every command given the inputs a careful new
user or a reviewer tries, and the faults a machine sees, each classified and checked for leaks.

    .venv/bin/python bench/fault_matrix.py [--lock /work/bench.lock] [--part inputs|faults] [--only TEXT] [--table]

Bad inputs go to every command (`pantheon emulate`, `sim`, `test local`, `analyze`, `schemes
check`, `calibrate`, `demo`, a scenario TOML, `pantheon-sim batch` job lines, traces): /dev/zero, a
2 GiB sparse file, random bytes, non-finite and overflowing numbers, unknown schemes, broken
data dirs, read-only and full disks. Faults: SIGKILL, SIGTERM and SIGINT of the emulator, a tunnel
endpoint and the harness mid-run, a scheme that exits at once and one that ignores SIGTERM, each
with a command that forks grandchildren. The faults move packets: `--lock FILE` holds that lock
(flock) while they run, and only then.

Each case ends as one of:
    clean error      non-zero status and one line, no traceback (a user's mistake, said so)
    clean recovery   the documented outcome (a run marked failed, the campaign going on, 128+SIG)
    messy error      non-zero status, no traceback, but more than one line
    traceback        a Python traceback for what is a user's mistake or an outside fault
    crash            a Rust panic, a death by signal, or no end within the case's timeout
    silently wrong   bad input accepted (status 0), or a damaged run reported as fine
and separately, whatever it left: network namespaces (`ip netns list`: those named after the
case's harness or this bench), devices in the root namespace (`ip -o link`), and processes. This
bench is a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so whatever a case orphans is
reparented to it: a leaked process is a descendant of this bench still alive a few seconds after
its case ended, compared by pid, never by name; leaks are then killed by pid and leaked
namespaces deleted, so that one case cannot spoil the next.

Needs root (namespaces, tmpfs mounts in a private mount namespace) and the release binaries.
tests/test_fault_matrix.py runs a small subset of these cases.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import support
from pantheon.harness.tunnel import write_session_key
from pantheon.netns import private_netns
from support import BIN, REPO
from support.datadir import data_dir, write_run
from support.disk import in_tmpfs
from support.emulator import TRAFFIC
from support.supervised import start

PANTHEON = str(support.PANTHEON)
ENV = {**os.environ, "PYTHONPATH": str(REPO / "python")}
CASE_TIMEOUT_S = 60.0
LEAK_GRACE_S = 5.0
"""How long a case's processes may take to end after it returned before they count as leaked."""
MEMORY_LIMIT_BYTES = 8 << 30
"""Address space of each command (RLIMIT_AS): a case that reads without bound fails instead of
taking the machine (issue 18 §1: /dev/zero as a trace reached 24 GB)."""
PR_SET_CHILD_SUBREAPER = 36

VERDICTS = ("clean error", "clean recovery", "messy error", "traceback", "crash", "silently wrong")
CLEAN = ("clean error", "clean recovery")


@dataclass
class Result:
    name: str
    verdict: str
    note: str
    seconds: float
    leaked_processes: list[int] = field(default_factory=list)
    leaked_namespaces: list[str] = field(default_factory=list)
    leaked_devices: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.verdict in CLEAN and not (self.leaked_processes or self.leaked_namespaces or self.leaked_devices)


@dataclass
class Case:
    name: str
    run: Callable[[Path], tuple[str, str, list[int]]]
    """Runs the case in a scratch directory: (verdict, note, pids whose namespaces count as the
    case's: its harness's)."""
    moves_packets: bool = False


# --- running a command and judging what it said --------------------------------------------------

@dataclass
class Done:
    status: int | None
    """None: it did not end within its timeout (it was killed)."""
    stdout: str
    stderr: str
    pid: int


def limited() -> None:
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def execute(argv: list[str], *, stdin: str | None = None, env: dict | None = None, timeout_s: float = CASE_TIMEOUT_S) -> Done:
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or ENV,
                            preexec_fn=limited)
    try:
        out, err = proc.communicate(stdin, timeout=timeout_s)
        return Done(proc.returncode, out, err, proc.pid)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return Done(None, out, err, proc.pid)


def lines(text: str) -> list[str]:
    return [line for line in text.strip().splitlines() if line.strip()]


def failure_kind(done: Done) -> tuple[str, str] | None:
    """(verdict, note) for a traceback or a crash, else None."""
    if done.status is None:
        return "crash", "no end within its timeout"
    if "Traceback (most recent call last)" in done.stderr:
        return "traceback", lines(done.stderr)[-1][:120]
    if "panicked at" in done.stderr:
        return "crash", next(line for line in lines(done.stderr) if "panicked" in line)[:120]
    if done.status < 0:
        return "crash", f"killed by {signal.Signals(-done.status).name}"
    return None


def judge_error(done: Done) -> tuple[str, str]:
    """A user's mistake: it must be refused in one line."""
    if bad := failure_kind(done):
        return bad
    said = lines(done.stderr)
    if done.status == 0:
        return "silently wrong", f"accepted (status 0){': ' + said[-1][:100] if said else ''}"
    if len(said) == 1:
        return "clean error", said[0][:140]
    return "messy error", f"{len(said)} lines: {' | '.join(said)[:140]}"


def judge_ok(done: Done, statuses: tuple[int, ...] = (0,)) -> tuple[str, str]:
    """Input the command must take in its stride (it warns, flags, or skips; it does not stop)."""
    if bad := failure_kind(done):
        return bad
    said = lines(done.stderr)
    if done.status in statuses:
        return "clean recovery", f"status {done.status}{': ' + said[-1][:120] if said else ''}"
    if len(said) == 1:
        return "clean error", said[0][:140]
    return "messy error", f"status {done.status}, {len(said)} lines: {' | '.join(said)[:120]}"


def judge_either(done: Done) -> tuple[str, str]:
    """Bad data the command may refuse in one line or take in its stride."""
    return judge_ok(done) if done.status == 0 else judge_error(done)


def cli(name: str, argv: Callable[[Path], list[str]], judge: Callable[[Done], tuple[str, str]] = judge_error,
        stdin: str | None = None) -> Case:
    def run(work: Path) -> tuple[str, str, list[int]]:
        done = execute(argv(work), stdin=stdin)
        verdict, note = judge(done)
        return verdict, note, [done.pid]
    return Case(name, run)


# --- the inputs ------------------------------------------------------------------------------------

@dataclass
class Inputs:
    """Files the cases give as input, made once in the bench's scratch directory."""
    root: Path

    def make(self) -> None:
        r = self.root
        rng = random.Random(18)
        with open(r / "sparse", "wb") as f:
            f.truncate(2 << 30)
        (r / "random.bin").write_bytes(rng.randbytes(64 << 10))
        (r / "empty").write_bytes(b"")
        for name, text in {"trace_overflow": "18446744073709552\n", "trace_nan": "nan\n", "trace_negative": "-5\n",
                           "trace_text": "hello\n", "trace_decreasing": "5\n3\n1\n"}.items():
            (r / name).write_text(text)
        (r / "trace_long_line").write_text("1" * (10 << 20))
        flow = 'scheme = "copa"\nstart_s = 0\nduration_s = 2\n'
        for name, text in {
            "nan_runtime.toml": f"runtime_s = nan\n[[flow]]\n{flow}",
            "huge_runtime.toml": f"runtime_s = 1e300\n[[flow]]\n{flow}",
            "negative_start.toml": '[[flow]]\nscheme = "copa"\nstart_s = -1\nduration_s = 2\n',
            "infinite_duration.toml": '[[flow]]\nscheme = "copa"\nstart_s = 0\nduration_s = inf\n',
            "many_flows.toml": f"[[flow]]\n{flow}" * 1000,
            "unknown_scheme.toml": '[[flow]]\nscheme = "nosuch"\nstart_s = 0\nduration_s = 2\n',
            "missing_keys.toml": '[[flow]]\nscheme = "copa"\n',
            "not_toml.toml": "this is [ not toml\n",
        }.items():
            (r / name).write_text(text)
        (r / "random.toml").write_bytes(rng.randbytes(4096))
        self.data_dirs(rng)

    def data_dirs(self, rng: random.Random) -> None:
        r = self.root
        data_dir(r / "good")
        data_dir(r / "duplicates", duplicate_rows=5)
        data_dir(r / "nothing_delivered", delivered=0)
        data_dir(r / "negative_delays", delay_ms=-5.0)
        for name in ("corrupt_records", "zero_records", "sparse_records", "random_run_json", "nan_run_json", "corrupt_metadata",
                     "missing_records"):
            data_dir(r / name)
        run = "cubic/run1"
        (r / "corrupt_records" / run / "records.parquet").write_bytes(rng.randbytes(4096))
        (r / "zero_records" / run / "records.parquet").unlink()
        (r / "zero_records" / run / "records.parquet").symlink_to("/dev/zero")
        with open(r / "sparse_records" / run / "records.parquet", "wb") as f:
            f.truncate(2 << 30)
        (r / "random_run_json" / run / "run.json").write_bytes(rng.randbytes(512))
        (r / "nan_run_json" / run / "run.json").write_text('{"ok": true, "failures": [], "runtime_s": NaN, "flows": []}')
        (r / "corrupt_metadata" / "metadata.json").write_bytes(rng.randbytes(512))
        (r / "missing_records" / run / "records.parquet").unlink()
        random_dir = r / "random_files"
        (random_dir / "cubic" / "run1").mkdir(parents=True)
        for path in ("metadata.json", "cubic/run1/run.json", "cubic/run1/records.parquet", "junk"):
            (random_dir / path).write_bytes(rng.randbytes(2048))
        (r / "empty_dir").mkdir()
        two = r / "two_schemes"
        data_dir(two)
        write_run(two / "reno" / "run1")


def input_cases(inputs: Path) -> list[Case]:
    i = inputs
    cases: list[Case] = []

    def emulate(name: str, *options: str, command: tuple[str, ...] = ("--", "true"), judge=judge_error) -> None:
        cases.append(cli(f"emulate {name}", lambda w: [PANTHEON, "emulate", *options, *command], judge))

    for what, path in (("/dev/zero", "/dev/zero"), ("a 2 GiB sparse file", i / "sparse"), ("a missing file", "/nonexistent/trace"),
                       ("a directory", i), ("random bytes", i / "random.bin"), ("an empty file", i / "empty"),
                       ("an overflowing timestamp", i / "trace_overflow"), ("nan", i / "trace_nan"),
                       ("a negative timestamp", i / "trace_negative"), ("text", i / "trace_text"),
                       ("decreasing timestamps", i / "trace_decreasing"), ("a 10 MB line", i / "trace_long_line")):
        emulate(f"--uplink-trace {what}", "--uplink-trace", str(path))
    for option, value in (("--delay", "1e300"), ("--delay", "1.9e16"), ("--delay", "nan"), ("--delay", "inf"), ("--delay", "-1"),
                          ("--uplink-rate", "0"), ("--uplink-rate", "nan"), ("--uplink-rate", "1e300"), ("--uplink-rate", "-3"),
                          ("--uplink-poisson", "inf"), ("--uplink-queue", "droptail"), ("--uplink-queue-bytes", "-1"),
                          ("--uplink-queue-packets", "1e30"), ("--uplink-queue-bytes", "99999999999999999999999"),
                          ("--uplink-loss", "2"), ("--uplink-loss", "nan"), ("--uplink-policer", "nan,1000"),
                          ("--seed", "-1"), ("--timing", "bogus"), ("--uplink-log", "/nonexistent/dir/up.log"),
                          ("--uplink-log", "/proc/version")):
        emulate(f"{option} {value}", option, value)
    emulate("an unknown command", command=("--", "/nonexistent/command"))
    emulate("no command", command=())
    emulate("a good path (baseline)", "--delay", "5", judge=judge_ok)

    def full_emulator_log(work: Path) -> tuple[str, str, list[int]]:
        send = f"{sys.executable} {TRAFFIC} udp-send $MAHIMAHI_BASE 9 --rate-mbps 5 --size 1000 --seconds 2"
        done, _, _ = in_tmpfs(work, "size=16k", "emulate", "--uplink-log", str(work / "disk" / "up.log"), "--", "sh", "-c", send,
                              data_dir=False)
        status = int(lines(done.stdout)[-1].split()[-1])
        return (*judge_error(Done(status, done.stdout, done.stderr, 0)), [])
    cases.append(Case("emulate --uplink-log on a full disk", full_emulator_log))

    def sim(name: str, *options: str, schemes: str = "copa", judge=judge_error) -> None:
        cases.append(cli(f"sim {name}", lambda w: [PANTHEON, "sim", "--schemes", schemes, "--runtime", "2", "--quiet", "--no-analyze",
                                                    "--data-dir", str(w / "data"), *options], judge))

    def local(name: str, *options: str, schemes: str = "cubic") -> None:
        cases.append(cli(f"test local {name}", lambda w: [PANTHEON, "test", "local", "--schemes", schemes, "--runtime", "2", "--quiet",
                                                           "--no-analyze", "--data-dir", str(w / "data"), *options]))

    for name, options in (("--runtime nan", ["--runtime", "nan"]), ("--runtime inf", ["--runtime", "inf"]),
                          ("--runtime -1", ["--runtime", "-1"]), ("--runtime 0", ["--runtime", "0"]),
                          ("--runtime 1e300", ["--runtime", "1e300"]), ("--flows 0", ["--flows", "0"]),
                          ("--flows 1000", ["--flows", "1000"]), ("--flows nan", ["--flows", "nan"]),
                          ("--interval nan", ["--flows", "2", "--interval", "nan"]), ("--interval -1", ["--flows", "2", "--interval", "-1"]),
                          ("--run-times 0", ["--run-times", "0"]), ("--uplink-trace /dev/zero", ["--uplink-trace", "/dev/zero"]),
                          ("--uplink-trace a sparse file", ["--uplink-trace", str(i / "sparse")]), ("--delay 1e300", ["--delay", "1e300"]),
                          ("--uplink-rate nan", ["--uplink-rate", "nan"]), ("--data-dir read-only", ["--data-dir", "/proc/pantheon"]),
                          ("--data-dir a file", ["--data-dir", str(i / "random.bin")]),
                          ("--scenario random bytes", ["--scenario", str(i / "random.toml")]),
                          ("--scenario runtime_s nan", ["--scenario", str(i / "nan_runtime.toml")]),
                          ("--scenario runtime_s 1e300", ["--scenario", str(i / "huge_runtime.toml")]),
                          ("--scenario a negative start", ["--scenario", str(i / "negative_start.toml")]),
                          ("--scenario duration inf", ["--scenario", str(i / "infinite_duration.toml")]),
                          ("--scenario 1000 flows", ["--scenario", str(i / "many_flows.toml")]),
                          ("--scenario an unknown scheme", ["--scenario", str(i / "unknown_scheme.toml")]),
                          ("--scenario missing keys", ["--scenario", str(i / "missing_keys.toml")]),
                          ("--scenario not TOML", ["--scenario", str(i / "not_toml.toml")]),
                          ("--scenario /dev/zero", ["--scenario", "/dev/zero"]),
                          ("--scenario a sparse file", ["--scenario", str(i / "sparse")])):
        if "--scenario" in options:
            cases.append(cli(f"sim {name}", lambda w, o=options: [PANTHEON, "sim", "--quiet", "--no-analyze", "--data-dir",
                                                                   str(w / "data"), *o]))
        else:
            sim(name, *options)
    sim("an unknown scheme", schemes="nosuch")
    sim("--jobs 0", "--jobs", "0")
    sim("--emulator nope", "--emulator", "nope")
    sim("--seed 1e30", "--seed", "1e30")

    cases.append(Case("sim on a full disk", lambda w: full_disk(w, "size=1200k", "sim", "--schemes", "copa,cubic-user", "--run-times",
                                                                 "3", "--runtime", "3", "--jobs", "1")))

    for name, options in (("--runtime nan", ["--runtime", "nan"]), ("--runtime inf", ["--runtime", "inf"]),
                          ("--runtime -5", ["--runtime", "-5"]), ("--runtime 1e300", ["--runtime", "1e300"]),
                          ("--flows 0", ["--flows", "0"]), ("--flows 1000", ["--flows", "1000"]),
                          ("--interval nan", ["--flows", "2", "--interval", "nan"]), ("--run-times 0", ["--run-times", "0"]),
                          ("--uplink-trace /dev/zero", ["--uplink-trace", "/dev/zero"]), ("--delay 1e300", ["--delay", "1e300"]),
                          ("--data-dir read-only", ["--data-dir", "/proc/pantheon"])):
        local(name, *options)
    local("an unknown scheme", schemes="nosuch")
    cases.append(cli("test local --scenario runtime_s nan", lambda w: [
        PANTHEON, "test", "local", "--scenario", str(i / "nan_runtime.toml"), "--quiet", "--data-dir", str(w / "data")]))

    def analyze(name: str, target: str | Path, *options: str, judge=judge_error) -> None:
        cases.append(cli(f"analyze {name}", lambda w: [PANTHEON, "analyze", str(target), "--quiet", *options], judge))

    analyze("a missing dir", "/nonexistent/data")
    analyze("a file", i / "random.bin")
    analyze("/dev/zero", "/dev/zero")
    analyze("an empty dir", i / "empty_dir")
    analyze("a dir of random files", i / "random_files", judge=judge_either)
    for name in ("corrupt_records", "zero_records", "sparse_records", "random_run_json", "nan_run_json", "corrupt_metadata",
                 "missing_records"):
        analyze(name.replace("_", " "), i / name, judge=judge_either)
    analyze("a duplicated uid", i / "duplicates", judge=judge_ok)
    analyze("nothing delivered", i / "nothing_delivered", judge=judge_ok)
    analyze("negative delays", i / "negative_delays", judge=judge_ok)
    for value in ("0", "nan", "-1", "inf", "1e-300", "1e300"):
        analyze(f"--bin-ms {value}", i / "good", "--bin-ms", value)
    analyze("--out read-only", i / "good", "--out", "/proc/pantheon")

    # A check's verdict is its table on stdout, a failed scheme a FAIL row (status 1).
    cases.append(cli("schemes check an unknown scheme", lambda w: [PANTHEON, "schemes", "check", "nosuch", "--data-dir", str(w / "c")],
                     judge=lambda done: judge_ok(done, (1,)) if "FAIL" in done.stdout and "unknown scheme" in done.stdout
                     else judge_error(done)))
    cases.append(cli("schemes check --data-dir read-only", lambda w: [PANTHEON, "schemes", "check", "cubic", "--data-dir", "/proc/pantheon"]))

    def calibrate(name: str, target: str | Path, *options: str) -> None:
        cases.append(cli(f"calibrate {name}", lambda w: [PANTHEON, "calibrate", str(target), "--quiet", "--out", str(w / "p.toml"),
                                                          *options]))

    calibrate("a missing dir", "/nonexistent/data")
    calibrate("an empty dir", i / "empty_dir")
    calibrate("a dir of random files", i / "random_files")
    for option, value in (("--trials", "0"), ("--trials", "-1"), ("--rate-mbps", "nan:1"), ("--rate-mbps", "5:1"),
                          ("--rate-mbps", "0.0001:1000"), ("--rate-mbps", "abc"), ("--loss", "2:3"), ("--delay-ms", "-1:5"),
                          ("--minutes", "nan"), ("--sim-runs", "0"), ("--hold-out", "nosuch")):
        calibrate(f"{option} {value}", i / "two_schemes", option, value)

    for value in ("1e300", "nan", "-1"):
        cases.append(cli(f"demo --runtime {value}", lambda w, v=value: [PANTHEON, "demo", "--runtime", v, "--data-dir", str(w / "d")]))

    flow = {"cc": "cubic", "start_s": 0, "duration_s": 1}
    for name, line in (("not JSON", "{not json"), ("not an object", "[1, 2]"), ("an unknown field", '{"flows": [], "bogus": 1}'),
                       ("runtime_s 1e300", json.dumps({"flows": [flow], "runtime_s": 1e300})),
                       ("runtime_s -1", json.dumps({"flows": [flow], "runtime_s": -1})),
                       ("runtime_s 0", json.dumps({"flows": [flow], "runtime_s": 0})),
                       ("runtime_s NaN", '{"flows": [{"cc": "cubic"}], "runtime_s": NaN}'),
                       ("runtime_s Infinity", '{"flows": [{"cc": "cubic"}], "runtime_s": Infinity}'),
                       ("no flows", json.dumps({"flows": [], "runtime_s": 1})),
                       ("1001 flows", json.dumps({"flows": [flow] * 1001, "runtime_s": 1})),
                       ("an unknown cc", json.dumps({"flows": [{"cc": "nosuch"}], "runtime_s": 1})),
                       ("start_s 1e300", json.dumps({"flows": [{**flow, "start_s": 1e300}], "runtime_s": 1})),
                       ("duration_s -1", json.dumps({"flows": [{**flow, "duration_s": -1}], "runtime_s": 1})),
                       ("--delay 1e300", json.dumps({"flows": [flow], "runtime_s": 1, "path": ["--delay", "1e300"]})),
                       ("seed -1", json.dumps({"flows": [flow], "runtime_s": 1, "seed": -1})),
                       ("a 2 MiB line", json.dumps({"flows": [flow], "runtime_s": 1, "id": "x" * (2 << 20)}))):
        cases.append(cli(f"sim batch: {name}", lambda w: [str(BIN / "pantheon-sim"), "batch", "--jobs", "1"], judge_batch,
                         stdin=line + "\n"))
    return cases


def full_disk(work: Path, options: str, *pantheon_args: str) -> tuple[str, str, list[int]]:
    """A campaign on a tmpfs that fills up: it must stop with one line saying so, status 1."""
    done, _, _ = in_tmpfs(work, options, *pantheon_args)
    status = int(lines(done.stdout)[-1].split()[-1])
    full = [line for line in lines(done.stderr) if "is full" in line]
    verdict = failure_kind(Done(status, "", done.stderr, 0)) or (
        ("clean recovery", full[0][:140]) if status == 1 and full else ("silently wrong", f"status {status}: {done.stderr[-140:]}"))
    return (*verdict, [])


def judge_batch(done: Done) -> tuple[str, str]:
    """A bad batch job gets its one-line error and never stops the batch (docs/sim.md)."""
    if bad := failure_kind(done):
        return bad
    if done.status != 0:
        return judge_error(done)
    results = [json.loads(line) for line in lines(done.stdout)]
    if len(results) == 1 and results[0].get("ok") is False and "\n" not in results[0].get("error", "\n"):
        return "clean error", results[0]["error"][:140]
    return "silently wrong", f"results: {done.stdout.strip()[:140]}"


# --- the faults ------------------------------------------------------------------------------------

def supervised(name: str, supervisor: Callable[[Path], list[str]], action: str, tail: str = "wait",
               expect_status: int | None = None) -> Case:
    """The emulator or a tunnel server supervising a command that forks a child and a setsid
    daemon (support.supervised.start); `action`: kill-supervisor:SIG, kill-command, or none (the
    command ends by itself)."""
    def run(work: Path) -> tuple[str, str, list[int]]:
        with private_netns(f"pantheon-fault-{os.getpid()}") as netns:
            proc = start(netns, supervisor(work), work, tail=tail)
            started = time.monotonic()
            if action.startswith("kill-supervisor:"):
                proc.send_signal(signal.Signals[action.split(":")[1]])
            elif action == "kill-command":
                os.kill(int((work / "cmd.pid").read_text()), signal.SIGKILL)
            try:
                status = proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                return "crash", "the supervisor did not end within 15 s", []
        if expect_status is not None and status != expect_status:
            return "silently wrong", f"status {status}, expected {expect_status}", []
        return "clean recovery", f"status {status} after {time.monotonic() - started:.1f} s", []
    return Case(name, run, moves_packets=True)


def tunnel_server(work: Path) -> list[str]:
    return [str(BIN / "pantheon-tunnel"), "server", "--key-file", str(write_session_key(work / "session.key"))]


def descendants_of(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError):
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] != "Z":
                    children.setdefault(int(stat[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def endpoint_pids(harness: int, binary: str, role: str | None = None) -> list[int]:
    """The harness's processes running BIN/binary (by /proc/PID/exe, then `role` as its first
    argument): the pids a fault is sent to."""
    found = []
    for pid in descendants_of(harness):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/exe") == str(BIN / binary):
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if role is None or (len(argv) > 1 and argv[1].decode() == role):
                    found.append(pid)
    return found


SCHEMES_TOML = {
    "exits-at-once": 'receiver = ["sh", "-c", "echo cannot bind >&2; exit 3"]\nsender = ["sleep", "1000"]\n',
    "ignores-term": ('receiver = ["sh", "-c", "trap \'\' TERM; sleep 1001 & sleep 1002 & wait"]\n'
                     'sender = ["sh", "-c", "trap \'\' TERM; sleep 1003 & wait"]\n'),
}


def harness(name: str, fault: Callable[[int, Path], None] | None, *, scheme: str = "cubic", runtime_s: int = 6,
            expect: Callable[[Done, dict], str | None]) -> Case:
    """A one-run `pantheon test local` campaign; `fault(harness_pid, data_dir)` is done once the
    run's sender has started. `expect(done, run_json)` says what is wrong with the outcome."""
    def run(work: Path) -> tuple[str, str, list[int]]:
        schemes = work / "schemes"
        schemes.mkdir()
        for s, text in SCHEMES_TOML.items():
            (schemes / f"{s}.toml").write_text(f'name = "{s}"\ndisplay = "{s}"\ncolor = "#000000"\ndescription = "fault"\n'
                                               f'run_first = "receiver"\n{text}')
        data = work / "data"
        argv = [PANTHEON, "test", "local", "--schemes", scheme, "--runtime", str(runtime_s), "--data-dir", str(data), "--quiet",
                "--no-analyze"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**ENV, "PANTHEON_SCHEMES_PATH": str(schemes)}, start_new_session=True)
        if fault:
            started = data / scheme / "run1" / "control" / "flow0.sender.started"
            deadline = time.monotonic() + 30
            while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)
            fault(proc.pid, data)
        try:
            out, err = proc.communicate(timeout=CASE_TIMEOUT_S)
            done = Done(proc.returncode, out, err, proc.pid)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            done = Done(None, out, err, proc.pid)
        run_json_path = data / scheme / "run1" / "run.json"
        run_json = json.loads(run_json_path.read_text()) if run_json_path.exists() else {}
        # A negative status is the harness killed by the fault itself (SIGKILL), which `expect` judges.
        if (bad := failure_kind(done)) and not (done.status is not None and done.status < 0 and "Traceback" not in done.stderr):
            return (*bad, [proc.pid])
        if wrong := expect(done, run_json):
            return "silently wrong", wrong, [proc.pid]
        said = (run_json.get("failures") or lines(done.stderr) or [""])[0]
        return "clean recovery", f"status {done.status}{': ' + said[:120] if said else ''}", [proc.pid]
    return Case(f"harness: {name}", run, moves_packets=True)


def kill(binary: str, sig: signal.Signals, role: str | None = None) -> Callable[[int, Path], None]:
    def fault(harness_pid: int, data: Path) -> None:
        for pid in endpoint_pids(harness_pid, binary, role):
            os.kill(pid, sig)
    return fault


def failed_run(done: Done, run_json: dict) -> str | None:
    if done.status != 1 or run_json.get("ok") is not False or not run_json.get("failures"):
        return f"status {done.status}, run.json ok={run_json.get('ok')}: a damaged run must be marked failed"
    return None


def interrupted(status: int, failure: str) -> Callable[[Done, dict], str | None]:
    def expect(done: Done, run_json: dict) -> str | None:
        if done.status != status or run_json.get("failures") != [failure]:
            return f"status {done.status}, failures {run_json.get('failures')}; expected {status} and [{failure!r}]"
        return None
    return expect


def killed_harness(done: Done, run_json: dict) -> str | None:
    """After a SIGKILL the run's namespace stays until the next campaign removes it
    (leftovers.clean); the bench runs that clean-up as the next campaign would."""
    from pantheon.harness import leftovers
    removed = leftovers.clean()
    if not any(name.startswith(f"pantheon-run-{done.pid}-") for name in removed):
        return f"the next campaign found nothing of it to remove ({removed})"
    return None


def fault_cases() -> list[Case]:
    emu = lambda work: [str(BIN / "pantheon-emu")]  # noqa: E731 - a supervisor's command line
    cases = []
    for what, supervisor in (("emulate", emu), ("tunnel server", tunnel_server)):
        for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            cases.append(supervised(f"{what}: {sig.name} of it, its command forking grandchildren", supervisor,
                                    f"kill-supervisor:{sig.name}", expect_status=None if sig == signal.SIGKILL else 128 + sig))
        cases.append(supervised(f"{what}: its command exits at once", supervisor, "none", tail="exit 3", expect_status=3))
        cases.append(supervised(f"{what}: SIGKILL of its command", supervisor, "kill-command", expect_status=128 + signal.SIGKILL))
        cases.append(supervised(f"{what}: SIGTERM of it, its command ignoring SIGTERM", supervisor, "kill-supervisor:SIGTERM",
                                tail="trap '' INT TERM; while :; do sleep 0.1; done", expect_status=128 + signal.SIGKILL))
    cases += [
        Case("harness: test local on a full disk", lambda w: full_disk(w, "size=150k", "test", "local", "--schemes", "cubic",
                                                                        "--runtime", "3", "--no-analyze"), moves_packets=True),
        harness("a clean run (baseline)", None, runtime_s=3, expect=lambda d, r: None if d.status == 0 and r.get("ok") else "not ok"),
        harness("SIGKILL of pantheon-emu mid-run", kill("pantheon-emu", signal.SIGKILL), expect=failed_run),
        harness("SIGKILL of the tunnel server mid-run", kill("pantheon-tunnel", signal.SIGKILL, "server"), expect=failed_run),
        harness("SIGKILL of the tunnel client mid-run", kill("pantheon-tunnel", signal.SIGKILL, "client"), expect=failed_run),
        harness("SIGTERM of the tunnel client mid-run", kill("pantheon-tunnel", signal.SIGTERM, "client"), expect=failed_run),
        harness("SIGINT of the harness mid-run", lambda pid, d: os.kill(pid, signal.SIGINT),
                expect=interrupted(130, "interrupted (Ctrl-C)")),
        harness("SIGTERM of the harness mid-run", lambda pid, d: os.kill(pid, signal.SIGTERM),
                expect=interrupted(143, "interrupted (SIGTERM)")),
        harness("SIGKILL of the harness mid-run", lambda pid, d: os.kill(pid, signal.SIGKILL), expect=killed_harness),
        harness("a scheme that exits at once", None, scheme="exits-at-once", runtime_s=3, expect=failed_run),
        harness("a scheme that ignores SIGTERM and forks", None, scheme="ignores-term", runtime_s=3, expect=failed_run),
    ]
    return cases


def all_cases(inputs: Path) -> list[Case]:
    return input_cases(inputs) + fault_cases()


# --- leaks -----------------------------------------------------------------------------------------

def namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    named = {line.split()[0] for line in listed.splitlines() if line.strip()}
    return named | (set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set())


def root_devices() -> set[str]:
    listed = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in listed.splitlines()}


def reap() -> None:
    """Waits for every ended child (this bench is the subreaper of whatever its cases orphan)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def run_case(case: Case, scratch: Path) -> Result:
    work = Path(tempfile.mkdtemp(prefix="case-", dir=scratch))
    devices_before = root_devices()
    namespaces_before = namespaces()
    started = time.monotonic()
    try:
        verdict, note, pids = case.run(work)
    except Exception as e:  # noqa: BLE001 - a bench bug in one case is that case's result, not the matrix's end
        verdict, note, pids = "crash", f"the bench failed: {type(e).__name__}: {e}", []
    seconds = time.monotonic() - started
    deadline = time.monotonic() + LEAK_GRACE_S
    while (left := descendants_of(os.getpid())) and time.monotonic() < deadline:
        reap()
        time.sleep(0.1)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    mine = re.compile(rf"pantheon-(run|check)-({'|'.join(str(p) for p in pids) or 'none'})\b|pantheon-fault-{os.getpid()}$")
    leaked_namespaces = sorted(n for n in namespaces() - namespaces_before if mine.match(n))
    for name in leaked_namespaces:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    time.sleep(0.2)
    reap()
    return Result(case.name, verdict, note, seconds, left, leaked_namespaces, sorted(root_devices() - devices_before))


@contextlib.contextmanager
def lock(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_matrix(cases: list[Case], scratch: Path, lock_path: Path | None = None, progress: bool = False) -> list[Result]:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    results = [run_case(c, scratch) for c in cases if not c.moves_packets]
    with lock(lock_path):
        results += [run_case(c, scratch) for c in cases if c.moves_packets]
    if progress:
        print(f"{len(results)} cases", file=sys.stderr)
    return results


def counts(results: list[Result]) -> dict[str, int]:
    verdicts = Counter(r.verdict for r in results)
    return {"cases": len(results), **{v: verdicts[v] for v in VERDICTS},
            "leaked namespaces": sum(len(r.leaked_namespaces) for r in results),
            "leaked devices": sum(len(r.leaked_devices) for r in results),
            "leaked processes": sum(len(r.leaked_processes) for r in results)}


def table(results: list[Result]) -> str:
    rows = []
    for r in results:
        leaks = ", ".join(f"{len(x)} {what}" for x, what in ((r.leaked_processes, "processes"), (r.leaked_namespaces, "namespaces"),
                                                               (r.leaked_devices, "devices")) if x)
        rows.append(f"{r.verdict:<15} {r.seconds:5.1f}s  {r.name:<62} {r.note}" + (f"  LEAKED: {leaks}" if leaks else ""))
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lock", type=Path, help="a lock file (flock) held while the cases that move packets run")
    parser.add_argument("--only", action="append", help="only the cases whose name contains this (repeatable)")
    parser.add_argument("--part", choices=("inputs", "faults"), help="only the bad inputs, or only the faults")
    parser.add_argument("--table", action="store_true", help="print every case, not only those that are not clean")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/fault_matrix.py needs root (network namespaces, tmpfs mounts)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="pantheon-faults-") as scratch:
        inputs = Path(scratch) / "inputs"
        inputs.mkdir()
        Inputs(inputs).make()
        chosen = {"inputs": input_cases, "faults": lambda _: fault_cases()}.get(args.part or "", all_cases)(inputs)
        cases = [c for c in chosen if not args.only or any(text in c.name for text in args.only)]
        results = run_matrix(cases, Path(scratch), args.lock)
    print(table([r for r in results if args.table or not r.clean]))
    print()
    print(", ".join(f"{what}: {n}" for what, n in counts(results).items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
