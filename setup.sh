#!/usr/bin/env bash
# Pantheon's set-up command. On a fresh Debian 12 machine it installs the Debian packages, a
# Python environment with pinned dependencies (.venv) and a release build of the Rust workspace,
# then runs the main job (pantheon demo: every scheme over one emulated path, and a
# report). It is idempotent and takes a second or two when nothing changed.
#
#   ./setup.sh            set up, then run the main job
#   ./setup.sh --no-run   set up only
#
# Needs root for apt-get (uses sudo when not root) and, for the main job, network namespaces.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"

run_main=1
case "${1:-}" in
  --no-run) run_main=0 ;;
  "") ;;
  *) echo "usage: ./setup.sh [--no-run]" >&2; exit 2 ;;
esac

say() { echo "setup: $*"; }
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else echo "setup: this step needs root: $*" >&2; exit 1
  fi
}

# --- Debian packages --------------------------------------------------------------------------
# iproute2: network namespaces; iperf3: bulk TCP for the main job and benchmarks; python3-venv:
# the Python environment; build-essential, pkg-config: native parts of Rust crates; openssh-client:
# remote mode's control channel; openssh-server, faketime: the remote-mode tests' second "host"
# (a throwaway sshd of their own whose sessions run on a shifted clock, tests/remote_hosts.py);
# postgresql-15: the archive's tests run a throwaway cluster of their own (tests/archive_server.py);
# chromium: the archive's pages are tested in a real browser (tests/test_archive_browser.py).
debian_packages=(iproute2 iperf3 procps python3 python3-venv python3-pip build-essential pkg-config ca-certificates
                 openssh-client openssh-server faketime postgresql-15 chromium)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for package in "${debian_packages[@]}"; do
  installed "$package" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  had_sshd=0; installed openssh-server && had_sshd=1
  had_postgresql=0; installed postgresql-15 && had_postgresql=1
  had_sshd_pid=0; [ -e /run/sshd.pid ] && had_sshd_pid=1
  say "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # Installing openssh-server enables and starts the system's ssh service (password logins on
  # port 22). The tests need only the program; a machine that had no ssh server must not gain
  # one as a side effect of setting up Pantheon, so it is stopped and disabled again. A machine
  # that already had openssh-server keeps its service as it was.
  if [ "$had_sshd" -eq 0 ]; then
    if [ -d /run/systemd/system ]; then
      as_root systemctl disable --now --quiet ssh.service ssh.socket 2>/dev/null || true
    else
      as_root update-rc.d ssh disable >/dev/null 2>&1 || true
      [ "$had_sshd_pid" -eq 1 ] || [ ! -e /run/sshd.pid ] || as_root /etc/init.d/ssh stop >/dev/null || true
    fi
  fi
  # Likewise postgresql-15 creates and starts a system cluster (15/main); the tests start their own,
  # so a machine that had none is left with the programs and no running database.
  if [ "$had_postgresql" -eq 0 ]; then
    if [ -d /run/systemd/system ]; then
      as_root systemctl disable --now --quiet postgresql.service 2>/dev/null || true
    else
      as_root update-rc.d postgresql disable >/dev/null 2>&1 || true
      as_root /etc/init.d/postgresql stop >/dev/null 2>&1 || true
    fi
  fi
fi

# --- Rust ---------------------------------------------------------------------------------------
# Any cargo >= 1.88 will do (the parquet crate of crates/sim needs it: rustup's, or Debian bookworm's cargo-web/rustc-web).
min_rust_minor=88
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
rust_ok() {
  command -v cargo >/dev/null || return 1
  local minor; minor=$(cargo --version | sed -E 's/^cargo 1\.([0-9]+).*/\1/')
  [ "${minor:-0}" -ge "$min_rust_minor" ]
}
if ! rust_ok; then
  say "installing Rust from Debian (cargo-web, rustc-web)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cargo-web rustc-web
  rust_ok || { echo "setup: need cargo >= 1.$min_rust_minor; found $(cargo --version 2>&1)" >&2; exit 1; }
fi

# --- Python environment -----------------------------------------------------------------------
# Made from Debian's interpreter (packages python3, python3-venv above), which every user can run:
# a venv runs the interpreter it was made from, so one made from an interpreter in a private home
# (pyenv's under a 0700 /root) works for that user alone, and `pantheon` runs without root
# (docs/harness.md) need the venv to work for anyone. A .venv whose interpreter some user cannot
# reach is made again.
python=/usr/bin/python3
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "setup: need Python >= 3.11 as $python" >&2; exit 1; }
reachable_by_everyone() {  # the file, and every directory on its way, executable by others
  local path; path=$(readlink -f "$1") || return 1
  [ -f "$path" ] || return 1
  while [ "$path" != / ]; do
    [ $((8#$(stat -c %a "$path") & 1)) -eq 1 ] || return 1
    path=$(dirname "$path")
  done
}
if [ -e .venv ] || [ -L .venv ]; then
  if ! reachable_by_everyone .venv/bin/python; then
    say "making .venv again: its interpreter ($(readlink -f .venv/bin/python)) is not reachable by every user"
    rm -rf .venv
  fi
fi
stamp=.venv/.pantheon-setup
want=$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "creating the Python environment (.venv) with pinned dependencies"
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.lock
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
  echo "$want" > "$stamp"
fi

# --- Rust workspace -----------------------------------------------------------------------------
say "building the Rust workspace (release)"
cargo build --release --workspace --quiet

# --- Schemes ------------------------------------------------------------------------------------
# Each manifest under schemes/ says what it needs (Debian packages, a build); a scheme that cannot be
# set up is reported and skipped, and `pantheon schemes list` keeps saying why.
say "setting up the schemes (pantheon schemes setup --all)"
.venv/bin/pantheon schemes setup --all | sed 's/^/setup: /' \
  || say "some schemes could not be set up (the lines above say why; pantheon schemes list)"

if [ "$run_main" -eq 1 ]; then
  say "running the main job: .venv/bin/pantheon demo"
  exec .venv/bin/pantheon demo
fi
