"""The numpy reference for Indigo's LSTM step (crates/cc/tests/fixtures/indigo) is what its script
writes: the committed files are reproducible from make_reference.py, so the Rust test
(crates/cc/tests/indigo.rs) compares against an independent computation, not a recording."""

import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "crates/cc/tests/fixtures/indigo"


def test_fixtures_are_what_the_reference_script_writes(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(FIXTURES / "make_reference.py"), str(tmp_path)], check=True)
    for name in ["lstm32.safetensors", "lstm32_reference.safetensors"]:
        assert (tmp_path / name).read_bytes() == (FIXTURES / name).read_bytes(), name
