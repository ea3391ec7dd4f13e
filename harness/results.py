"""The one result schema: typed records that suites append to reports/<run-id>/results.jsonl.

Versioned: every line carries `schema_version`; the reader refuses versions it does
not know, reports a truncated last line (a crashed run) and unknown record kinds
precisely, and returns every record it could read.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

SCHEMA_VERSION = 1


class RecordBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    run_id: str
    arm: str
    suite: str
    time: float = Field(default_factory=time.time)


class ServerRecord(RecordBase):
    """One per arm launch: up (with what it reported) or failed (with why)."""

    kind: Literal["server"] = "server"
    status: Literal["up", "failed"]
    reason: str | None = None
    base_url: str | None = None
    startup_s: float | None = None
    vllm_version: str | None = None
    backends: list[str] = []
    expected_backend: str | None = None
    argv: list[str] = []  # redacted
    env: dict[str, str] = {}  # redacted; only what the harness sets
    log_path: str | None = None


class KvCapacityRecord(RecordBase):
    kind: Literal["kv_capacity"] = "kv_capacity"
    device: str
    tokens: int  # as logged; under DCP already multiplied by the CP world size
    gib_per_worker: float | None
    tp: int
    dcp: int
    source_line: str
    metrics_tokens: int | None = None  # vllm:cache_config_info kv_cache_size_tokens, the same figure via /metrics
    num_blocks: int | None = None  # vllm:cache_config_info num_gpu_blocks
    block_size: int | None = None


class OutcomeRecord(RecordBase):
    """One per test (suite x arm): the verdict and the failure text, for tables and JUnit."""

    kind: Literal["outcome"] = "outcome"
    test: str
    outcome: Literal["passed", "failed", "skipped", "error"]
    message: str = ""
    duration_s: float = 0.0


Record = Annotated[ServerRecord | KvCapacityRecord | OutcomeRecord, Field(discriminator="kind")]
RECORD_ADAPTER: TypeAdapter = TypeAdapter(Record)
KNOWN_KINDS = {"server", "kv_capacity", "outcome"}


class ResultsWriter:
    """Appends one JSON line per record and syncs it, so a crash loses nothing written."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, record: BaseModel) -> None:
        line = record.model_dump_json() + "\n"
        with self.path.open("a") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())


def parse_line(text: str, lineno: int, path: Path, is_last: bool) -> tuple[Record | None, str | None]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "truncated last line (the run was interrupted)" if is_last else f"not JSON ({exc.msg})"
        return None, f"{path}:{lineno}: {what}; skipped"
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        return None, (f"{path}:{lineno}: schema_version {version!r}, this harness reads {SCHEMA_VERSION}; "
                      "re-render with the harness version that wrote it")
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
    lines = path.read_text().splitlines()
    records, problems = [], []
    for i, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        record, problem = parse_line(text, i, path, is_last=(i == len(lines)))
        if record is not None:
            records.append(record)
        if problem:
            problems.append(problem)
    return records, problems
