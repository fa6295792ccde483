"""A pantheon command on a full (or small) disk: a tmpfs that only the command sees."""
from __future__ import annotations

import subprocess
from pathlib import Path

from support import PANTHEON


def in_tmpfs(tmp_path: Path, options: str, *pantheon_args: str, data_dir: bool = True,
             ) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """`pantheon ARGS --data-dir MOUNT/data` (without `data_dir`: `pantheon ARGS`) with MOUNT
    (TMP_PATH/disk) a tmpfs (`options`) that only this command sees; then the data dir is copied
    out to KEPT. (What it printed, with "exit STATUS" last on stdout; MOUNT; KEPT.)"""
    mount, kept = tmp_path / "disk", tmp_path / "kept"
    mount.mkdir(parents=True)
    script = ('mount -t tmpfs -o "$1" pantheon-test "$2" || exit 99; m=$2 k=$3; shift 3; "$@"; echo "exit $?"; '
              'if [ -d "$m/data" ]; then cp -r "$m/data" "$k"; fi')
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", options, str(mount),
                           str(kept), str(PANTHEON), *pantheon_args, *(["--data-dir", str(mount / "data")] if data_dir else [])],
                          capture_output=True, text=True, timeout=120)
    return done, mount, kept
