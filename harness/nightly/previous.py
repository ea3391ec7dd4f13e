"""The previous nightly build, whose artifacts are tonight's baseline: picked from Buildkite's REST build list.

`python -m harness.nightly.previous <current build number>` reads the list (JSON) on stdin and prints
"<build id> <build number>" of the newest finished scheduled build before the current one, or nothing.
"""

from __future__ import annotations

import json
import sys

FINISHED = {"passed", "failed"}  # a failed nightly still holds valid records; canceled/running ones may not


def previous_nightly(builds: list[dict], current: int) -> dict | None:
    """Newest build started by the schedule, finished, and older than `current` (pure)."""
    older = [b for b in builds if b.get("source") == "schedule" and b.get("state") in FINISHED
             and isinstance(b.get("number"), int) and b["number"] < current]
    return max(older, key=lambda b: b["number"], default=None)


def main(argv: list[str]) -> int:
    build = previous_nightly(json.load(sys.stdin), int(argv[0]))
    if build is not None:
        print(build["id"], build["number"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
