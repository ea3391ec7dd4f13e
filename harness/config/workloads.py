"""Workloads: one strict typed model per YAML file in configs/workloads/, and each family's default.

The prompts a workload describes are built in harness.measure.prompts (long prefix) and harness.refcheck.prompts
(the reference checks' prompt sets)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, Field, ValidationError, model_validator

from harness.config.arms import ARM_NAME, Arm
from harness.config.errors import ConfigError
from harness.config.files import Float, Int, StrictModel, field_errors, read_yaml
from harness.config.paths import WORKLOADS_DIR
from harness.config.suites import metric_families, prompt_set_families

Positive = Annotated[int, Field(strict=True, ge=1)]
TokenId = Annotated[int, Field(strict=True, ge=0)]


def min_max(pair: tuple[int, int]) -> tuple[int, int]:
    if pair[0] > pair[1]:
        raise ValueError(f"a [min, max] range: {list(pair)} is reversed")
    return pair


TokenRange = Annotated[tuple[Positive, Positive], AfterValidator(min_max)]


class PrefixSuffix:
    """Prompts of a shared prefix + a suffix per request, fixed output length: the lengths a workload's fit needs."""

    prefix_tokens: int
    suffix_tokens: int
    output_tokens: int

    @property
    def prompt_tokens(self) -> int:
        return self.prefix_tokens + self.suffix_tokens

    @property
    def max_len(self) -> int:
        return self.prompt_tokens + self.output_tokens


class LongPrefixWorkload(PrefixSuffix, StrictModel):
    """One shared prefix + a distinct suffix per request, fixed output length, greedy, ignore_eos."""

    name: str
    description: str = ""
    prefix_tokens: Int = Field(ge=0)
    suffix_tokens: Int = Field(ge=1)
    output_tokens: Int = Field(ge=2)  # TPOT needs at least two output tokens
    concurrency: list[Positive] = Field(min_length=1)
    requests_per_level: Int = Field(ge=1)
    warmup_requests: Int = Field(1, ge=1)  # the first one is also the cold-start sample
    seed: Int = 0
    metrics_interval_s: Float = Field(0.5, gt=0)
    vocab_size: Int | None = Field(None, ge=16)  # for hub models whose config.json is not local
    exclude_token_ids: list[TokenId] = []
    # token_ids: prompts go out as ids, TTFT excludes tokenization; text: as the server's detokenization of those
    # ids, so TTFT includes the server tokenizing them, as for real clients (harness/measure/textbasis.py)
    prompt_basis: Literal["token_ids", "text"] = "token_ids"


class Gsm8kWorkload(StrictModel):
    """lm-eval GSM8K settings: few-shot count, question limit, client concurrency and retries."""

    name: str
    description: str = ""
    num_fewshot: Int = Field(5, ge=0)
    limit: Int | None = Field(None, ge=1)  # None: all 1,319 test questions
    num_concurrent: Int = Field(8, ge=1)
    max_retries: Int = Field(3, ge=1)
    max_gen_toks: Int = Field(256, ge=1)


class MetricWorkload(StrictModel):
    """A timing suite's workload (a catalogue family of its own, harness/config/suites.py): prompts of each length,
    `requests_per_length` of them one at a time, each cold (a cache salt of its own), `output_tokens` out."""

    name: str
    description: str = ""
    lengths: list[Positive] = Field(min_length=1)  # prompt tokens
    requests_per_length: Int = Field(ge=1)
    output_tokens: Int = Field(1, ge=1)
    warmup_requests: Int = Field(1, ge=0)  # per length, sent first, not counted: a first prefill pays one-off costs
    seed: Int = 0
    vocab_size: Int | None = Field(None, ge=16)
    exclude_token_ids: list[TokenId] = []

    @property
    def prompt_tokens(self) -> int:
        return max(self.lengths)


