"""results.jsonl: the writer suites append records with, and the reader the report and the gates use.

The reader brings older records up to the current schema (records.migrations; none is older yet), refuses versions
it does not know, reports a truncated last line (a crashed run) and unknown record kinds precisely, and returns every
record it could read.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ValidationError

from harness.config.errors import ConfigError
from harness.config.paths import REPORTS_DIR
from harness.records.jsonl import append_line, numbered_rows
from harness.records.migrations import FormatError, StoredFormat, upgrade
from harness.records.schema import KNOWN_KINDS, RECORD_ADAPTER, SCHEMA_VERSION, Record


class ResultsWriter:
    """Appends one JSON line per record and syncs it, so a crash loses nothing written; every record is stamped
    with the run's attempt (0, or the number of the resume)."""

    def __init__(self, path: Path, attempt: int = 0):
        self.path = path  # the run directory appears with the first record, not before
        self.attempt = attempt

    def append(self, record: BaseModel) -> None:
        if self.attempt:
            record = record.model_copy(update={"attempt": self.attempt})
        append_line(self.path, record.model_dump_json(), sync=True)


RESULT_RECORD = StoredFormat("results.jsonl record", "schema_version", SCHEMA_VERSION,
                             remedy="re-render with the harness version that wrote it")


def parse_record(data: object, lineno: int, path: Path) -> tuple[Record | None, str | None]:
    if not isinstance(data, dict):
        return None, f"{path}:{lineno}: not a JSON object; skipped"
    try:
        data = upgrade(data, RESULT_RECORD)
    except FormatError as exc:
        return None, f"{path}:{lineno}: {exc}"
    if data.get("kind") not in KNOWN_KINDS:
        return None, f"{path}:{lineno}: unknown record kind {data.get('kind')!r}; skipped"
    try:
        return RECORD_ADAPTER.validate_python(data), None
    except ValidationError as exc:
        return None, f"{path}:{lineno}: invalid {data['kind']} record: {exc.errors()[0]['msg']}"


def read_results(path: Path) -> tuple[list[Record], list[str]]:
    """Every readable record, and one problem message per line that was not."""
    if not path.is_file():
        return [], [f"{path}: no results file (the run wrote no record)"]
    rows, problems = numbered_rows(path)
    records = []
    for lineno, data in rows:
        record, problem = parse_record(data, lineno, path)
        if record is not None:
            records.append(record)
        if problem:
            problems.append((lineno, problem))
    return records, [p for _, p in sorted(problems)]


def locate_results(arg: str) -> Path:
    """A run directory, a results file, or a run id under reports/."""
    for candidate in (Path(arg), REPORTS_DIR / arg):
        if candidate.is_dir() and (candidate / "results.jsonl").is_file():
            return candidate / "results.jsonl"
        if candidate.is_file():
            return candidate
    raise ConfigError(f"baseline {arg!r}: no results.jsonl there (nor in {REPORTS_DIR / arg}); "
                      "pass a run directory or its results.jsonl")
