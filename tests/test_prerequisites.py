"""A missing prerequisite is a skip where a person runs the suite, and a failure in CI (issue 39 §4)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

NEEDS_A_TOOL = """
from prerequisites import missing

def test_needs_a_tool():
    missing("/usr/bin/no-such-tool is missing (apt-get install no-such-tool)")
"""


@pytest.mark.parametrize(("ci", "outcome"), [("", "1 skipped"), ("true", "1 failed")])
def test_a_missing_tool_is_skipped_by_a_person_and_failed_by_ci(tmp_path: Path, ci: str, outcome: str) -> None:
    (tmp_path / "test_needs.py").write_text(NEEDS_A_TOOL)
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(REPO / "tests")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                           str(tmp_path / "test_needs.py")], capture_output=True, text=True, env=env, timeout=60)
    assert outcome in done.stdout, done.stdout
    assert ("broken install step" in done.stdout) == (ci == "true")