def load_workload(name: str, workloads_dir: Path = WORKLOADS_DIR, kind: type[BaseModel] = LongPrefixWorkload):
    if not ARM_NAME.match(name):
        raise ConfigError(f"workload name {name!r} is not valid (configs/workloads/<name>.yaml)")
    path = workloads_dir / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in workloads_dir.glob("*.yaml"))) or "none"
        raise ConfigError(f"unknown workload {name!r}: no file {path}. Known workloads: {known}")
    raw = read_yaml(path)
    try:
        return kind.model_validate({**raw, "name": raw.get("name", name)})
    except ValidationError as exc:
        raise ConfigError(f"{path}: invalid workload: {'; '.join(field_errors(exc))}") from None


class PromptSetWorkload(StrictModel):
    """A reference-check family's workload (a catalogue Suite with `refcheck`): `family` is its key under an arm's
    `workloads:`; FAMILIES finds the model by it, and admission checks its longest request against max_model_len."""

    family: ClassVar[str]
    name: str

    def longest(self) -> tuple[int, int]:
        """(prompt, output) tokens of its longest request: what must fit max_model_len."""
        return self.prompt_tokens, self.output_tokens


class PrefixReuseSpec(StrictModel):
    """Warm one long prompt, then probes sharing only a block-aligned part of its prefix, mixed with uncached ones."""

    prefix_tokens: Int = Field(ge=1)  # the long warm prompt's prefix (past 16k on GPU arms)
    warm_suffix_tokens: Int = Field(16, ge=1)
    shared_tokens: list[Positive] = Field(min_length=1)  # prefix part each probe shares; multiples of the block size
    probes_per_share: Int = Field(2, ge=1)
    uncached_probes: Int = Field(2, ge=0)  # fresh prompts sent in the same batch as the cached extends
    probe_suffix_tokens: TokenRange = (16, 256)  # [min, max] new tokens after the shared part
    # Block-aligned probes (issue 57 item 3): prompts of exactly these lengths, cold, sharing each shared_tokens
    # below them and wholly cached (refcheck/prompts/aligned_probes.py); whole prefix-cache units of every arm served
    aligned_lengths: list[Positive] = []


class GraphReplaySpec(StrictModel):
    """Rounds of concurrent requests whose count walks across captured batch sizes and padding boundaries."""

    batch_sizes: list[Positive] = Field([1, 2, 3, 5, 8, 13], min_length=1)
    prompt_tokens: TokenRange = (8, 512)  # [min, max], drawn per request: every round's inputs change


class CopySpec(StrictModel):
    """Copy-from-far-back prompts (GPU arms): a random span early in a long context, its first `cue_tokens` again at
    the end; the greedy continuation must come from the far-back KV (harness/tinymodel/copytask.py). Sent as the last
    graph_replay round, one batch."""

    context_tokens: list[Positive] = Field(min_length=1)  # prompt lengths, cue included
    span_tokens: Int = Field(96, ge=2)
    cue_tokens: Int = Field(16, ge=1)
    span_at: Int = Field(32, ge=0)  # where the span starts in the context
    prompts_per_length: Int = Field(2, ge=1)


class ReferenceChecksWorkload(PromptSetWorkload):
    """The deterministic prompt set of prefix_reuse and graph_replay, and the greedy sampling they compare."""

    family: ClassVar[str] = "reference_checks"
    name: str
    description: str = ""
    seed: Int = 0
    output_tokens: Int = Field(32, ge=1)
    top_logprobs: Int = Field(5, ge=1, le=20)  # vLLM's default max_logprobs is 20
    prefix_reuse: PrefixReuseSpec
    graph_replay: GraphReplaySpec = GraphReplaySpec()
    copy_prompts: CopySpec | None = None
    vocab_size: Int | None = Field(None, ge=16)
    exclude_token_ids: list[TokenId] = []

    @property
    def prompt_tokens(self) -> int:
        """The longest prompt."""
        return max(self.prefix_reuse.prefix_tokens + self.prefix_reuse.warm_suffix_tokens,
                   max(self.prefix_reuse.shared_tokens) + self.prefix_reuse.probe_suffix_tokens[1],
                   max(self.prefix_reuse.aligned_lengths, default=0),
                   self.graph_replay.prompt_tokens[1],
                   max(self.copy_prompts.context_tokens) if self.copy_prompts else 0)

    @property
    def max_len(self) -> int:
        return self.prompt_tokens + self.output_tokens


