"""JSON Lines files of a run (results, samples, telemetry, comparisons): the one reader and the writers.

The reader never raises on a bad line: a crashed writer leaves a truncated last line, and every line that does not
parse becomes one message naming file and line; the rest is returned.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path


def numbered_rows(path: Path) -> tuple[list[tuple[int, object]], list[tuple[int, str]]]:
    """(line number, parsed value) of every line that parses, and (line number, message) per line that does not."""
    data = path.read_bytes()
    lines = data.splitlines()
    unterminated = bool(data) and not data.endswith(b"\n")  # a crashed writer leaves a partial last line
    rows, problems = [], []
    for i, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append((i, f"{path}:{i}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                                "skipped"))
            continue
        if not text.strip():
            continue
        try:
            rows.append((i, json.loads(text)))
        except json.JSONDecodeError as exc:
            what = ("truncated last line (the run was interrupted)" if i == len(lines) and unterminated
                    else f"not JSON ({exc.msg})")
            problems.append((i, f"{path}:{i}: {what}; skipped"))
    return rows, problems


def read_jsonl(path: Path) -> tuple[list[dict], list[str]]:
    """Every JSON object of the file, and one message per line skipped."""
    rows, problems = numbered_rows(path)
    return [row for _, row in rows if isinstance(row, dict)], [p for _, p in problems]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        f.writelines(json.dumps(row, default=str) + "\n" for row in rows)


def append_line(path: Path, line: str, sync: bool = False) -> None:
    """One JSON line appended in one write() under an flock (parallel workers never interleave); `sync` forces it to
    disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        written = 0
        while written < len(data):  # a regular file takes it in one go; a short write is finished, not lost
            written += os.write(fd, data[written:])
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)  # closing drops the lock
