"""One run directory -> the rows the history keeps of it (pure given the records): the run, its arms, each verdict,
each metric, the lengths and batch sizes its checks covered. Reads results.jsonl and run.json through harness.records
(each test's latest attempt only, as the report does)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.records.attempts import current_records
from harness.records.manifest import RunManifest, interruption, load_manifest
from harness.records.meaning import meaning, of_kind
from harness.records.results import read_results
from harness.records.schema import Record, ServerRecord


@dataclass(frozen=True)
class RunRow:
    run_key: str  # the store's key: run id @ start time (two runs may share an id, e.g. `--run-dir /tmp/run` twice)
    run_id: str
    started: str | None
    finished: str | None
    status: str  # finished | interrupted
    exit_code: int | None
    host: str | None
    harness_version: str | None
    git_commit: str | None
    candidates: str  # comma-separated
    order_seed: int | None
    calibration: str | None  # "<id>:<k>/<n>" for a calibration repeat
    run_dir: str
    manifest: str  # run.json as read (JSON), "" when it was missing


@dataclass(frozen=True)
class ArmRow:
    arm: str
    role: str  # candidate | reference
    reference: str | None
    vllm_version: str | None
    arm_sha: str | None  # sha256 of the arm's resolved fields as run.json recorded them
    model: str | None
    build_hash: str | None = None  # the vLLM build its server imported (run.json builds; harness/plan/build.py)


@dataclass(frozen=True)
class VerdictRow:
    arm: str
    kind: str  # gate | check | test
    name: str
    reference: str
    passed: bool
    detail: str
    # what judged a reference check: its calibration's line, with "first calibration" and "trusted by hand: REASON"
    judged_by: str | None = None


@dataclass(frozen=True)
class MetricRow:
    arm: str
    metric: str
    value: float
    unit: str


@dataclass(frozen=True)
class CoverageRow:
    arm: str
    check: str
    length: int  # context tokens checked
    batch: int  # requests decoding together (1: one at a time)
    generated: int | None = None  # generated tokens compared (None: rows of records that did not say)
    preemptions: int | None = None  # the server's preemptions over the check (kv_pressure), where it counted them


@dataclass
class RunRows:
    run: RunRow
    arms: list[ArmRow] = field(default_factory=list)
    verdicts: list[VerdictRow] = field(default_factory=list)
    metrics: list[MetricRow] = field(default_factory=list)
    coverage: list[CoverageRow] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def run_rows(run_dir: Path) -> RunRows:
    manifest, problems = load_manifest(run_dir)
    records, read_problems = read_results(run_dir / "results.jsonl")
    rows = rows_of(run_dir, manifest, current_records(records))
    rows.problems = problems + read_problems
    return rows


def rows_of(run_dir: Path, manifest: RunManifest | None, records: list[Record]) -> RunRows:
    m = manifest or RunManifest(run_id=run_dir.name)
    candidates = [p.candidate for p in m.pairs] or list(dict.fromkeys(r.arm for r in records))[:1]
    cal = m.calibration
    run_id = m.run_id or run_dir.name
    run = RunRow(run_key=f"{run_id}@{m.started or run_dir.resolve()}", run_id=run_id, started=m.started,
                 finished=m.finished,
                 status="interrupted" if interruption(manifest) or manifest is None else "finished",
                 exit_code=m.exit_code, host=m.host, harness_version=m.harness_version, git_commit=m.git_commit,
                 candidates=",".join(candidates), order_seed=m.order_seed,
                 calibration=f"{cal.id}:{cal.repeat}/{cal.of}" if cal else None, run_dir=str(run_dir.resolve()),
                 manifest=m.to_json() if manifest else "")
    return RunRows(run, arms_of(m, records), verdicts_of(records), metrics_of(records), coverage_of(records))


def arms_of(m: RunManifest, records: list[Record]) -> list[ArmRow]:
    versions = {r.arm: r.vllm_version for r in of_kind(records, ServerRecord) if r.vllm_version}
    builds = {name: b.build_hash for name, b in (m.builds or {}).items()}
    refs = {p.candidate: p.reference for p in m.pairs}
    out = []
    for name, fields in (m.arms or {}).items():
        sha = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
        model = fields.get("model")
        model = model.get("path") or model.get("name") if isinstance(model, dict) else model
        out.append(ArmRow(name, "candidate" if name in refs else "reference", refs.get(name), versions.get(name),
                          sha, str(model) if model else None, builds.get(name)))
    return out


def verdicts_of(records: list[Record]) -> list[VerdictRow]:
    out = [VerdictRow(v.arm, v.kind, v.name, v.reference, v.passed, v.detail, v.judged_by)
           for r in records for v in meaning(r).verdicts(r)]
    # one row per key: a record written twice (a retried gate) keeps its last verdict
    return list({(v.arm, v.kind, v.name, v.reference): v for v in out}.values())


def metrics_of(records: list[Record]) -> list[MetricRow]:
    """Each record's values of the metrics its kind declares (harness/records/meaning.py); a later record of the same
    arm and metric replaces an earlier one."""
    out = [MetricRow(m.arm, m.name, m.value, m.unit) for r in records for m in meaning(r).measured(r)]
    return list({(m.arm, m.metric): m for m in out}.values())


def coverage_of(records: list[Record]) -> list[CoverageRow]:
    """The context lengths each output check compared, with its batch size, as each record kind declares it."""
    out = {CoverageRow(c.arm, c.check, c.length, c.batch, c.generated, c.preemptions)
           for r in records for c in meaning(r).coverage(r)}
    return sorted(out, key=lambda c: (c.arm, c.check, c.length, c.batch))


def coverage_lines(rows: list[tuple[str, CoverageRow]]) -> list[str]:
    """Per arm and check over the stored runs (pure): distinct lengths, their range, runs and batch sizes; and where
    the rows say so the most generated tokens compared and the preemptions proved."""
    by_check: dict[tuple[str, str], list] = {}
    for run, c in rows:
        by_check.setdefault((c.arm, c.check), []).append((run, c))
    out = []
    for (arm, check), items in sorted(by_check.items()):
        lengths = sorted({c.length for _, c in items})
        batches = ", ".join(str(b) for b in sorted({c.batch for _, c in items}))
        line = (f"{arm} {check}: {len(lengths)} distinct lengths, {lengths[0]:,}..{lengths[-1]:,} tokens, over "
                f"{len({r for r, _ in items})} runs; batch sizes {batches}")
        generated = [c.generated for _, c in items if c.generated is not None]
        if generated:
            line += f"; up to {max(generated):,} generated tokens"
        preempted = {r: c.preemptions for r, c in items if c.preemptions is not None}
        if preempted:
            line += f"; {sum(preempted.values()):,} preemptions over {len(preempted)} runs"
        out.append(line)
    return out
