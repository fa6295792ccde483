"""What the benchmarks' command lines take and their tables print: a comma-separated choice, a
figure a failed run did not give."""
from __future__ import annotations

import argparse


def comma_list(allowed: tuple[str, ...]):
    """An argparse type: a comma-separated list of some of `allowed`."""
    def parse(text: str) -> list[str]:
        items = [item.strip() for item in text.split(",") if item.strip()]
        unknown = [item for item in items if item not in allowed]
        if unknown or not items:
            raise argparse.ArgumentTypeError(f"choose from {','.join(allowed)}; got {text!r}")
        return items
    return parse


def number(value: float | None, decimals: int) -> str:
    """A table cell: '-' for a figure a failed run did not give."""
    return "-" if value is None else f"{value:.{decimals}f}"
