"""The one result schema: typed records that suites append to reports/<run-id>/results.jsonl.

Versioned: every line carries `schema_version` (harness.records.results refuses versions it does not know).
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

SCHEMA_VERSION = 1


class Summary(BaseModel):
    """Percentiles of per-request values (seconds), numpy's linear method as `vllm bench serve` uses."""

    n: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None

    @classmethod
    def of(cls, values: list[float]) -> Summary:
        if not values:
            return cls(n=0, mean=None, p50=None, p90=None, p99=None)
        p50, p90, p99 = (float(x) for x in np.percentile(values, [50, 90, 99]))
        return cls(n=len(values), mean=float(np.mean(values)), p50=p50, p90=p90, p99=p99)


class Usage(BaseModel):
    """A sampled gauge over a window: mean and peak of its points."""

    mean: float
    peak: float
    n: int

    @classmethod
    def of(cls, values: list[float]) -> Usage | None:
        return cls(mean=sum(values) / len(values), peak=max(values), n=len(values)) if values else None


class RecordBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    run_id: str
    arm: str
    suite: str
    time: float = Field(default_factory=time.time)
    # --resume: the attempt that wrote it and its test's node id; a later attempt supersedes (records/attempts.py)
    attempt: int = 0
    test: str | None = None


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


BUFFERED_STREAM = "timing invalid (buffered stream)"  # a level whose streams reached the client at once
# loadgen.BURST_GAP_NS per token: how records written before `buffered_requests` are read
BUFFERED_TPOT_S = 100e-6


def buffered_reason(buffered: int, ok: int) -> str:
    return f"{BUFFERED_STREAM}: {buffered}/{ok} requests' output arrived at once"


class LongPrefixRecord(RecordBase):
    """One per (arm, concurrency level) of the long-prefix workload. Times in seconds."""

    kind: Literal["long_prefix"] = "long_prefix"
    workload: str
    prompts_sha: str  # same value on both arms: the same prompts were sent
    # token_ids: TTFT excludes the server's tokenization; text: includes it (older records: all token_ids)
    prompt_basis: Literal["token_ids", "text"] = "token_ids"
    prompt_tokens_mean: float | None = None  # prompt tokens as the server counted them (usage), successful requests
    # the longest prompt + output tokens a successful request was timed at: the headline's "timed at M" (None: older)
    timed_to_tokens: int | None = None
    concurrency: int
    status: Literal["complete", "aborted"]
    reason: str | None = None
    requests: int  # sent and finished (ok or failed)
    failed: int
    errors: list[str] = []  # "request <i>: <error>", every failed request
    ttft: Summary
    tpot: Summary
    itl: Summary
    e2e: Summary
    kv_usage: Usage | None  # vllm:kv_cache_usage_perc (0-1) over the level; what the seed calls HBM use
    gpu_memory_mib: dict[str, Usage] | None  # NVML per GPU; None where there is no GPU (n/a, never 0)
    running_peak: float | None = None
    waiting_peak: float | None = None
    prefix_cache_hits: float | None = None  # counter deltas over the level, in tokens
    prefix_cache_queries: float | None = None
    metrics_scrape_errors: int = 0  # /metrics scrapes that failed during the workload (the usage figures miss them)
    nvml_error: str | None = None  # why there is no NVML memory (no GPU/driver), where there is none
    samples_path: str  # raw per-request samples (JSONL)
    # every successful request's TPOT in order, for the baseline diff's rank test (None: older, read samples_path)
    tpot_samples_s: list[float] | None = None
    # successful requests whose tokens came in bursts (RequestSample.bursty): TPOT timed scheduling (None: older)
    bursty_requests: int | None = None
    # successful requests whose output came at once (RequestSample.buffered); one voids the level's TTFT, TPOT and
    # ITL, its other requests being partly buffered too (docs/evidence/cpu-history-2026-12-04.md); None: older records
    buffered_requests: int | None = None
    timing_invalid: str | None = None  # "timing invalid (buffered stream): ...", else None
    telemetry_path: str | None = None  # the level's /metrics + NVML time series (JSONL), for the KV-usage timeline

    @model_validator(mode="after")
    def _buffered_from_samples(self) -> LongPrefixRecord:
        """An older record (no `buffered_requests`) read as the current code writes it: a raw TPOT under
        BUFFERED_TPOT_S is a buffered stream (per token, as such records keep no chunk times)."""
        if self.buffered_requests is None and self.tpot_samples_s is not None:
            self.buffered_requests = sum(1 for t in self.tpot_samples_s if t < BUFFERED_TPOT_S)
            if self.buffered_requests and self.timing_invalid is None:
                self.timing_invalid = buffered_reason(self.buffered_requests, self.requests - self.failed)
        return self


