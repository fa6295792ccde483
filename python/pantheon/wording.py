"""How the reports, the terminal summaries and the archive's pages say a count in words."""
from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """"1 run", "3 runs": the number and its noun, agreeing (a regular plural: noun + "s")."""
    return f"{n} {noun}" + ("" if n == 1 else "s")
