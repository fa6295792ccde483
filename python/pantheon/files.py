"""Result files that a full or read-only disk cannot leave half-written.

Every result file (metadata.json, run.json, sim.json, records.parquet, the merged link logs) is
written atomically: into a temporary file in the same directory, flushed to the disk (fsync),
then renamed over its name, and the directory entry itself synced (rename(2) is atomic within a
file system, POSIX; the fsyncs make the new contents durable before the name points at them).
A reader therefore sees the old file or the whole new one, never a truncated one — the failure
issue 18 found: a full disk left run.json at 0 bytes.

A disk that fills up mid-campaign is not a run's failure but the campaign's end: `out_of_space`
recognises it (ENOSPC, or EDQUOT for a quota) whether Python raised it or a child program said
so; `cut_short` turns the run it hit into a failed run whose run.json says why, freeing its
partial files (incomplete, and their space is what lets run.json and the analysis be written).
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pantheon.errors import PantheonError

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
FULL_TEXTS = tuple(os.strerror(e) for e in FULL_ERRNOS)
"""How a child program (Rust's io::Error, a C program's perror) says the disk is full."""


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path next to `path` to write the whole file to; on leaving the block without
    an exception it is synced and renamed to `path`, with one it is removed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # Not mkstemp: its 0600 would make every result file private; this one gets the umask's mode.
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def write_atomic(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def read_small_text(path: Path, limit_bytes: int) -> str:
    """The text of an input file meant to be small (a scenario): OSError if it cannot be read,
    ValueError saying why it is not such a file — not a regular file (/dev/zero, a FIFO: read
    until memory ran out), over `limit_bytes`, or not UTF-8."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("not a regular file")
    if info.st_size > limit_bytes:
        raise ValueError(f"{info.st_size} bytes, more than the {limit_bytes} such a file may have")
    with open(path, "rb") as f:
        data = f.read(limit_bytes + 1)
    if len(data) > limit_bytes:
        raise ValueError(f"more than the {limit_bytes} bytes such a file may have")
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        raise ValueError(f"not text (a byte that is not UTF-8 at offset {e.start})") from None


def writable_dir(path: Path, option: str) -> None:
    """Creates `path` if missing and checks that files can be created in it: a PantheonError
    naming `option` otherwise, before any run starts (a read-only disk, no permission)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".pantheon-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise PantheonError(f"{option} {path} is not writable: {e.strerror or e}") from None


def out_of_space(error: BaseException | str) -> bool:
    """Whether `error` (an exception, or a failure line a child program printed) says the disk
    or the quota is full."""
    if isinstance(error, OSError):
        return error.errno in FULL_ERRNOS
    return any(text in str(error) for text in FULL_TEXTS)


def full_disk_failure(failures: list[str]) -> str | None:
    """Why a run with these failures was cut short by a full disk, or None if it was not: the
    failure that says so. Every program of a run says so when it cannot write a file: the
    emulator and the tunnel exit non-zero naming the log they could not write completely."""
    return next((f for f in failures if out_of_space(f)), None)


def cut_short(run_dir: Path, run_json: dict) -> bool:
    """Marks a run the full disk cut short: its partial files are removed and `run_json` (which
    says why) written in their place. False if even that could not be written: the run is then
    a directory without run.json, which the analysis reports as a run that did not finish."""
    for entry in list(run_dir.iterdir()) if run_dir.is_dir() else []:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(run_dir / "run.json", json_text(run_json))
    except OSError:
        return False
    return True


def json_text(value: object) -> str:
    """A result file's JSON: indented, one trailing newline, and never NaN (not JSON)."""
    return json.dumps(value, indent=2, allow_nan=False) + "\n"