class CapacityRecord(RecordBase):
    """One per (arm, level) of the capacity ramp (suites/test_capacity.py). Times in seconds."""

    kind: Literal["capacity"] = "capacity"
    workload: str
    prompts_sha: str  # of this level's prompts: equal on both arms at the same level
    concurrency: int
    status: Literal["complete", "aborted", "cut"]  # cut: still running at max_level_s, ended the ramp
    reason: str | None = None
    requests: int  # sent and finished (ok or failed)
    planned: int  # rounds x concurrency
    failed: int
    errors: list[str] = []
    duration_s: float  # first request sent to last one finished
    output_tokens: int  # of the successful requests (usage blocks)
    output_tokens_per_s: float | None
    requests_per_s: float | None
    gpus: int  # the arm's GPU count (1 on CPU): throughput per GPU = output_tokens_per_s / gpus
    ttft: Summary
    tpot: Summary
    ttft_samples_s: list[float | None] = []  # per request in request order (None: failed), for goodput under any SLO
    tpot_samples_s: list[float | None] = []
    # successful requests whose output came at once (RequestSample.buffered): no TPOT, no goodput (None: older)
    buffered_requests: int | None = None
    kv_usage: Usage | None = None
    waiting_share: float | None = None  # share of the level's /metrics points with a request waiting
    running_peak: float | None = None
    waiting_peak: float | None = None
    preemptions: float | None = None  # vllm:num_preemptions delta over the level
    prefix_cache_hits: float | None = None
    prefix_cache_queries: float | None = None
    saturated: bool = False
    saturation: str | None = None  # which signal said so, with its value
    samples_path: str


class ColdStartRecord(RecordBase):
    """The first request after server start (the first warm-up), against the steady state."""

    kind: Literal["cold_start"] = "cold_start"
    workload: str
    ttft_s: float | None
    tpot_s: float | None
    steady_tpot_p50_s: float | None
    factor_limit: float
    flagged: bool
    error: str | None = None
    # why either TPOT is missing: the check reads FAIL "no data: <this>" where timing is enforced, never a pass
    no_data: str | None = None


class FilterScore(BaseModel):
    exact_match: float | None  # lm-eval's aggregate
    stderr: float | None
    correct: int  # counted from the per-sample log


class Gsm8kRecord(RecordBase):
    kind: Literal["gsm8k"] = "gsm8k"
    workload: str
    task: str  # gsm8k (lm-eval's hub task) or gsm8k_local (offline JSON files)
    data_files: dict[str, str] | None
    lm_eval_version: str
    task_hash: str | None
    num_fewshot: int
    limit: int | None
    n: int
    scores: dict[str, FilterScore]  # strict-match, flexible-extract
    request_errors: int  # requests that failed after retries; scored as wrong, never dropped
    invalid: int  # empty or no number extracted
    status: Literal["complete", "aborted"]
    reason: str | None = None
    wall_s: float
    num_concurrent: int
    samples_path: str | None
    # filter -> doc id -> correct, the paired gate's input (None: older records, read the samples file)
    per_question: dict[str, dict[int, bool]] | None = None


