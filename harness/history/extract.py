"""One run directory -> the rows the history keeps of it (pure given the records): the run, its arms, each verdict,
each metric, the lengths and batch sizes its checks covered. Reads results.jsonl and run.json through harness.records
(each test's latest attempt only, as the report does)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.config.suites import BY_NAME
from harness.records.attempts import current_records
from harness.records.manifest import RunManifest, interruption, load_manifest
from harness.records.results import read_results
from harness.records.schema import (
    CapacityRecord,
    GateRecord,
    Gsm8kRecord,
    KvCapacityRecord,
    LongContextRecord,
    LongPrefixRecord,
    MetricRecord,
    OutcomeRecord,
    Record,
    ReferenceCheckRecord,
    RulerRecord,
    ServerRecord,
)


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
    versions = {r.arm: r.vllm_version for r in records if isinstance(r, ServerRecord) and r.vllm_version}
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
    out = []
    for r in records:
        if isinstance(r, GateRecord):
            out.append(VerdictRow(r.arm, "gate", r.gate, r.reference, r.passed, r.detail))
        elif isinstance(r, ReferenceCheckRecord):
            out.append(VerdictRow(r.arm, "check", r.check, r.reference, r.passed, r.detail, r.judged_by))
        elif isinstance(r, LongContextRecord):
            out.append(VerdictRow(r.arm, "check", "long_context", r.reference, r.passed, "; ".join(r.failures)))
        elif isinstance(r, OutcomeRecord):
            out.append(VerdictRow(r.arm, "test", r.suite, "", r.outcome in ("passed", "skipped"),
                                  r.outcome + (f": {r.message[:300]}" if r.message else "")))
    # one row per key: a record written twice (a retried gate) keeps its last verdict
    return list({(v.arm, v.kind, v.name, v.reference): v for v in out}.values())


def metrics_of(records: list[Record]) -> list[MetricRow]:
    out: list[MetricRow] = []

    def put(arm: str, metric: str, value: float | None, unit: str) -> None:
        if value is not None:
            out.append(MetricRow(arm, metric, float(value), unit))

    for r in records:
        if isinstance(r, LongPrefixRecord) and r.status == "complete" and not r.failed:
            level = f"long_prefix.c{r.concurrency}"
            # A buffered level's TPOT and ITL time the delivery and its TTFT is the E2E: none is trended (an old
            # record keeps those figures; its per-request TPOTs mark it, schema.LongPrefixRecord).
            timed = () if r.timing_invalid else (("tpot", r.tpot), ("ttft", r.ttft), ("itl", r.itl))
            for name, summary in timed:
                for q in ("p50", "p90", "p99"):
                    value = getattr(summary, q)
                    put(r.arm, f"{level}.{name}_{q}_ms", value * 1e3 if value is not None else None, "ms")
            put(r.arm, f"{level}.kv_usage_peak", r.kv_usage.peak if r.kv_usage else None, "fraction")
        elif isinstance(r, KvCapacityRecord):
            put(r.arm, "kv_capacity.tokens", r.tokens, "tokens")
        elif isinstance(r, CapacityRecord) and r.status == "complete":
            put(r.arm, f"capacity.c{r.concurrency}.output_tokens_per_s", r.output_tokens_per_s, "tokens/s")
        elif isinstance(r, Gsm8kRecord) and r.status == "complete" and r.n:
            score = r.scores.get("strict-match") or next(iter(r.scores.values()), None)
            put(r.arm, "gsm8k.accuracy", score.correct / r.n if score else None, "fraction")
        elif isinstance(r, RulerRecord) and r.status == "complete" and r.n:
            put(r.arm, "ruler.accuracy", sum(c.correct for c in r.cells) / r.n, "fraction")
        elif isinstance(r, ReferenceCheckRecord) and r.status == "complete" and r.requests:
            put(r.arm, f"check.{r.check}.max_drift", r.max_drift, "nats")
            put(r.arm, f"check.{r.check}.exact_rate", r.exact_matches / r.requests, "fraction")
            put(r.arm, f"check.{r.check}.tie_flip_rate", r.tie_flips / r.requests, "fraction")
        elif isinstance(r, LongContextRecord) and r.status == "complete" and r.cells:
            drifts = [d for c in r.cells for d in (c.max_drift, c.forced_max_drift) if d is not None]
            put(r.arm, "check.long_context.max_drift", max(drifts) if drifts else None, "nats")
            put(r.arm, "check.long_context.exact_rate", sum(c.exact for c in r.cells) / len(r.cells), "fraction")
            put(r.arm, "check.long_context.tie_flip_rate", sum(c.tie_flip for c in r.cells) / len(r.cells),
                "fraction")
        elif isinstance(r, MetricRecord) and not r.failed:  # a catalogue timing suite's samples (config/suites.py)
            put(r.arm, f"{r.suite}.{r.metric}_p50", r.median, r.unit)
    return list({(m.arm, m.metric): m for m in out}.values())


GRID_CHECKS = BY_NAME["long_context"].checks  # long_context's reference checks: its grid record's cells cover them


def coverage_of(records: list[Record]) -> list[CoverageRow]:
    """The context lengths each output check compared, at the batch size it sent them in: long_context's cells
    (one at a time, and in its bursts); output_coverage's every compared output, with its generated tokens (and
    kv_pressure's preemptions); another reference check's longest compared context (its own records keep no
    per-request batch); the timed levels' longest context at their concurrency."""
    out = set()
    for r in records:
        if isinstance(r, LongContextRecord):
            out |= {CoverageRow(r.arm, "long_context", c.context_tokens or c.length, c.batch) for c in r.cells}
        elif isinstance(r, ReferenceCheckRecord) and r.covered:  # output_coverage: every compared output
            pre = int(r.preemptions_proven) if r.preemptions_proven is not None else None
            out |= {CoverageRow(r.arm, r.check, c.prompt_tokens + c.generated, c.batch, c.generated, pre)
                    for c in r.covered}
        elif isinstance(r, ReferenceCheckRecord) and r.checked_to_tokens and r.check not in GRID_CHECKS:
            out.add(CoverageRow(r.arm, r.check, r.checked_to_tokens, 1,  # the grid's checks: its cells say it
                                r.checked_generated_tokens))
        elif isinstance(r, LongPrefixRecord) and r.timed_to_tokens:
            out.add(CoverageRow(r.arm, "long_prefix", r.timed_to_tokens, r.concurrency))
    return sorted(out, key=lambda c: (c.arm, c.check, c.length, c.batch))


def coverage_lines(rows: list[tuple[str, CoverageRow]]) -> list[str]:
    """Per arm and check over the stored runs (pure): 'cpu-smoke long_context: 57 distinct lengths, 512..4,024
    tokens, over 12 runs; batch sizes 1, 2, 3', and where the rows say so (output_coverage, issue 46) the most
    generated tokens compared and the preemptions the runs proved."""
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