class SpecDecodeWorkload(StrictModel):
    """The spec_decode suite's fixed text prompts, greedy: GSM8K-style questions (a few worked examples, then a test
    question) and long-context prompts (many worked examples before the question), from the local GSM8K files."""

    name: str
    description: str = ""
    gsm8k_prompts: Int = Field(8, ge=0)  # test questions 0..N-1
    gsm8k_shots: Int = Field(1, ge=0)  # worked train examples before each
    long_context_prompts: Int = Field(2, ge=0)  # test questions N.. with many worked examples before each
    long_context_shots: Int = Field(12, ge=1)
    output_tokens: Int = Field(64, ge=2)  # fixed length (ignore_eos): TPOT needs at least two
    top_logprobs: Int = Field(2, ge=1, le=20)  # top-2 gives the reference's gap where the outputs diverge

    @property
    def prompts(self) -> int:
        return self.gsm8k_prompts + self.long_context_prompts


class LongContextWorkload(PromptSetWorkload):
    """The long_context suite's grid (refcheck/prompts/long_context.py): per prompt length and needle depth one copy
    prompt -- filler, a span of distinct needle tokens at the depth, the span's first `cue_tokens` at the end -- sent
    cold, warm (whole-prompt prefix hit) and as a long partial hit; the continuation must be the rest of the span."""

    family: ClassVar[str] = "long_context"
    name: str
    description: str = ""
    lengths: list[Positive] = Field(min_length=1)  # prompt tokens, cue included; each + output_tokens <= max_model_len
    depths: list[Annotated[float, Field(ge=0, le=1)]] = Field([0.05, 0.5, 0.95], min_length=1)  # span start, as a
    # fraction of the room before the cue
    modes: list[Literal["cold", "warm", "partial"]] = Field(["cold", "warm", "partial"], min_length=1)
    span_tokens: Int = Field(32, ge=2)
    cue_tokens: Int = Field(8, ge=1)
    output_tokens: Int = Field(ge=1)  # >= span - cue: retrieval is judged on the whole continuation
    top_logprobs: Int = Field(5, ge=1, le=20)
    # The partial-hit warm-up shares the cell prompt's first tokens: a fraction of each length (rounded down to whole
    # KV blocks), or a token count (a multiple of the block size, below every length).
    partial_shared: Annotated[float, Field(gt=0, lt=1)] | Positive = 0.5
    seed: Int = 0
    vocab_size: Int | None = Field(None, ge=16)
    exclude_token_ids: list[TokenId] = []
    needle_token_ids: list[TokenId] | None = None  # else the model dir's tiny_model.json needle_tokens, else any
    # After the sequential grid, its cells again in bursts (each length's depths at once, then mixed-length bursts of
    # 2, 4, ... up to the arm's max_num_seqs, or burst_max where the arm sets none; refcheck/prompts/burst_plan.py)
    bursts: bool = True
    burst_max: Int = Field(16, ge=2)
    # the sweep: evenly spaced lengths plus seeded ones in every gap of the grid, so a band fault between grid cells
    # is met over the nights (refcheck/prompts/long_context.py sweep_lengths); 0 and 0: no sweep
    sweep_lengths: Int = Field(16, ge=0)
    jitter_per_gap: Int = Field(1, ge=0)
    sweep_depth: Annotated[float, Field(ge=0, le=1)] = 0.5

    @model_validator(mode="after")
    def _consistent(self) -> LongContextWorkload:
        if self.cue_tokens >= self.span_tokens:
            raise ValueError(f"cue_tokens {self.cue_tokens} must be below span_tokens {self.span_tokens}")
        if self.output_tokens < self.span_tokens - self.cue_tokens:
            raise ValueError(f"output_tokens {self.output_tokens} < span_tokens - cue_tokens "
                             f"{self.span_tokens - self.cue_tokens}: retrieval is judged on the whole continuation")
        short = [n for n in self.lengths if n < self.span_tokens + self.cue_tokens + 2]
        if short:
            raise ValueError(f"lengths {short} cannot hold the {self.span_tokens}-token span and its cue")
        if len(set(self.lengths)) != len(self.lengths) or len(set(self.depths)) != len(self.depths) \
                or len(set(self.modes)) != len(self.modes):
            raise ValueError("lengths, depths and modes must not repeat")
        if self.bursts and "cold" not in self.modes:  # a burst output is compared with the cell's cold one alone
            raise ValueError("bursts compare each cell with its cold output sent alone: add cold to modes or set "
                             "bursts: false")
        if isinstance(self.partial_shared, int) and self.partial_shared >= min(self.lengths):
            raise ValueError(f"partial_shared {self.partial_shared} tokens must be below the shortest length "
                             f"{min(self.lengths)}")
        if self.needle_token_ids is not None and len(set(self.needle_token_ids)) < self.span_tokens:
            raise ValueError(f"needle_token_ids: {len(set(self.needle_token_ids))} distinct ids, the span needs "
                             f"{self.span_tokens}")
        return self

    @property
    def prompt_tokens(self) -> int:
        return max(self.lengths)

    @property
    def max_len(self) -> int:
        return self.prompt_tokens + self.output_tokens


