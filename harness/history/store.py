"""The history store: one SQLite file every run appends to (`$HARNESS_HISTORY`, default reports/history.sqlite).

SQLite because overlapping appenders wait on its file lock (why not DuckDB: docs/history.md). Versioned with
`PRAGMA user_version`; appending a run replaces its earlier rows in one transaction.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, fields
from pathlib import Path

from harness.config.errors import HarnessError
from harness.config.paths import REPORTS_DIR
from harness.history.extract import ArmRow, CoverageRow, MetricRow, RunRow, RunRows, VerdictRow

SCHEMA_VERSION = 3
LOCK_WAIT_S = 120.0  # a writer waits this long for another's append (each takes milliseconds)

SCHEMA_V1 = """
CREATE TABLE runs (run_key TEXT PRIMARY KEY, run_id TEXT NOT NULL, started TEXT, finished TEXT,
  status TEXT NOT NULL, exit_code INTEGER, host TEXT, harness_version TEXT, git_commit TEXT,
  candidates TEXT NOT NULL, order_seed INTEGER, calibration TEXT,
  run_dir TEXT NOT NULL, manifest TEXT NOT NULL, appended TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ')));
CREATE TABLE arms (run_key TEXT NOT NULL REFERENCES runs ON DELETE CASCADE, arm TEXT NOT NULL, role TEXT NOT NULL,
  reference TEXT, vllm_version TEXT, arm_sha TEXT, model TEXT, PRIMARY KEY (run_key, arm));
CREATE TABLE verdicts (run_key TEXT NOT NULL REFERENCES runs ON DELETE CASCADE, arm TEXT NOT NULL, kind TEXT NOT NULL,
  name TEXT NOT NULL, reference TEXT NOT NULL, passed INTEGER NOT NULL, detail TEXT NOT NULL,
  PRIMARY KEY (run_key, arm, kind, name, reference));
CREATE TABLE metrics (run_key TEXT NOT NULL REFERENCES runs ON DELETE CASCADE, arm TEXT NOT NULL, metric TEXT NOT NULL,
  value REAL NOT NULL, unit TEXT NOT NULL, PRIMARY KEY (run_key, arm, metric));
CREATE TABLE coverage (run_key TEXT NOT NULL REFERENCES runs ON DELETE CASCADE, arm TEXT NOT NULL,
  check_name TEXT NOT NULL, length INTEGER NOT NULL, batch INTEGER NOT NULL,
  PRIMARY KEY (run_key, arm, check_name, length, batch));
CREATE INDEX metrics_series ON metrics (arm, metric);
CREATE INDEX runs_by_id ON runs (run_id);
"""
# Version 2: which build each arm ran, and what judged each reference check (its calibration's line: "first
# calibration", "trusted by hand: REASON"); rows appended before it have neither (NULL).
SCHEMA_V2 = """
ALTER TABLE arms ADD COLUMN build_hash TEXT;
ALTER TABLE verdicts ADD COLUMN judged_by TEXT;
"""
# Version 3: coverage rows say how many generated tokens they compared and, for a pressure check, how many requests
# the server preempted (issue 46's dimensions); rows appended before it have neither (NULL).
SCHEMA_V3 = """
ALTER TABLE coverage ADD COLUMN generated INTEGER;
ALTER TABLE coverage ADD COLUMN preemptions INTEGER;
"""
MIGRATIONS = {1: SCHEMA_V1, 2: SCHEMA_V2, 3: SCHEMA_V3}  # user_version N-1 -> N; a new version adds its step here


class HistoryError(HarnessError):
    """The store cannot be opened, or a command names what it does not hold; nothing was created or deleted."""

    exit_code = 2


def history_path() -> Path:
    return Path(os.environ.get("HARNESS_HISTORY") or REPORTS_DIR / "history.sqlite")


def named(path: Path) -> str:
    """The store as the user named it: HARNESS_HISTORY=PATH when the variable set it."""
    return f"HARNESS_HISTORY={path}" if os.environ.get("HARNESS_HISTORY") and history_path() == path else str(path)


def check_store_path(path: Path, create: bool) -> None:
    """Refuses, before anything is made, a store the command cannot use: reading needs the file; writing makes one
    only in an existing directory (a missing one is a typo) or the harness's reports directory."""
    if path.is_file():
        return
    if path.exists():
        raise HistoryError(f"{named(path)}: not a file (a directory?); point HARNESS_HISTORY at a history store file")
    if not create:
        raise HistoryError(f"no history at {named(path)}: no such file; qualify appends every run to it, "
                           "`python -m harness history backfill` builds one from run directories, or point "
                           "HARNESS_HISTORY at an existing store")
    if path.parent.is_dir() or path.parent.resolve() == REPORTS_DIR.resolve():
        return
    ancestor = next(p for p in path.parents if p.exists())  # the root exists
    why = (f"{ancestor} is a file, not a directory" if not ancestor.is_dir()
           else f"directory {path.parent} does not exist")
    raise HistoryError(f"{named(path)}: {why}; nothing was created: make the directory first, or fix the path")


def migrate(db: sqlite3.Connection, path: Path) -> None:
    """Brings the file to SCHEMA_VERSION under the write lock (two processes opening a new store at once: the second
    finds it made), step by step; a newer file is refused."""
    def version() -> int:
        return db.execute("PRAGMA user_version").fetchone()[0]

    if version() == SCHEMA_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        found = version()
        if found > SCHEMA_VERSION:
            raise HistoryError(f"{path}: history schema version {found}, newer than this harness's {SCHEMA_VERSION}; "
                               "read it with the harness that wrote it, or point HARNESS_HISTORY at another file")
        for step in range(found + 1, SCHEMA_VERSION + 1):
            for statement in filter(str.strip, MIGRATIONS[step].split(";")):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {step}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


@contextmanager
def connect(path: Path | None = None, create: bool = False) -> Iterator[sqlite3.Connection]:
    """The store, migrated; `create`: a missing file is made (appending), else refused (every reading command)."""
    path = path or history_path()
    check_store_path(path, create)
    path.parent.mkdir(parents=True, exist_ok=True)  # only the reports directory can be missing here
    try:
        db = sqlite3.connect(path, timeout=LOCK_WAIT_S, isolation_level=None)
        db.execute("PRAGMA foreign_keys = ON")
        migrate(db, path)
    except sqlite3.DatabaseError as exc:
        raise HistoryError(f"{path}: not a history store this harness can open ({exc}); move it aside "
                           "(`harness history backfill` rebuilds one from the run directories)") from None
    try:
        yield db
    finally:
        db.close()


def insert(db: sqlite3.Connection, table: str, row: object, **extra: object) -> None:
    values = {**extra, **asdict(row)}  # type: ignore[call-overload]
    if table == "coverage":
        values["check_name"] = values.pop("check")
    if "passed" in values:
        values["passed"] = int(values["passed"])
    cols = ", ".join(values)
    db.execute(f"INSERT OR REPLACE INTO {table} ({cols}) VALUES ({', '.join('?' * len(values))})",
               list(values.values()))


def append(rows: RunRows, path: Path | None = None) -> None:
    """The run's rows, replacing any it had (one transaction: a reader sees the old run or the new one)."""
    with connect(path, create=True) as db:
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("DELETE FROM runs WHERE run_key = ?", (rows.run.run_key,))
            insert(db, "runs", rows.run)
            for table, items in (("arms", rows.arms), ("verdicts", rows.verdicts), ("metrics", rows.metrics),
                                 ("coverage", rows.coverage)):
                for item in items:
                    insert(db, table, item, run_key=rows.run.run_key)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise


def runs(db: sqlite3.Connection, arm: str | None = None) -> list[RunRow]:
    """Every run (or every run with `arm` among its arms), oldest first by start time."""
    names = [f.name for f in fields(RunRow)]
    where = "WHERE run_key IN (SELECT run_key FROM arms WHERE arm = ?)" if arm else ""
    sql = f"SELECT {', '.join(names)} FROM runs {where} ORDER BY started, appended"
    return [RunRow(*row) for row in db.execute(sql, (arm,) if arm else ())]


def arm_names(db: sqlite3.Connection) -> list[str]:
    return [r[0] for r in db.execute("SELECT DISTINCT arm FROM metrics ORDER BY arm")]


def metric_names(db: sqlite3.Connection, arm: str) -> list[str]:
    return [r[0] for r in db.execute("SELECT DISTINCT metric FROM metrics WHERE arm = ? ORDER BY metric", (arm,))]


def metric_values(db: sqlite3.Connection, arm: str, metric: str) -> dict[str, float]:
    """run key -> value of one arm's metric."""
    return dict(db.execute("SELECT run_key, value FROM metrics WHERE arm = ? AND metric = ?", (arm, metric)))


def run_key(db: sqlite3.Connection, run_id: str) -> str | None:
    """The newest stored run with this id (ids repeat where runs reuse a directory name); None if there is none."""
    row = db.execute("SELECT run_key FROM runs WHERE run_id = ? ORDER BY started DESC, appended DESC LIMIT 1",
                     (run_id,)).fetchone()
    return row[0] if row else None


def verdicts(db: sqlite3.Connection, key: str) -> list[VerdictRow]:
    sql = ("SELECT arm, kind, name, reference, passed, detail, judged_by FROM verdicts WHERE run_key = ? "
           "ORDER BY arm, kind, name")
    return [VerdictRow(a, k, n, ref, bool(p), d, j) for a, k, n, ref, p, d, j in db.execute(sql, (key,))]


def arms(db: sqlite3.Connection, key: str) -> list[ArmRow]:
    sql = ("SELECT arm, role, reference, vllm_version, arm_sha, model, build_hash FROM arms WHERE run_key = ? "
           "ORDER BY role, arm")
    return [ArmRow(*row) for row in db.execute(sql, (key,))]


def coverage(db: sqlite3.Connection, arm: str) -> list[tuple[str, CoverageRow]]:
    sql = ("SELECT run_key, arm, check_name, length, batch, generated, preemptions FROM coverage WHERE arm = ? "
           "ORDER BY check_name, length")
    return [(r, CoverageRow(a, c, n, b, g, p)) for r, a, c, n, b, g, p in db.execute(sql, (arm,))]


def metric_rows(db: sqlite3.Connection, key: str) -> list[MetricRow]:
    sql = "SELECT arm, metric, value, unit FROM metrics WHERE run_key = ? ORDER BY arm, metric"
    return [MetricRow(*row) for row in db.execute(sql, (key,))]


def prune(db: sqlite3.Connection, keep_last: int) -> int:
    """Deletes all but the newest `keep_last` (at least 1: emptying the store is deleting its file) runs; how many
    went."""
    if keep_last < 1:
        raise HistoryError(f"prune: keep {keep_last} runs: keep at least 1 (to drop every run, delete the store file)")
    keys = [r.run_key for r in runs(db)]
    doomed = keys[:max(0, len(keys) - keep_last)]
    db.execute("BEGIN IMMEDIATE")
    db.executemany("DELETE FROM runs WHERE run_key = ?", [(r,) for r in doomed])
    db.execute("COMMIT")
    return len(doomed)