def per_question_of(samples: list[dict]) -> dict[str, dict[int, bool]]:
    """A Gsm8kRecord's per_question from lm-eval's per-sample log rows: filter -> doc id -> correct."""
    out: dict[str, dict[int, bool]] = {}
    for s in samples:
        if "filter" in s and "doc_id" in s:
            out.setdefault(s["filter"], {})[int(s["doc_id"])] = bool(s.get("exact_match"))
    return out


class RulerCell(BaseModel):
    """One task at one length: samples, those with every expected answer found, lm-eval's mean string-match score."""

    task: str  # lm-eval's task name (niah_single_1, ruler_vt, ...)
    length: int  # RULER's max_seq_length: prompt + the task's answer budget
    n: int
    correct: int
    score: float | None  # mean string_match_all; None without samples
    request_errors: int = 0
    lm_eval_score: float | None = None  # lm-eval's own aggregate for the cell, where it computed one (a cross-check)


class RulerRecord(RecordBase):
    """lm-eval's synthetic RULER tasks on one arm (suites/test_ruler.py, harness/measure/ruler.py)."""

    kind: Literal["ruler"] = "ruler"
    workload: str
    tasks: list[str]
    max_seq_lengths: list[int]
    limit: int  # samples per task and length
    tokenizer: str  # the directory the samples were sized with
    data_sha: str  # hash of every sample sent: equal on both arms of a pair
    lm_eval_version: str
    n: int  # samples answered (request errors included, scored wrong)
    cells: list[RulerCell]
    request_errors: int
    status: Literal["complete", "aborted"]
    reason: str | None = None
    wall_s: float
    num_concurrent: int
    samples_path: str | None
    per_sample: dict[str, bool] = {}  # "<task>@<length>#<doc id>" -> every expected answer found (the paired gate's)


class GateRecord(RecordBase):
    """One comparison of the candidate with the reference: the verdict and the numbers behind it."""

    kind: Literal["gate"] = "gate"
    gate: str
    reference: str
    passed: bool
    detail: str
    numbers: dict[str, float | int | None] = {}


class RequestComparison(BaseModel):
    """One request's candidate output against the reference's output for the same prompt."""

    request: str  # e.g. "round 3 (batch 5) #2" or "prefix 0 / suffix 4"
    prompt_tokens: int
    exact: bool
    first_divergence: int | None  # index of the first differing generated token; None when equal
    candidate_tokens: int
    reference_tokens: int
    finite: bool  # every candidate logprob finite
    max_drift: float | None  # max |delta logprob| of the chosen tokens up to the first divergence
    group: str = ""  # what the check varies: the round / batch size, cached vs uncached extend
    # the reference's top-1 minus top-2 logprob at the divergence: ~0 is a rounding-level flip, wide a real difference
    reference_gap_at_divergence: float | None = None
    # |candidate - reference| logprob of each chosen token before the first divergence (every scored position for
    # teacher forcing; None where non-finite): what the paired test against a known-good floor pairs by position.
    deltas: list[float | None] = []



class TeacherForcedComparison(RequestComparison):
    """Teacher forcing: the reference's tokens scored on the candidate; the RequestComparison fields cover every
    scored position."""

    mean_drift: float | None = None
    decode_path_positions: int = 0  # scored positions whose chunk ran the DCP decode path (<= 512 query tokens)
    # the candidate's own logprob of each reference token (7 significant digits, None where non-finite): with the
    # reference's and a float32 pass's, each arm's distance to float32 (harness/calibrate/anchor.py)
    candidate_logprobs: list[float | None] = []

def comparison_model(check: str) -> type[RequestComparison]:
    """The model of a check's comparisons file lines: teacher forcing scores every position, the rest compare
    generations (long_context's forced cells read as RequestComparison: deltas kept, the extras dropped)."""
    return TeacherForcedComparison if check == "teacher_forcing" else RequestComparison