class LongGenerationSpec(StrictModel):
    """Prompts whose outputs are compared deep into a generation: each length generates `output_tokens`."""

    lengths: list[Positive] = Field(min_length=1)
    output_tokens: Int = Field(ge=1)


class ShortPromptSpec(StrictModel):
    """Prompts of a few tokens: every length here, and 1 to (the arm's DCP size x interleave + 1) besides (a DCP
    rank may hold an empty KV shard)."""

    lengths: list[Positive] = Field(min_length=1)


class ChunkBoundarySpec(StrictModel):
    """Prompt lengths `offsets` from every multiple of the arm's max_num_batched_tokens (the chunked-prefill budget)
    up to max_model_len, sent alone (each chunk split exactly at the multiple) and then all at once (prefill chunks
    mixed with the others' decode steps). `budget`: the chunk size assumed where the arm sets no
    max_num_batched_tokens (vLLM's default depends on the build and device: state the one the arm runs with)."""

    offsets: list[int] = Field([-1, 1], min_length=1)
    budget: Int | None = Field(None, ge=2)
    max_multiples: Int = Field(16, ge=1)  # the longest prompts' multiples are kept first beyond this many


class MultiTurnSpec(StrictModel):
    """One session replayed turn by turn under one cache salt with a fixed transcript: turn k's prompt is every earlier
    user turn followed by the reference's output for it, then user turn k; each turn reuses the cached earlier ones."""

    turns: Int = Field(ge=2)
    user_tokens: Int = Field(ge=1)  # tokens per user turn
    output_tokens: Int = Field(ge=1)  # each turn's generation (the reference's joins the transcript)

    @property
    def longest_prompt(self) -> int:
        return self.turns * self.user_tokens + (self.turns - 1) * self.output_tokens


class PressureSpec(StrictModel):
    """A burst larger than the candidate's KV pool: `requests` prompts of `prompt_tokens`, all in flight at once. The
    server's vllm:num_preemptions counter must rise over it (else the check has no data)."""

    requests: Int = Field(ge=2)
    prompt_tokens: Int = Field(ge=1)
    output_tokens: Int = Field(ge=1)


class RecycledSpec(StrictModel):
    """Cells sent, then the KV pool filled with other prompts (`fill_factor` x its tokens, at most `max_fill_tokens`),
    then the cells again under their salt (their cached blocks were evicted: recomputed into reused blocks) and under
    a new one (fresh prompts on reused blocks holding other requests' KV)."""

    prompts: Int = Field(ge=1)
    prompt_tokens: Int = Field(ge=1)
    fill_factor: Float = Field(1.5, ge=1.0)
    fill_prompt_tokens: Int = Field(2000, ge=1)  # each fill prompt's length (sent four at a time, one output token)
    max_fill_tokens: Int = Field(ge=1)  # an arm whose pool needs more has no data: cap its KV (server.kv_cache_blocks)


