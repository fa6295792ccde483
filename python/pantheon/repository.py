"""Where this checkout of Pantheon is: the one place the package finds the repository's root, from
which the scheme manifests, the Rust build and the git commit recorded with each campaign are found."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root (python/pantheon/ is two levels below it)."""
