"""What each record kind means, declared once (`MEANINGS`, by `kind`): its history metrics, verdicts, coverage, why it
did not finish and the report table that renders it; readers use these instead of branching on record classes."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, TypeVar

from harness.config.suites import BY_NAME, SUITES
from harness.records.schema import (
    CapacityRecord,
    ColdStartRecord,
    DcpOpsRecord,
    DegenerationRecord,
    GateRecord,
    Gsm8kRecord,
    KvCapacityRecord,
    LongContextRecord,
    LongPrefixRecord,
    MetricRecord,
    OutcomeRecord,
    Record,
    RecordBase,
    ReferenceCheckRecord,
    RulerRecord,
    ServerRecord,
    SpecDecodeRecord,
)

R = TypeVar("R", bound=RecordBase)


@dataclass(frozen=True)
class Metric:
    """One history metric: `name` a template over the record's fields, `gate` the gate enforcing it (None: trended
    only), `scale` the nightly gate's (auto: log where positive), `key` a trend-page panel."""

    name: str
    unit: str | None  # None: the record says (MetricRecord.unit)
    better: Literal["lower", "higher"]
    family: Literal["speed", "correctness", "capacity"]
    gate: str | None = None
    scale: Literal["auto", "rate", "drift", "linear"] = "auto"
    key: bool = False

    @property
    def gated(self) -> bool:
        return self.gate is not None

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"

    def named(self, **fields: Any) -> str:
        return self.name.format(**fields)

    @property
    def pattern(self) -> re.Pattern:
        """The names this template stands for: each {field} one dot-free part."""
        parts = re.split(r"\{\w+\}", self.name)
        return re.compile("[^.]+".join(re.escape(p) for p in parts))


@dataclass(frozen=True)
class Measured:
    """A record's value of one of its kind's metrics."""

    arm: str
    metric: Metric
    name: str  # the template filled in: "long_prefix.c4.tpot_p50_ms"
    value: float
    unit: str


@dataclass(frozen=True)
class Verdict:
    """A pass or fail a record stands for: a gate, a reference check, a test."""

    arm: str
    kind: Literal["gate", "check", "test"]
    name: str
    reference: str
    passed: bool
    detail: str
    judged_by: str | None = None  # a reference check's calibration line


@dataclass(frozen=True)
class Covered:
    """A context length an output check compared (or a timed level reached), at the batch size it ran in."""

    arm: str
    check: str
    length: int
    batch: int
    generated: int | None = None
    preemptions: int | None = None


@dataclass(frozen=True)
class Unfinished:
    """Why a record's part of the run did not finish: '<where>: <what><first line of text>'."""

    where: str
    what: str
    text: str | None


def nothing(_: Any) -> list:
    return []


@dataclass(frozen=True)
class Meaning:
    """One record kind's declaration. `table`: the title of the report table that renders it (report/tables.py
    build_tables)."""

    model: type[RecordBase]
    table: str
    metrics: tuple[Metric, ...] = ()
    measured: Callable[[Any], list[Measured]] = nothing  # the record's values of `metrics`
    verdicts: Callable[[Any], list[Verdict]] = nothing
    coverage: Callable[[Any], list[Covered]] = nothing
    unfinished: Callable[[Any], list[Unfinished]] = nothing

    @property
    def kind(self) -> str:
        return kind_of(self.model)


def kind_of(model: type[RecordBase]) -> str:
    return model.model_fields["kind"].default


def of_kind(records: Iterable[Record], model: type[R]) -> list[R]:
    """The records of one kind, in order: the one way a reader selects them (the `kind` discriminator)."""
    kind = kind_of(model)
    return [r for r in records if r.kind == kind]


def measured(r: Record, metric: Metric, value: float | None, unit: str | None = None, /,
             **fields: Any) -> list[Measured]:
    # positional-only: a catalogue record's name fields include `metric` itself (metric_measured)
    return [] if value is None else [Measured(r.arm, metric, metric.named(**fields), float(value),
                                 unit if unit is not None else metric.unit)]


# -- long_prefix: each level's timing percentiles (ms) and its KV-cache use peak
def timing(name: str, q: str) -> Metric:
    tpot_p50 = (name, q) == ("tpot", "p50")
    return Metric(f"long_prefix.c{{concurrency}}.{name}_{q}_ms", "ms", "lower", "speed",
                  gate=BY_NAME["long_prefix"].gate if tpot_p50 else None, key=q == "p50" and name in ("tpot", "ttft"))


LONG_PREFIX_TIMING = {(name, q): timing(name, q) for name in ("tpot", "ttft", "itl") for q in ("p50", "p90", "p99")}
KV_USAGE_PEAK = Metric("long_prefix.c{concurrency}.kv_usage_peak", "fraction", "lower", "capacity")