class OutputCoverageWorkload(PromptSetWorkload):
    """The output_coverage suite's cells beyond the grid's copy prompts (long generations, KV pressure, recycled
    blocks, short prompts, chunk boundaries, multi-turn), each compared with the reference's output sent alone."""

    family: ClassVar[str] = "output_coverage"
    name: str
    description: str = ""
    seed: Int = 0
    output_tokens: Int = Field(32, ge=1)  # short, chunk and recycled cells
    top_logprobs: Int = Field(5, ge=1, le=20)
    long_generation: LongGenerationSpec
    short_prompts: ShortPromptSpec
    chunk_boundaries: ChunkBoundarySpec = ChunkBoundarySpec()
    multi_turn: MultiTurnSpec
    # both need a pool the sign-off can overfill: an uncapped arm runs them on its KV-capped twin (kv_twin.py); a
    # workload without them skips their checks, never passes them
    pressure: PressureSpec | None = None
    recycled: RecycledSpec | None = None
    # The KV block size (tokens per rank) the twin's cap is counted in where the arm pins no --block-size in
    # server.args: the backend's default the workload assumes, pinned on the twin (stated, like
    # chunk_boundaries.budget).
    block_size: Int | None = Field(None, ge=1)
    vocab_size: Int | None = Field(None, ge=16)
    exclude_token_ids: list[TokenId] = []

    def longest(self) -> tuple[int, int]:
        """(prompt, output) tokens of the longest fixed cell (chunk cells are sized from the arm: they fit by
        construction)."""
        g = self.long_generation
        cells = [(max(g.lengths), g.output_tokens), (max(self.short_prompts.lengths), self.output_tokens),
                 (self.multi_turn.longest_prompt, self.multi_turn.output_tokens)]
        cells += [(self.pressure.prompt_tokens, self.pressure.output_tokens)] if self.pressure else []
        if self.recycled:
            cells += [(self.recycled.prompt_tokens, self.output_tokens), (self.recycled.fill_prompt_tokens, 1)]
        return max(cells, key=sum)


@dataclass(frozen=True)
class ChunkBudget:
    tokens: int
    source: str  # "arm cpu-smoke max_num_batched_tokens" or "workload output_coverage_gpu chunk_boundaries.budget"


def chunk_budget(arm: Arm, w: OutputCoverageWorkload) -> ChunkBudget:
    """The chunk size the candidate's prefill is split by: its max_num_batched_tokens, else the workload's stated
    budget; ConfigError naming both fields when neither says."""
    if arm.server.max_num_batched_tokens:
        return ChunkBudget(arm.server.max_num_batched_tokens, f"arm {arm.name} max_num_batched_tokens")
    if w.chunk_boundaries.budget:
        return ChunkBudget(w.chunk_boundaries.budget, f"workload {w.name} chunk_boundaries.budget")
    raise ConfigError(f"workload {w.name!r}: arm {arm.name!r} sets no server.max_num_batched_tokens, so the chunk "
                      "boundaries are unknown: set it on the arm, or chunk_boundaries.budget in the workload")


