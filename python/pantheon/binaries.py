"""Where the Rust binaries are: $PANTHEON_BIN_DIR if set, else the workspace's release build."""
from __future__ import annotations

import os
from pathlib import Path

from pantheon.errors import PantheonError
from pantheon.repository import ROOT


class MissingBinary(PantheonError):
    """A Rust binary has not been built."""


def binary(name: str) -> Path:
    """Path of the Rust binary `name`, or a MissingBinary error that says how to build it."""
    directory = Path(os.environ.get("PANTHEON_BIN_DIR", ROOT / "target" / "release"))
    path = directory / name
    if not path.is_file():
        raise MissingBinary(f"{path} is missing: run ./setup.sh --no-run (or cargo build --release) in {ROOT}")
    return path
