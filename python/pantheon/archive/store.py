"""The content-addressed file store: a file's bytes live at DIR/ab/cdef... under their sha256, so
one copy serves every result that holds the same file, and a file is never changed in place.
Files enter by rename from the staging directory beside them (same file system, so the rename is
atomic): a crash leaves a whole blob or none. Blobs enter before the rows that name them, so a crash
between the two leaves an unreferenced blob, never a row without its file; the next start sweeps
such blobs away (sweep), when no upload can be in flight.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import uuid
from pathlib import Path
from typing import IO

from pantheon.errors import PantheonError


class StoreError(PantheonError):
    """A store directory this server cannot use."""


class Store:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.blobs = self.root / "sha256"
        self.staging = self.root / "staging"
        """Where uploads are received and unpacked; emptied at start (what is there is from a
        server that stopped mid-upload)."""
        self._lock: IO[str] | None = None
        """serve.lock, held (flock) while this process serves the store."""

    def open(self) -> None:
        """Takes the store for this process (a second server on the same directory would empty the
        staging of the first's uploads in flight), then empties the staging directory."""
        try:
            self.blobs.mkdir(parents=True, exist_ok=True)
            self._lock = (self.root / "serve.lock").open("w")
        except OSError as e:
            raise StoreError(f"--files {self.root}: cannot keep the archive's files there ({e.strerror}); "
                             "give a directory this user may write") from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(f"another pantheon archive serve uses {self.root}: give this one its own --files "
                             "(or run one server, behind a reverse proxy)") from None
        if self.staging.exists():
            shutil.rmtree(self.staging)
        self.staging.mkdir(parents=True)

    def sweep(self, referenced: set[str]) -> int:
        """Removes the blobs no row names (a crash between a blob and its rows); their count. Only
        at start, under serve.lock: an upload in flight holds blobs whose rows are not yet committed."""
        assert self._lock is not None, "sweep needs the store taken (open)"
        removed = 0
        for blob in self.blobs.glob("??/*"):
            if blob.parent.name + blob.name not in referenced:
                blob.unlink()
                removed += 1
        return removed

    def path(self, sha256: str) -> Path:
        return self.blobs / sha256[:2] / sha256[2:]

    def has(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def stage_dir(self) -> Path:
        """A fresh directory for one upload."""
        path = self.staging / uuid.uuid4().hex
        path.mkdir()
        return path

    def put(self, source: Path, sha256: str) -> None:
        """Moves a verified file (its sha256 already checked) into the store; a blob already there
        is kept and the source dropped."""
        target = self.path(sha256)
        if target.is_file():
            source.unlink()
            return
        target.parent.mkdir(exist_ok=True)
        os.chmod(source, 0o444)
        os.replace(source, target)