class ConcurrentPrefillsWorkload(PromptSetWorkload):
    """Prefills of very different lengths in flight together (refcheck/prompt_sets/concurrent_prefills.py): per burst
    one cold prompt of each length and the `hit_lengths` prompts sharing `shared_tokens` (whole cache units) of a warm
    prompt sent first, in each of `orders`; every output compared with the reference's output of the same prompt sent
    alone."""

    family: ClassVar[str] = "concurrent_prefills"
    name: str
    description: str = ""
    seed: Int = 0
    lengths: list[Positive] = Field(min_length=2)  # cold prompts: from a few tokens to near max_model_len
    hit_lengths: list[Positive] = []  # partial hits: each longer than shared_tokens
    shared_tokens: Int = Field(0, ge=0)  # of the warm prompt's prefix; a multiple of every served arm's cache unit
    # arrival orders: interleaved (longest, shortest, next longest, ...: a long prompt's last chunk shares its step
    # with short prefills where chunked prefill splits it), longest_first, shortest_first
    orders: list[Literal["interleaved", "longest_first", "shortest_first"]] = Field(["interleaved"], min_length=1)
    output_tokens: Int = Field(16, ge=1)
    top_logprobs: Int = Field(5, ge=1, le=20)
    vocab_size: Int | None = Field(None, ge=16)
    exclude_token_ids: list[TokenId] = []

    @model_validator(mode="after")
    def _consistent(self) -> ConcurrentPrefillsWorkload:
        if len(set(self.lengths + self.hit_lengths)) != len(self.lengths) + len(self.hit_lengths):
            raise ValueError("lengths and hit_lengths must not repeat")
        if self.hit_lengths and not self.shared_tokens:
            raise ValueError("hit_lengths need shared_tokens: the part of the warm prompt they share")
        if self.hit_lengths and min(self.hit_lengths) <= self.shared_tokens:
            raise ValueError(f"hit_lengths {self.hit_lengths} must be longer than shared_tokens {self.shared_tokens}")
        if len(set(self.orders)) != len(self.orders):
            raise ValueError("orders must not repeat")
        return self

    @property
    def warm_tokens(self) -> int:
        """The warm prompt: the shared part + 16 tokens of its own (none without hit_lengths)."""
        return self.shared_tokens + 16 if self.hit_lengths else 0

    @property
    def prompt_tokens(self) -> int:
        return max([*self.lengths, *self.hit_lengths, self.warm_tokens])


# lm-eval's RULER tasks whose data is generated from the model's tokenizer alone. The others need a download:
# niah_single_2/3, niah_multikey_1, niah_multiquery and niah_multivalue fill their haystack with Paul Graham essays
# (hub dataset baber/paul_graham_essays), ruler_qa_squad / ruler_qa_hotpot read SQuAD / HotpotQA from the hub.
RULER_OFFLINE_TASKS = ("niah_single_1", "niah_multikey_2", "niah_multikey_3", "ruler_vt", "ruler_cwe", "ruler_fwe")
RULER_DOWNLOAD_TASKS = ("niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multiquery", "niah_multivalue",
                        "ruler_qa_squad", "ruler_qa_hotpot")
# lm-eval appends the task's gen_prefix after RULER sized the sample: the server sees up to this many tokens more
# than max_seq_length (measured: docs/suites.md, ruler)
RULER_GEN_PREFIX_TOKENS = 64


class RulerWorkload(StrictModel):
    """lm-eval's synthetic RULER tasks (harness/measure/ruler.py) at each length: RULER's max_seq_length counts the
    prompt and the task's answer budget; the first `limit` samples per task and length, generated once per run."""

    name: str
    description: str = ""
    tasks: list[str] = Field(list(RULER_OFFLINE_TASKS), min_length=1)
    max_seq_lengths: list[Positive] = Field(min_length=1)
    limit: Int = Field(ge=1)  # samples per task and length
    num_concurrent: Int = Field(4, ge=1)
    max_retries: Int = Field(2, ge=1)
    tokenizer: str | None = None  # a local tokenizer directory; default: the arm's model files (local or HF cache)

    @model_validator(mode="after")
    def _offline_tasks(self) -> RulerWorkload:
        download = [t for t in self.tasks if t in RULER_DOWNLOAD_TASKS]
        if download:
            raise ValueError(f"tasks {download} download their data (essays, SQuAD, HotpotQA); offline RULER tasks: "
                             f"{', '.join(RULER_OFFLINE_TASKS)}")
        unknown = [t for t in self.tasks if t not in RULER_OFFLINE_TASKS]
        if unknown:
            raise ValueError(f"tasks {unknown} are no RULER task; choose from {', '.join(RULER_OFFLINE_TASKS)}")
        if len(set(self.tasks)) != len(self.tasks) or len(set(self.max_seq_lengths)) != len(self.max_seq_lengths):
            raise ValueError("tasks and max_seq_lengths must not repeat")
        return self

    @property
    def max_len(self) -> int:
        """The most tokens one request may need: the longest sample, answer budget included, + the gen_prefix."""
        return max(self.max_seq_lengths) + RULER_GEN_PREFIX_TOKENS