class CoveredRequest(BaseModel):
    """One compared output of an output_coverage check: what it covered, for the history's coverage."""

    prompt_tokens: int
    generated: int  # generated tokens compared (up to and including a first divergence)
    batch: int = 1  # requests sent at once with it


class ReferenceCheckFields(BaseModel):
    """A reference check's verdict and numbers, built by refcheck and completed by the floor test
    (refcheck/judging/check.py); a typed value from one stage to the next."""

    model_config = ConfigDict(extra="forbid")

    check: str
    reference: str  # the reference arm (or variant, e.g. "gpu-mla-eager")
    reference_key: str  # the reference store key the outputs came from
    passed: bool
    detail: str
    requests: int
    exact_matches: int
    first_divergence_min: int | None
    max_drift: float | None
    nonfinite: int
    drift_limit: float
    tie_flips: int = 0  # divergences where the reference's own top-2 gap was <= tie_gap (not failures)
    tie_gap: float = 0.0
    cached_tokens_proven: float | None = None  # vllm:prefix_cache_hits delta over the check, in tokens
    diverged: list[str] = []  # one line per diverging request: where and in which round/batch
    status: Literal["complete", "aborted"] = "complete"
    reason: str | None = None
    comparisons_path: str | None = None  # per-request RequestComparison lines (JSONL)
    # the longest prompt + generated tokens compared: the headline's "outputs checked to N tokens" (None: older)
    checked_to_tokens: int | None = None
    # the most generated tokens of one compared output: the headline's "and M generated tokens" (None: older)
    checked_generated_tokens: int | None = None
    # vllm:num_preemptions delta over the check's burst (output_coverage kv_pressure): its outputs were recomputed
    preemptions_proven: float | None = None
    covered: list[CoveredRequest] = []  # output_coverage: every compared output's prompt, generated tokens, batch
    # Teacher forcing only: the paired test against the accepted known-good run of the same pair (its store path,
    # where `harness accept-floor` writes), its verdict sentence, and the smallest shift this run could detect.
    floor_path: str | None = None
    floor: str | None = None
    detectable: str | None = None
    # which limits judged the check, in one line: a calibration's (date, K, limit, tie gap) or gates.yaml's
    judged_by: str | None = None


class ReferenceCheckRecord(ReferenceCheckFields, RecordBase):
    """A check of the candidate's outputs against the reference's outputs (stored, or the same run's)."""

    kind: Literal["reference_check"] = "reference_check"


class LongContextCell(BaseModel):
    """One (length, depth, mode) of the long_context grid: the candidate's output against the reference's cold one,
    or (mode forced) the reference's tokens teacher-forced on the candidate."""

    length: int  # prompt tokens
    depth: float  # where the needle span starts, as a fraction of the context before the cue
    mode: Literal["cold", "warm", "partial", "forced", "burst", "sweep"]
    exact: bool  # forced: the reference token is the candidate's argmax at every position
    first_divergence: int | None
    tie_flip: bool = False  # a divergence where the reference's own top-2 gap was <= tie_gap
    max_drift: float | None = None  # generation modes: max |delta logprob| before the first divergence
    forced_max_drift: float | None = None  # forced: max |delta logprob| over every scored position
    retrieval_candidate: float | None = None  # copy accuracy of the candidate's continuation (generation modes)
    retrieval_reference: float | None = None  # the reference's, on the same prompt
    cached_tokens: float | None = None  # vllm:prefix_cache_hits delta over this request (warm, partial)
    context_tokens: int = 0  # prompt + tokens compared: how far this cell checked outputs
    # burst: the cell sent cold inside a burst of `batch` requests in flight at once (refcheck/judging/bursts.py),
    # compared with the reference's sequential output and with the candidate's own output of the cell sent alone
    batch: int = 1
    burst: str | None = None  # which burst: "L4000 depths" or "mixed 8"
    alone_exact: bool | None = None
    alone_first_divergence: int | None = None
    alone_max_drift: float | None = None
    passed: bool
    failures: list[str] = []


