"""Reading a finished run directory: results, run.json and the raw files its records reference.

Works on a copy on another machine: a recorded absolute path that does not exist is looked up relative to the
run directory. Whatever cannot be read becomes a message naming the file, never a crash or a silent gap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness.judge.baseline import read_per_question
from harness.report.provenance import read_run_info
from harness.records.schema import Gsm8kRecord, LongPrefixRecord, Record, read_results
from harness.measure.telemetry import read_series


@dataclass
class RunData:
    run_dir: Path
    info: dict
    records: list[Record]
    problems: list[str]  # the reader's messages and every referenced file that could not be read

    @property
    def arm_order(self) -> list[str]:
        """run.json's arms (candidate first), then any other arm with a measurement. An arm that only has a server
        record (an eager variant launched to capture outputs) gets no table rows of its own."""
        order = list(self.info.get("arms", {}))
        measured = dict.fromkeys(r.arm for r in self.records if r.kind != "server")
        return order + [a for a in measured if a not in order]


def load_run(run_dir: Path) -> RunData:
    info, info_problems = read_run_info(run_dir)
    records, problems = read_results(run_dir / "results.jsonl")
    return RunData(run_dir, info, records, info_problems + problems)


def resolve_path(run_dir: Path, recorded: str | None) -> Path | None:
    """The recorded path if it exists; else the same path relative to this run directory (a copied run)."""
    if not recorded:
        return None
    path = Path(recorded)
    if path.exists():
        return path
    parts = path.parts
    if run_dir.name in parts:  # /old/host/reports/<run-id>/<arm>/x.jsonl -> <run_dir>/<arm>/x.jsonl
        i = len(parts) - 1 - parts[::-1].index(run_dir.name)
        moved = run_dir.joinpath(*parts[i + 1:])
        if moved.exists():
            return moved
    for depth in (2, 1):  # a run renamed when copied: <arm>/x.jsonl or x.jsonl under the new run directory
        moved = run_dir.joinpath(*parts[-depth:])
        if path.is_absolute() and len(parts) > depth and moved.exists():
            return moved
    relative = run_dir / path if not path.is_absolute() else None
    return relative if relative is not None and relative.exists() else None


def missing(run: RunData, what: str, recorded: str | None) -> str:
    return f"{what}: file {recorded!r} not found (nor under {run.run_dir}); left out of the report"


def tpot_samples(run: RunData) -> tuple[dict[tuple[str, int], list[float]], list[str]]:
    """Per (arm, concurrency): TPOT in ms of every successful request, from the level's samples file."""
    out, problems = {}, []
    for r in (r for r in run.records if isinstance(r, LongPrefixRecord)):
        path = resolve_path(run.run_dir, r.samples_path)
        if path is None:
            problems.append(missing(run, f"TPOT samples of {r.arm} c{r.concurrency}", r.samples_path))
            continue
        values = []
        for line in path.read_text().splitlines():
            try:
                s = json.loads(line)
            except json.JSONDecodeError:
                problems.append(f"{path}: a line is not JSON (truncated?); skipped")
                continue
            if not s.get("error") and s.get("tpot_s") is not None:
                values.append(s["tpot_s"] * 1e3)
        out[(r.arm, r.concurrency)] = values
    return out, problems


def kv_series(run: RunData) -> tuple[dict[tuple[str, int], list[tuple[float, float]]], list[str]]:
    out, problems = {}, []
    for r in (r for r in run.records if isinstance(r, LongPrefixRecord)):
        if r.telemetry_path is None:
            problems.append(f"KV-usage timeline of {r.arm} c{r.concurrency}: no telemetry file recorded "
                            "(written by harness versions that persist the /metrics series)")
            continue
        path = resolve_path(run.run_dir, r.telemetry_path)
        if path is None:
            problems.append(missing(run, f"KV-usage timeline of {r.arm} c{r.concurrency}", r.telemetry_path))
            continue
        out[(r.arm, r.concurrency)] = read_series(path, "metrics", "kv_usage")
    return out, problems


def per_question(run: RunData, side: str, flt: str) -> tuple[dict[tuple[str, str], dict[int, bool] | None], list]:
    """(side, arm) -> doc id -> correct from each GSM8K record's sample log; None where the log is missing."""
    out, problems = {}, []
    for r in (r for r in run.records if isinstance(r, Gsm8kRecord)):
        path = resolve_path(run.run_dir, r.samples_path)
        if path is None:
            problems.append(missing(run, f"GSM8K per-sample log of {r.arm} ({side})", r.samples_path)
                            + "; accuracy compared unpaired")
        out[(side, r.arm)] = read_per_question(path, flt) if path else None
    return out, problems
