#!/usr/bin/env bash
# Pantheon's test command: makes sure the set-up is current, then runs every test (Rust unit
# tests and the Python suite, which moves real packets through network namespaces: run as root).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
./setup.sh --no-run
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
cargo test --release --workspace --quiet
.venv/bin/python -m pytest -q "$@"