class BatchInvarianceRow(BaseModel):
    """The candidate against itself at one batch size: its burst outputs against the same prompts sent alone."""

    batch: int
    requests: int
    exact: int  # token-identical to the output alone
    tie_flips: int  # diverged where the candidate's own top-2 gap was within the tie gap
    failed: int  # diverged past the limits, or drifted past the drift limit before diverging
    first_divergence_min: int | None
    max_drift: float | None
    lengths: list[int] = []  # the prompt lengths in bursts of this size


class LongContextRecord(RecordBase):
    """The long_context suite on one candidate: the whole length x depth x mode grid, the first failing length."""

    kind: Literal["long_context"] = "long_context"
    workload: str
    reference: str
    reference_key: str
    prompts_sha: str
    needle_source: str  # where the needle tokens came from (workload, tiny_model.json, the ordinary vocabulary)
    prefix_caching: str  # "on" (warm and partial hits proven per request) or why they could not be
    lengths: list[int]
    depths: list[float]
    modes: list[str]
    cells: list[LongContextCell] = []
    first_failing_length: int | None = None  # the shortest length with a failing cell
    checked_to_tokens: int | None = None  # the longest prompt + compared tokens of any cell
    passed: bool
    failures: list[str] = []  # every failing cell's line, and the paired floor test's
    status: Literal["complete", "aborted"] = "complete"
    reason: str | None = None
    comparisons_path: str | None = None  # RequestComparison / TeacherForcedComparison lines (JSONL)
    bursts_planned: int = 0  # burst cells the grid planned (refcheck/prompts/burst_plan.py); 0 in records before bursts
    # the sweep (mode sweep, one depth, cold): its lengths beside the grid's, the run's length seed that drew the
    # jittered ones, and the cells planned (0 in records before the sweep)
    sweep_lengths: list[int] = []
    length_seed: int | None = None
    sweep_planned: int = 0
    batch_invariance: list[BatchInvarianceRow] = []  # burst outputs against the candidate's own outputs alone


class DcpOpCase(BaseModel):
    """One op-level case of the DCP conformance runner (harness/opcheck), its worst rank's numbers."""

    id: str
    op: str
    kind: str
    where: str | None = None  # module:function of the installed vLLM driven
    geometry: dict[str, Any] = {}  # the case's parameters as the runner wrote them (lists included)
    dtype: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    limit: float | None = None
    verdict: Literal["PASS", "FAIL", "ERROR", "SKIP"]
    detail: str = ""


class DcpOpsRecord(RecordBase):
    """One per op-suite run on an arm (suites/test_dcp_ops.py): the verdict and every case; the per-rank rows stay in
    the runner's JSON (result_path)."""

    kind: Literal["dcp_ops"] = "dcp_ops"
    status: Literal["passed", "failed", "skipped", "no_data"]
    passed: bool  # False for failed and no_data; True for passed and skipped (a skip is its own outcome)
    detail: str
    world: int
    device: str
    vllm_version: str | None = None
    torch_version: str | None = None
    limits: dict[str, float] = {}  # the k factors the runner used (configs/gates.yaml dcp_ops)
    summary: dict[str, int] = {}  # verdict -> number of cases
    cases: list[DcpOpCase] = []
    result_path: str | None = None


