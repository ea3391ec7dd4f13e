"""Watch a growing server log for a fatal line, reading each byte once.

A long run's log is too large to reread each poll: `FatalWatch` reads only what was appended, carrying a cut line
over; a shorter or replaced file is read from its start (a rewrite past the old end is missed, as by `tail -f`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.serve.serverlog import find_fatal

CHUNK = 8 << 20  # bytes read at most at once: a first look at a large log does not hold it whole
MAX_CARRY = 1 << 20  # a "line" with no line break longer than this keeps only its end (progress bars redraw with \r)


@dataclass(frozen=True)
class Read:
    data: bytes
    start: int  # where data begins in the file: the offset asked for, or 0 for a truncated or replaced file
    inode: int | None


def read_new(path: Path, offset: int, inode: int | None, limit: int = CHUNK) -> Read:
    """Up to `limit` bytes of `path` from `offset` on; from 0 where the file is shorter than `offset` or is another
    file (inode) than last time. A missing file reads as nothing new."""
    try:
        with path.open("rb") as f:
            st = os.fstat(f.fileno())
            if st.st_size < offset or (inode is not None and st.st_ino != inode):
                offset = 0
            f.seek(offset)
            return Read(f.read(limit), offset, st.st_ino)
    except FileNotFoundError:
        return Read(b"", offset, inode)


def split_lines(carry: bytes, data: bytes) -> tuple[bytes, bytes]:
    """(complete lines, the unfinished last line) of carry + data, cut after the last \\n or \\r."""
    text = carry + data
    cut = max(text.rfind(b"\n"), text.rfind(b"\r")) + 1
    return text[:cut], text[cut:][-MAX_CARRY:]


class FatalWatch:
    """The first fatal line of a log from `offset` on (this launch's part), read incrementally, `chunk` bytes at a
    time at most. `read` is the seam the tests count bytes through."""

    def __init__(self, path: Path, offset: int = 0, read: Callable[[Path, int, int | None, int], Read] = read_new,
                 chunk: int = CHUNK):
        self.path, self.offset, self.read, self.chunk = path, offset, read, chunk
        self.inode: int | None = None
        self.carry = b""  # the last line read, not yet ended
        self.fatal: str | None = None

    def poll(self) -> str | None:
        """The first fatal line so far (it stays once found), or None. An unfinished last line counts too, as it
        did when the whole log was reread; it is read again in full once it ends."""
        while self.fatal is None:
            got = self.read(self.path, self.offset, self.inode, self.chunk)
            if got.start != self.offset:  # truncated or replaced: nothing carried over belongs to this file
                self.carry = b""
            self.offset, self.inode = got.start + len(got.data), got.inode
            complete, self.carry = split_lines(self.carry, got.data)
            self.fatal = find_fatal(complete.decode(errors="replace"))
            if len(got.data) < self.chunk:  # the end of the file for now
                break
        return self.fatal or find_fatal(self.carry.decode(errors="replace"))
