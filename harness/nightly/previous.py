"""The previous nightly build, whose artifacts are tonight's baseline: picked from Buildkite's REST build list.

`python -m harness.nightly.previous [--all] <current build number>` reads the list on stdin and prints "<build id>
<build number>" of the newest finished scheduled build before it; --all: up to CANDIDATES, newest first (a night
whose fetch failed uploaded no history store).
"""

from __future__ import annotations

import json
import sys

FINISHED = {"passed", "failed"}  # a failed nightly still holds valid records; canceled/running ones may not
CANDIDATES = 10  # builds tried for the history store: ten failed nights in a row want a person, not a longer search


def previous_nightlies(builds: list[dict], current: int) -> list[dict]:
    """Builds started by the schedule, finished, and older than `current`, newest first (pure)."""
    older = [b for b in builds if b.get("source") == "schedule" and b.get("state") in FINISHED
             and isinstance(b.get("number"), int) and b["number"] < current]
    return sorted(older, key=lambda b: b["number"], reverse=True)


def previous_nightly(builds: list[dict], current: int) -> dict | None:
    """Newest build started by the schedule, finished, and older than `current` (pure)."""
    return next(iter(previous_nightlies(builds, current)), None)


def main(argv: list[str]) -> int:
    every = argv[:1] == ["--all"]
    builds = previous_nightlies(json.load(sys.stdin), int(argv[-1]))
    for build in builds[:CANDIDATES if every else 1]:
        print(build["id"], build["number"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
