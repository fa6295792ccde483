"""The top of every TOML input file Pantheon reads (a league's matrix, a Remy prior, an observatory
schedule): parsed, and its keys checked against the ones the file may have, each mistake one line
naming the file, raised as the reader's own PantheonError subclass."""
from __future__ import annotations

import tomllib

from pantheon.errors import PantheonError


def top_table(text: str, source: str, known: set[str], error: type[PantheonError]) -> dict:
    """The file's top-level table; `error` saying `source` is not TOML, or naming its first key
    not in `known`."""
    try:
        top = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise error(f"{source}: not TOML ({e})") from None
    if unknown := sorted(set(top) - known):
        raise error(f"{source}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
    return top