class CapacityWorkload(PrefixSuffix, StrictModel):
    """The capacity suite's concurrency ramp: `rounds` x level requests per level, prompts never repeated (the KV
    cache really fills), up to the server's saturation and `levels_past_saturation` more."""

    name: str
    description: str = ""
    prefix_tokens: Int = Field(0, ge=0)  # shared by every prompt (a prefix-cache hit after the first)
    suffix_tokens: Int = Field(ge=1)
    output_tokens: Int = Field(ge=2)  # TPOT needs at least two output tokens
    concurrency: list[Positive] = Field(min_length=1)  # increasing: 1, 2, 4, 8, ...
    rounds: Int = Field(2, ge=1)  # requests per level = rounds x concurrency
    max_level_s: Float = Field(600, gt=0)  # a level still running then is cut short and ends the ramp
    levels_past_saturation: Int = Field(1, ge=0)
    saturation_kv_usage: Float = Field(0.95, gt=0, le=1)  # peak vllm:kv_cache_usage_perc at or above: saturated
    saturation_waiting_share: Float = Field(0.5, gt=0, le=1)  # share of the level's /metrics points with requests
    # waiting at or above: a sustained queue, saturated
    seed: Int = 0
    metrics_interval_s: Float = Field(0.1, gt=0)
    vocab_size: Int | None = Field(None, ge=16)  # for hub models whose config.json is not local
    exclude_token_ids: list[TokenId] = []

    @model_validator(mode="after")
    def _increasing(self) -> CapacityWorkload:
        if any(b <= a for a, b in zip(self.concurrency, self.concurrency[1:], strict=False)):
            raise ValueError(f"concurrency must increase: {self.concurrency}")
        return self


def prompt_set_model(family: str) -> type[PromptSetWorkload]:
    """The PromptSetWorkload model of a catalogue reference-check family (its `family`)."""
    models = {m.family: m for m in PromptSetWorkload.__subclasses__()}
    if family not in models:
        raise ConfigError(f"the suite catalogue names workload family {family!r}, and no PromptSetWorkload in "
                          f"harness/config/workloads.py reads it (known: {', '.join(sorted(models))})")
    return models[family]


# Each workload family (a key under an arm's `workloads:`; the suites that run it are in harness/config/suites.py):
# its default configs/workloads/<name>.yaml and the model that file is read with.
FAMILIES: dict[str, tuple[str, type[BaseModel]]] = {
    "long_prefix": ("long_prefix_120k", LongPrefixWorkload),
    "gsm8k": ("gsm8k_full", Gsm8kWorkload),
    "spec_decode": ("spec_decode_gpu", SpecDecodeWorkload),
    "ruler": ("ruler_kimi", RulerWorkload),
    "capacity": ("capacity_gpu", CapacityWorkload),
    # the catalogue's reference-check suites (harness/config/suites.py `refcheck`): a PromptSetWorkload each
    **{family: (default, prompt_set_model(family)) for family, default in prompt_set_families().items()},
    # the catalogue's timing suites (harness/config/suites.py MetricGate): one family each, a MetricWorkload
    **{family: (default, MetricWorkload) for family, default in metric_families().items()},
}


def workload_for(arm: Arm, key: str) -> str:
    """The workload an arm's YAML chose for a workload family, else the family's default."""
    return getattr(arm.workloads, key) or FAMILIES[key][0]


def workload_kind(key: str) -> type[BaseModel]:
    return FAMILIES[key][1]