def long_prefix_measured(r: LongPrefixRecord) -> list[Measured]:
    if r.status != "complete" or r.failed:
        return []
    # A buffered level's TPOT and ITL time the delivery and its TTFT is the E2E: none is trended (an old record keeps
    # those figures; its per-request TPOTs mark it, schema.LongPrefixRecord).
    timed = () if r.timing_invalid else (("tpot", r.tpot), ("ttft", r.ttft), ("itl", r.itl))
    out = []
    for name, summary in timed:
        for q in ("p50", "p90", "p99"):
            value = getattr(summary, q)
            out += measured(r, LONG_PREFIX_TIMING[name, q], value * 1e3 if value is not None else None,
                            concurrency=r.concurrency)
    return out + measured(r, KV_USAGE_PEAK, r.kv_usage.peak if r.kv_usage else None, concurrency=r.concurrency)


def long_prefix_unfinished(r: LongPrefixRecord) -> list[Unfinished]:
    where = f"long_prefix x {r.arm} c{r.concurrency}"
    out = []
    if r.metrics_scrape_errors:
        out.append(Unfinished(where, f"{r.metrics_scrape_errors} /metrics scrape(s) failed during the workload: "
                              "KV-cache use is summarised from the rest", None))
    if r.status == "aborted":
        out.append(Unfinished(where, f"aborted after {r.requests} request(s): ", r.reason))
    return out


def long_prefix_coverage(r: LongPrefixRecord) -> list[Covered]:
    return [Covered(r.arm, "long_prefix", r.timed_to_tokens, r.concurrency)] if r.timed_to_tokens else []


# -- the other measured kinds
KV_TOKENS = Metric("kv_capacity.tokens", "tokens", "higher", "capacity", key=True)
THROUGHPUT = Metric("capacity.c{concurrency}.output_tokens_per_s", "tokens/s", "higher", "speed")
GSM8K_ACCURACY = Metric("gsm8k.accuracy", "fraction", "higher", "correctness", scale="rate", key=True)
RULER_ACCURACY = Metric("ruler.accuracy", "fraction", "higher", "correctness", scale="rate", key=True)


def check_metrics(check: str) -> tuple[Metric, Metric, Metric]:
    """A reference check's outputs against the reference's: max drift, exact rate, tie-flip rate."""
    return (Metric(f"check.{check}.max_drift", "nats", "lower", "correctness", scale="drift", key=True),
            Metric(f"check.{check}.exact_rate", "fraction", "higher", "correctness", scale="rate", key=True),
            Metric(f"check.{check}.tie_flip_rate", "fraction", "lower", "correctness", scale="rate"))


CHECK_METRICS = check_metrics("{check}")
GRID_METRICS = check_metrics("long_context")


def kv_capacity_measured(r: KvCapacityRecord) -> list[Measured]:
    return measured(r, KV_TOKENS, r.tokens)


def capacity_measured(r: CapacityRecord) -> list[Measured]:
    return measured(r, THROUGHPUT, r.output_tokens_per_s, concurrency=r.concurrency) if r.status == "complete" else []


def gsm8k_measured(r: Gsm8kRecord) -> list[Measured]:
    if r.status != "complete" or not r.n:
        return []
    score = r.scores.get("strict-match") or next(iter(r.scores.values()), None)
    return measured(r, GSM8K_ACCURACY, score.correct / r.n if score else None)


def ruler_measured(r: RulerRecord) -> list[Measured]:
    return measured(r, RULER_ACCURACY, sum(c.correct for c in r.cells) / r.n) if r.status == "complete" and r.n else []


def aborted(r: Gsm8kRecord | RulerRecord | ReferenceCheckRecord) -> list[Unfinished]:
    return [Unfinished(f"{r.suite} x {r.arm}", "aborted: ", r.reason)] if r.status == "aborted" else []


# -- reference checks and the long_context grid
GRID_CHECKS = BY_NAME["long_context"].checks  # long_context's reference checks: its grid record's cells cover them


def check_measured(r: ReferenceCheckRecord) -> list[Measured]:
    if r.status != "complete" or not r.requests:
        return []
    drift, exact, ties = CHECK_METRICS
    return [*measured(r, drift, r.max_drift, check=r.check),
            *measured(r, exact, r.exact_matches / r.requests, check=r.check),
            *measured(r, ties, r.tie_flips / r.requests, check=r.check)]


def check_verdicts(r: ReferenceCheckRecord) -> list[Verdict]:
    return [Verdict(r.arm, "check", r.check, r.reference, r.passed, r.detail, r.judged_by)]


def check_coverage(r: ReferenceCheckRecord) -> list[Covered]:
    """output_coverage: every compared output; another check its longest compared context (its records keep no
    per-request batch), except the grid's checks, whose cells say it."""
    if r.covered:
        pre = int(r.preemptions_proven) if r.preemptions_proven is not None else None
        return [Covered(r.arm, r.check, c.prompt_tokens + c.generated, c.batch, c.generated, pre) for c in r.covered]
    if r.checked_to_tokens and r.check not in GRID_CHECKS:
        return [Covered(r.arm, r.check, r.checked_to_tokens, 1, r.checked_generated_tokens)]
    return []


