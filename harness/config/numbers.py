"""argparse types for the numbers a command line gives (the CLI's and `harness history`'s): refused while the
arguments are parsed, naming the flag (argparse prefixes it), before anything is read, started or written."""

from __future__ import annotations

import argparse
from collections.abc import Callable

# A seed is stored in the history as an SQLite INTEGER (signed 64 bits): a larger one is refused where it is read,
# not after the whole run when its row is appended.
SEED_LIMIT = 2**63


def whole_number(least: int, below: int | None = None, why: str = "") -> Callable[[str], int]:
    """argparse type: a whole number (ASCII digits) of at least `least` and, with `below`, less than it; `why` is
    added to the refusal."""
    def parse(text: str) -> int:
        digits = text.strip()
        if not (digits.isascii() and digits.isdigit()) or int(digits) < least or (below is not None
                                                                                    and int(digits) >= below):
            span = f"from {least} to {below - 1}" if below is not None else f"of at least {least}"
            raise argparse.ArgumentTypeError(f"{text!r}: give a whole number {span}{why}")
        return int(digits)
    return parse


def seed(least: int) -> Callable[[str], int]:
    """argparse type of a seed: a whole number from `least` below SEED_LIMIT (the history stores it)."""
    return whole_number(least, SEED_LIMIT, " (2**63 - 1: the history stores a seed as a 64-bit integer)")
