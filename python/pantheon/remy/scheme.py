"""A trained rule tree as a scheme of its own: a manifest whose sender is `pantheon-udp send --cc
tao:tree=FILE`, so `pantheon test local` (over the emulator) and `pantheon sim` (the simulator
reads the controller from the manifest, sim/simulable.py) both run it by name, beside the built-in
`tao`. The manifest goes into a directory of the caller's, which `$PANTHEON_SCHEMES_PATH` then
names (docs/adding-a-scheme.md, "Manifests outside the repository")."""
from __future__ import annotations

import json
import re
from pathlib import Path

from pantheon import files
from pantheon.binaries import binary
from pantheon.errors import PantheonError
from pantheon.remy import tree

NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
SENDER = "pantheon-udp"


def manifest(tree_file: Path, name: str) -> str:
    """The manifest's text: scheme `name` running the tree at `tree_file` (made absolute)."""
    at = tree_file.resolve()
    udp = json.dumps(str(binary(SENDER)))
    lines = [
        f"# A RemyCC rule tree as a scheme (pantheon remy scheme): {at}",
        f"name = {json.dumps(name)}",
        f"display = {json.dumps(f'Tao ({at.name})')}",
        'color = "#8ca252"',
        f"description = {json.dumps(f'Tao, a RemyCC, with the rule tree {at} (crates/cc tao over pantheon-udp)')}",
        'versions = "pantheon-cc and pantheon-udp of this repository"',
        'run_first = "receiver"',
        f'receiver = [{udp}, "recv", "--bind", "{{local}}", "{{port}}"]',
        f'sender = [{udp}, "send", "--cc", {json.dumps(f"tao:tree={at}")}, "{{peer}}", "{{port}}"]',
        f"needs_files = [{json.dumps(str(at))}]",
        "",
        "[setup]",
        f"ready = [{udp}]",
    ]
    return "\n".join(lines) + "\n"


def write(tree_file: Path, name: str, directory: Path) -> Path:
    """Checks that `tree_file` is a rule tree and `name` a scheme name, writes DIRECTORY/NAME.toml;
    a PantheonError in one line otherwise."""
    if not NAME.fullmatch(name):
        raise PantheonError(f"--name {name!r}: a scheme name is lower-case letters, digits and '-' (e.g. tao-mine)")
    tree.read(tree_file)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PantheonError(f"--dir {directory}: cannot make it ({e.strerror or e})") from None
    path = directory / f"{name}.toml"
    files.write_atomic(path, manifest(tree_file, name))
    return path