def grid_measured(r: LongContextRecord) -> list[Measured]:
    if r.status != "complete" or not r.cells:
        return []
    drift, exact, ties = GRID_METRICS
    drifts = [d for c in r.cells for d in (c.max_drift, c.forced_max_drift) if d is not None]
    return [*measured(r, drift, max(drifts) if drifts else None),
            *measured(r, exact, sum(c.exact for c in r.cells) / len(r.cells)),
            *measured(r, ties, sum(c.tie_flip for c in r.cells) / len(r.cells))]


def grid_verdicts(r: LongContextRecord) -> list[Verdict]:
    return [Verdict(r.arm, "check", "long_context", r.reference, r.passed, "; ".join(r.failures))]


def grid_coverage(r: LongContextRecord) -> list[Covered]:
    return [Covered(r.arm, "long_context", c.context_tokens or c.length, c.batch) for c in r.cells]


# -- a catalogue timing suite's samples (config/suites.py MetricGate): its metric is declared there
CATALOGUE_METRICS = {(s.name, s.metric_gate.metric): Metric(f"{s.name}.{s.metric_gate.metric}_p50", None,
                                                            s.metric_gate.better, "speed", gate=s.gate)
                     for s in SUITES if s.metric_gate}
UNCATALOGUED = Metric("{suite}.{metric}_p50", None, "lower", "speed")  # a suite since taken out of the catalogue


def metric_measured(r: MetricRecord) -> list[Measured]:
    if r.failed:
        return []
    metric = CATALOGUE_METRICS.get((r.suite, r.metric), UNCATALOGUED)
    return measured(r, metric, r.median, r.unit, suite=r.suite, metric=r.metric)


# -- verdicts and ends of the others
def gate_verdicts(r: GateRecord) -> list[Verdict]:
    return [Verdict(r.arm, "gate", r.gate, r.reference, r.passed, r.detail)]


def outcome_verdicts(r: OutcomeRecord) -> list[Verdict]:
    return [Verdict(r.arm, "test", r.suite, "", r.outcome in ("passed", "skipped"),
                    r.outcome + (f": {r.message[:300]}" if r.message else ""))]


def dcp_ops_unfinished(r: DcpOpsRecord) -> list[Unfinished]:
    return [Unfinished(f"{r.suite} x {r.arm}", "", r.detail)] if r.status == "no_data" else []


def server_unfinished(r: ServerRecord) -> list[Unfinished]:
    return [Unfinished(f"server x {r.arm}", "failed to start: ", r.reason)] if r.status == "failed" else []


MEANINGS: dict[str, Meaning] = {m.kind: m for m in (
    Meaning(ServerRecord, "Servers", unfinished=server_unfinished),
    Meaning(KvCapacityRecord, "KV capacity", (KV_TOKENS,), kv_capacity_measured),
    Meaning(LongPrefixRecord, "Performance", (*LONG_PREFIX_TIMING.values(), KV_USAGE_PEAK), long_prefix_measured,
            coverage=long_prefix_coverage, unfinished=long_prefix_unfinished),
    Meaning(CapacityRecord, "Capacity", (THROUGHPUT,), capacity_measured),
    Meaning(ColdStartRecord, "Cold start"),
    Meaning(Gsm8kRecord, "Accuracy", (GSM8K_ACCURACY,), gsm8k_measured, unfinished=aborted),
    Meaning(RulerRecord, "RULER", (RULER_ACCURACY,), ruler_measured, unfinished=aborted),
    Meaning(GateRecord, "Gates", verdicts=gate_verdicts),
    Meaning(ReferenceCheckRecord, "Reference checks", CHECK_METRICS, check_measured, check_verdicts, check_coverage,
            aborted),
    Meaning(LongContextRecord, "Long context", GRID_METRICS, grid_measured, grid_verdicts, grid_coverage),
    Meaning(DcpOpsRecord, "DCP op conformance", unfinished=dcp_ops_unfinished),
    Meaning(SpecDecodeRecord, "Spec decode"),
    Meaning(DegenerationRecord, "Gates"),  # read by the spec_decode gates (judge/spec_decode_gates.py)
    Meaning(MetricRecord, "Timing metrics", (*CATALOGUE_METRICS.values(), UNCATALOGUED), metric_measured),
    Meaning(OutcomeRecord, "Checks", verdicts=outcome_verdicts),
)}


def meaning(r: Record) -> Meaning:
    return MEANINGS[r.kind]


@cache
def metric_named(name: str) -> Metric | None:
    """The declaration behind a metric name as the history stores it; None for a name no kind declares."""
    declared = [m for k in MEANINGS.values() for m in k.metrics]
    # literal names first: check.long_context.max_drift is the grid's, not check.{check}'s (the same meaning)
    for m in sorted(declared, key=lambda m: "{" in m.name):
        if m.pattern.fullmatch(name):
            return m
    return None
