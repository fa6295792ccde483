"""What a test needs installed (PostgreSQL, Chromium and Playwright, a scheme's set-up) and is not:
skipped where a person runs the suite on a machine without it, failed in CI. CI runs `./test.sh`
on a machine that `./setup.sh` installed whole (`.ci/run`'s environment has CI=true), so a
missing prerequisite there is a broken install step, which skips would hide."""
from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def missing(what: str) -> NoReturn:
    """Ends the test: skipped, or failed under CI, saying what is missing and how to install it."""
    if in_ci():
        pytest.fail(f"{what}; CI installs everything with ./setup.sh, so this is a broken install step", pytrace=False)
    pytest.skip(what)
