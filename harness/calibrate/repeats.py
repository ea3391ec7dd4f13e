"""Reading what one calibration repeat measured (I/O): per check, its record and its per-request comparisons, each from
the check's own comparisons file (long_context's bursts are a check of their own, long_context_bursts: their spread is
measured apart from the one-at-a-time requests', never mixed into it).

A repeat is only usable when every check ran to its end: an aborted check (a dead server, a failed request) measured
part of the spread, and a calibration made of it would judge later runs by what it did not see.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness.config.errors import ConfigError
from harness.judge.degeneration import repetition
from harness.records.jsonl import read_jsonl
from harness.records.manifest import load_manifest
from harness.records.paths import resolve_path
from harness.records.results import read_results
from harness.records.schema import ReferenceCheckRecord, RequestComparison, comparison_model


@dataclass(frozen=True)
class CheckRepeat:
    record: ReferenceCheckRecord
    comparisons: list[RequestComparison]
    repetition_deltas: list[tuple[float, float]]  # per diverged request: (span fraction up, distinct-2 down)


def read_repeat(run_dir: Path, arm: str, read: list | None = None) -> dict[str, CheckRepeat]:
    """check -> what this repeat measured for it; a ConfigError naming the run and check when one is unusable.
    `read`: the run's records as calibrate read them once (trust.read_run); None: read results.jsonl here."""
    read = read_results(run_dir / "results.jsonl")[0] if read is None else read
    records = [r for r in read if isinstance(r, ReferenceCheckRecord) and r.arm == arm and r.floor_path]
    if not records:
        raise ConfigError(f"calibrate: {run_dir} recorded no reference check of {arm} (see its harness.log and "
                          "junit.xml): nothing to calibrate from")
    latest = {r.check: r for r in records}  # a resumed check's last record
    out = {}
    for check, rec in latest.items():
        if rec.status != "complete":
            raise ConfigError(f"calibrate: {check} in {run_dir.name} stopped early ({rec.reason or 'aborted'}); a "
                              "calibration needs every repeat complete: fix the cause and calibrate again")
        path = resolve_path(run_dir, rec.comparisons_path)
        if path is None:
            raise ConfigError(f"calibrate: the {check} comparisons of {run_dir.name} ({rec.comparisons_path}) are "
                              "missing")
        rows, _ = read_jsonl(path)
        comparisons = [comparison_model(check).model_validate(row) for row in rows]
        out[check] = CheckRepeat(rec, comparisons, repetition_deltas(path.with_name(
            path.name.replace("_comparisons.jsonl", "_diverged_outputs.jsonl"))))
    return out


def repetition_deltas(path: Path) -> list[tuple[float, float]]:
    """(candidate minus reference longest-repeated-span fraction, reference minus candidate distinct-2) for every
    request a clean repeat diverged on (graph_replay keeps both sides' tokens): the degeneration detector's measures,
    as clean noise moves them."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        c, r = repetition(row["candidate"]), repetition(row["reference"])
        out.append((c.span_fraction - r.span_fraction, r.distinct_2 - c.distinct_2))
    return out


def repeat_variants(run_dirs: list[Path]) -> list[str | None]:
    """Each repeat's variant as its run.json recorded it (harness/config/variants.py); None: recorded before variants,
    or no calibration repeat (a run given to --from-runs that calibrate did not make)."""
    out = []
    for d in run_dirs:
        manifest, _ = load_manifest(d)
        out.append(manifest.calibration.variant if manifest and manifest.calibration else None)
    return out


def variants_line(run_dirs: list[Path]) -> str:
    """'repeats by variant: r1 as_configured, r2 graph_mode, r3 chunk_size (3 variants)': which executions the
    calibration's spread spans, for calibrate's output and table."""
    variants = repeat_variants(run_dirs)
    named = [v or "as_configured (not recorded)" for v in variants]
    spans = len({v or "as_configured" for v in variants})
    return ("repeats by variant: " + ", ".join(f"r{k} {v}" for k, v in enumerate(named, 1))
            + f" ({spans} variant{'s' if spans != 1 else ''})")
