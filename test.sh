#!/usr/bin/env bash
# Pantheon's test command: makes sure the set-up is current, runs the linters (style and types are
# the tools' business, and they answer in seconds, before the suite's half hour), then every test
# (Rust unit tests and the Python suite, which moves real packets through network namespaces:
# run as root). Arguments go to pytest: ./test.sh -m "not slow" skips the slow behaviour checks.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
./setup.sh --no-run
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
cargo fmt --all --check
# --release: clippy then shares the release build's build-script outputs and proc-macros.
cargo clippy --workspace --all-targets --release --quiet -- -D warnings
.venv/bin/ruff check python tests bench schemes
.venv/bin/mypy
cargo test --profile release-test --workspace --quiet
.venv/bin/python -m pytest -q --durations=25 "$@"
