"""Full and read-only disks lose nothing that was finished (issue 18 §3; files.py).

- A read-only --data-dir (a tmpfs mounted read-only in a private mount namespace, `unshare -m`)
  is a one-line error before the first run, for `pantheon sim` and `pantheon test local`.
- A disk that fills up mid-campaign (a tmpfs of a few runs' size) ends the campaign with one line
  naming the run it cut short; every finished run stays intact and analysable, the cut-short one
  says why in its run.json, and the analysis then runs.
- The atomic write leaves the old file or the whole new one, never a temporary file behind.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pantheon import files
from support.datadir import data_dir
from support.disk import in_tmpfs
from support.emulator import TRAFFIC

REPO = Path(__file__).resolve().parent.parent
SIM = REPO / "target" / "release" / "pantheon-sim"
PANTHEON = REPO / ".venv" / "bin" / "pantheon"
needs_mounts = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                  reason="mounting a tmpfs in a private mount namespace needs root and unshare(1)")
needs_sim = pytest.mark.skipif(not SIM.is_file(), reason=f"{SIM} is not built (cargo build --release --workspace)")


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@needs_mounts
@needs_sim
def test_a_read_only_data_dir_is_one_line_before_any_run(tmp_path: Path) -> None:
    for command in (["sim", "--schemes", "copa"], ["test", "local", "--schemes", "cubic"]):
        done, mount, _ = in_tmpfs(tmp_path / command[0], "ro,size=1m", *command, "--runtime", "2")
        assert done.stdout.strip() == "exit 2", (done.stdout, done.stderr)
        assert one_line(done.stderr) == f"pantheon: --data-dir {mount / 'data'} is not writable: Read-only file system"


@needs_mounts
@needs_sim
def test_a_full_disk_keeps_the_finished_runs_and_names_the_cut_short_one(tmp_path: Path) -> None:
    # A 3 s simulated run of one flow writes ~350 kB: 1200 kB hold three, not six.
    done, _, kept = in_tmpfs(tmp_path, "size=1200k", "sim", "--schemes", "copa,cubic-user", "--run-times", "3",
                             "--runtime", "3", "--jobs", "1")
    assert done.stdout.strip() == "exit 1", (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    said = done.stderr.splitlines()
    full = [line for line in said if line.startswith("pantheon: the disk is full: ")]
    assert len(full) == 1 and "finished run(s) are intact" in full[0], done.stderr
    assert any(line.startswith(("pantheon: analysis of", "pantheon analyze:")) for line in said), \
        "the analysis ran, or said in one line why it could not"

    outcomes = {run: json.loads((run / "run.json").read_text()) for run in sorted(kept.glob("*/run*"))}
    finished = [run for run, o in outcomes.items() if o["ok"]]
    cut = [run for run, o in outcomes.items() if not o["ok"]]
    assert len(finished) >= 2 and cut, outcomes
    for run in finished:
        assert pq.read_table(run / "records.parquet").num_rows > 1000
    for run in cut:
        assert outcomes[run]["failures"][0].startswith("cut short: "), outcomes[run]
        assert "No space left on device" in outcomes[run]["failures"][0]
        assert f"{run.parent.name} run {run.name[3:]}" in full[0], (run, full[0])
        assert [p.name for p in run.iterdir()] == ["run.json"], "a cut-short run's partial files are freed"
    assert not list(kept.rglob(".*.tmp")), "no temporary file is left behind"
    analyzed = subprocess.run([str(PANTHEON), "analyze", str(kept)], capture_output=True, text=True, timeout=120)
    assert analyzed.returncode == 0, analyzed.stderr
    assert (kept / "report.html").is_file()


@needs_mounts
def test_an_emulator_log_cut_short_by_a_full_disk_fails_the_emulator(tmp_path: Path) -> None:
    # 2 s of 5 Mbit/s through the uplink logs ~60 kB (entries, departures, opportunities); the
    # disk holds 16 kB, and the downlink's log only its header.
    log = tmp_path / "disk" / "uplink.log"
    send = f"{sys.executable} {TRAFFIC} udp-send $MAHIMAHI_BASE 9 --rate-mbps 5 --size 1000 --seconds 2"
    done, _, _ = in_tmpfs(tmp_path, "size=16k", "emulate", "--uplink-log", str(log), "--", "sh", "-c", send, data_dir=False)
    assert done.stdout.strip().splitlines()[-1] == "exit 2", (done.stdout, done.stderr)
    assert one_line(done.stderr) == (f"pantheon emulate: the uplink log ({log}) could not be written completely: "
                                     "No space left on device (os error 28)")


def test_an_atomic_write_is_all_or_nothing(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    files.write_atomic(target, "old\n")
    with pytest.raises(RuntimeError), files.atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the writer failed")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]
    mask = os.umask(0o022)
    try:
        files.write_atomic(target, "new\n")
    finally:
        os.umask(mask)
    assert target.read_text() == "new\n"
    assert target.stat().st_mode & 0o777 == 0o644, "result files are readable by others, as before"


def test_out_of_space_is_enospc_or_edquot_and_what_a_child_says_of_it() -> None:
    assert files.out_of_space(OSError(28, "No space left on device"))
    assert files.out_of_space("pantheon-sim: records.parquet: No space left on device (os error 28)")
    assert not files.out_of_space(OSError(30, "Read-only file system"))
    assert not files.out_of_space("flow 0 (copa) moved no data")


@needs_mounts
@pytest.mark.slow
def test_a_full_disk_ends_a_harness_campaign_after_the_run_it_cut_short(tmp_path: Path) -> None:
    # A 3 s run of kernel Cubic over the default path writes ~1.1 MB (its logs, records, merged
    # logs): 1500 kB hold one, not three.
    done, mount, kept = in_tmpfs(tmp_path, "size=1500k", "test", "local", "--schemes", "cubic", "--run-times", "3",
                                 "--runtime", "3", "--no-analyze")
    assert done.stdout.strip() == "exit 1", (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    full = [line for line in done.stderr.splitlines() if line.startswith(f"pantheon: the disk of {mount}/data is full: ")]
    assert len(full) == 1, done.stderr
    outcomes = {run.name: json.loads((run / "run.json").read_text()) for run in sorted((kept / "cubic").glob("run*"))}
    cut = [name for name, o in outcomes.items() if not o["ok"]]
    assert cut == [max(outcomes)], outcomes
    assert f"cubic run {cut[0][3:]}/3 was cut short" in full[0]
    assert outcomes[cut[0]]["failures"][0].startswith("cut short: ")
    for name, outcome in outcomes.items():
        if outcome["ok"]:
            assert pq.read_table(kept / "cubic" / name / "records.parquet").num_rows > 1000
    assert not list(kept.rglob(".*.tmp")), "no temporary file is left behind"


def test_a_failed_run_on_a_full_disk_counts_as_cut_short() -> None:
    said = "pantheon-sim: records.parquet: No space left on device (os error 28)"
    assert files.full_disk_failure(["flow 0 (copa) moved no data", said]) == said
    assert files.full_disk_failure([]) is None
    assert files.full_disk_failure(["flow 0 (copa) moved no data"]) is None


@needs_mounts
def test_a_log_the_emulator_or_tunnel_could_not_write_is_the_reason_in_run_json(tmp_path: Path) -> None:
    # A 3 s run writes its endpoints' logs (~800 kB) at the end, the records after them: 150 kB cannot
    # hold the logs.
    done, _, kept = in_tmpfs(tmp_path, "size=150k", "test", "local", "--schemes", "cubic", "--run-times", "1",
                             "--runtime", "3", "--no-analyze")
    assert done.stdout.strip() == "exit 1", (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    why = json.loads((kept / "cubic" / "run1" / "run.json").read_text())["failures"]
    assert len(why) == 1 and why[0].startswith("cut short: the "), why
    assert "log could not be written completely: No space left on device" in why[0], why


@needs_mounts
def test_an_analysis_on_a_full_or_read_only_out_dir_leaves_the_earlier_outputs_whole(tmp_path: Path) -> None:
    data, mount, kept = data_dir(tmp_path / "data"), tmp_path / "disk", tmp_path / "kept"
    mount.mkdir()
    kept.mkdir()
    analyze = f"{PANTHEON} analyze {data} --out {mount}/out --quiet"
    script = (f"mount -t tmpfs -o size=8m pantheon-test {mount} || exit 99; {analyze} || exit 98; "
              f"cp -r {mount}/out {kept}/before; dd if=/dev/zero of={mount}/fill bs=64k 2>/dev/null; "
              f"{analyze} 2>{kept}/full.err; echo full $?; rm {mount}/fill; mount -o remount,ro {mount}; "
              f"{analyze} 2>{kept}/ro.err; echo ro $?; cp -r {mount}/out {kept}/after")
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["full", "2", "ro", "2"], (done.stdout, done.stderr)
    full = one_line((kept / "full.err").read_text())
    assert full.startswith(f"pantheon: cannot write the analysis into {mount}/out") and "No space left on device" in full, full
    assert full.endswith("the outputs of an earlier analysis are as they were")
    read_only = one_line((kept / "ro.err").read_text())
    assert read_only == f"pantheon: --out {mount}/out is not writable: Read-only file system"
    before = {p.name: p.read_bytes() for p in (kept / "before").iterdir()}
    assert {"perf.json", "report.html", "report.pdf", "summary_means.png"} <= set(before)
    assert {p.name: p.read_bytes() for p in (kept / "after").iterdir()} == before, "no output is cut short or left over"
