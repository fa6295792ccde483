"""The one error type for a user's mistake, so a program (and the `pantheon` command) can tell a
mistake from a bug.

A `PantheonError` says what the user gave that cannot work and what to do instead; the command
prints it as one line `pantheon: ...` and exits with status 2. Each part names its own mistakes
with a subclass beside the code that raises it (`PlanError`, `SchemeError`, `DataDirError`, ...).
Any other exception, a stray `ValueError` included, is a bug: it keeps its traceback and the exit
status is 70 (sysexits.h's EX_SOFTWARE), never 2.
"""
from __future__ import annotations


class PantheonError(Exception):
    """A user's mistake; the message is one line saying what was wrong and what to do."""
