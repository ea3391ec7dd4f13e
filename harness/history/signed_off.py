"""Which runs signed an arm's build off: the history's finished, passed runs with the arm as a candidate (no
calibration repeat), newest first. Whether a run also stored its outputs is for the caller to check in its directory."""

from __future__ import annotations

import sqlite3
from pathlib import Path

SIGNED_OFF = """SELECT r.run_dir FROM runs r JOIN arms a ON a.run_key = r.run_key
WHERE a.arm = ? AND a.role = 'candidate' AND r.status = 'finished' AND r.exit_code = 0 AND r.calibration IS NULL
ORDER BY r.finished DESC, r.appended DESC"""


def passed_runs_of(db: sqlite3.Connection, arm: str) -> list[Path]:
    """Run directories of the passed runs of `arm` as candidate, newest first (a run appended twice: once)."""
    return list(dict.fromkeys(Path(row[0]) for row in db.execute(SIGNED_OFF, (arm,))))