class SpecDecodeRecord(RecordBase):
    """One per arm of the spec_decode suite: timing and output repetition, and on a speculative arm the /metrics
    counter deltas over the fixed greedy prompts."""

    kind: Literal["spec_decode"] = "spec_decode"
    workload: str
    prompts_sha: str  # same value on both arms: the same prompts were sent
    status: Literal["complete", "aborted"]
    reason: str | None = None
    requests: int  # sent and finished (ok or failed)
    failed: int
    errors: list[str] = []
    method: str | None = None  # speculative.method; None on an arm without a drafter
    num_speculative_tokens: int | None = None
    drafts: float | None = None  # vllm:spec_decode_num_drafts delta over the prompts
    draft_tokens: float | None = None
    accepted: float | None = None
    accepted_per_pos: list[float] = []  # vllm:spec_decode_num_accepted_tokens_per_pos delta, position 0 first
    acceptance_length: float | None = None  # 1 + accepted / drafts
    position_rates: list[float] = []  # accepted_per_pos / drafts
    # n-gram arms: vLLM's proposer replayed over this arm's own prompts and outputs (harness/judge/ngram_replay.py):
    # the drafts exactly, the accepted tokens as [min, max] (a last draft may reach past max_tokens, never streamed)
    replay_drafts: int | None = None
    replay_accepted: list[int] = []
    replay_problem: str | None = None  # why there is no replay (e.g. no prompt token ids from the server)
    ttft: Summary
    tpot: Summary
    tokens_per_s: float | None = None  # output tokens / summed request latency (one request at a time)
    mean_span_fraction: float | None = None  # mean longest-repeated-span / length of this arm's outputs
    draft_kv: str | None = None  # the draft KV policy the server's own log states, or why none is known
    draft_kv_declared: str | None = None  # set where the policy matters: a draft model on a DCP target
    kv_tokens: int | None = None  # KV capacity from this arm's log (with the draft on a speculative arm)
    samples_path: str | None = None  # per-request SpecSample lines (JSONL)


class DegenerationRecord(RecordBase):
    """The degeneration detector on one suite's kept outputs, candidate vs reference for the same prompts."""

    kind: Literal["degeneration"] = "degeneration"
    reference: str
    passed: bool
    detail: str
    requests: int
    # every line that fails the verdict: too many tie flips (or all of them) first, then one per request clearly more
    # repetitive than the reference, the span quoted
    flagged: list[str] = []
    # requests judged for a collapse only: their first divergence was a tie flip (harness/judge/degeneration.py), where
    # and at what gap
    tie_flipped: list[str] = []
    status: Literal["complete", "no_data"] = "complete"


class MetricRecord(RecordBase):
    """One metric of one arm, with its per-request samples: what a catalogue timing gate compares (harness/config/
    suites.py MetricGate, harness/judge/metric_gate.py). `failed` requests have no sample: a gate reads them."""

    kind: Literal["metric"] = "metric"
    metric: str  # e.g. "ttft_s"
    unit: str  # of the samples, e.g. "s"
    samples: list[float]
    requests: int
    failed: int = 0
    errors: list[str] = []  # the first few failures' messages
    detail: str = ""  # what was measured, in one line (lengths, requests)

    @property
    def median(self) -> float | None:
        return float(np.median(self.samples)) if self.samples else None


class OutcomeRecord(RecordBase):
    """One per test (suite x arm): the verdict and the failure text, for tables and JUnit."""

    kind: Literal["outcome"] = "outcome"
    test: str  # type: ignore[assignment]  # required here: the node id of the test
    outcome: Literal["passed", "failed", "skipped", "error"]
    message: str = ""
    duration_s: float = 0.0


Record = Annotated[
    ServerRecord | KvCapacityRecord | LongPrefixRecord | ColdStartRecord | Gsm8kRecord | RulerRecord | GateRecord
    | ReferenceCheckRecord | LongContextRecord | DcpOpsRecord | SpecDecodeRecord | DegenerationRecord | OutcomeRecord
    | CapacityRecord | MetricRecord,
    Field(discriminator="kind"),
]
RECORD_ADAPTER: TypeAdapter = TypeAdapter(Record)
KNOWN_KINDS = frozenset(m.model_fields["kind"].default for m in get_args(get_args(Record)[0]))
