"""Gate thresholds from configs/gates.yaml: small parsed objects, defaults merged with an arm's own section.

The judgements that use them are in harness.judge."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator

from harness.config.errors import ConfigError
from harness.config.files import Bool, Float, Int, StrictModel, deep_merge, field_errors, read_yaml
from harness.config.paths import GATES_FILE
from harness.config.suites import drift_checks, metric_gates


class LongPrefixGates(StrictModel):
    tpot_p50_tolerance: Float = Field(0.05, ge=0)
    max_failed_requests: Int = Field(0, ge=0)
    cold_start_tpot_factor: Float = Field(2.0, gt=1)
    # False: the timing gates (TPOT vs reference, cold start) are computed and recorded but do not fail the run.
    enforce_timing: Bool = True
    # Reference outputs teacher-forced on the candidate after its levels (a sample of the timed requests; each one
    # prefills its whole prompt again, without the prefix cache). 0: free-generation comparison only.
    teacher_forced_requests: Int = Field(2, ge=0)


class Gsm8kGates(StrictModel):
    filter: str = "strict-match"
    mcnemar_alpha: Float = Field(0.05, gt=0, lt=1)
    max_request_errors: Int = Field(0, ge=0)
    min_accuracy: Float | None = Field(None, ge=0, le=1)  # absolute floor on the candidate's accuracy
    wilson_floor: Float | None = Field(None, ge=0, le=1)  # the candidate's 95% Wilson lower bound must reach it
    # A gate whose data can show no drop at mcnemar_alpha (0/16 against 0/16) reads "PASS (no signal: ...)"; true:
    # it FAILS instead; null: true in a strict run (--strict, CI=true), resolved when the run starts (for_run).
    require_signal: Bool | None = None
    # how many answers may differ from the reference's token by token, set per arm on a good build; null: not judged
    max_diverged_answers: Int | None = Field(None, ge=0)


class RulerGates(StrictModel):
    """RULER through lm-eval (suites/test_ruler.py): the paired exact McNemar on per-sample correctness, pooled and
    per length, each test at mcnemar_alpha / (1 + lengths) (Bonferroni: the gate is one verdict)."""

    mcnemar_alpha: Float = Field(0.05, gt=0, lt=1)
    max_request_errors: Int = Field(0, ge=0)  # per arm, after retries
    # As gsm8k's: samples that can show no drop (the reference found no needle) read "PASS (no signal: ...)"; true:
    # FAIL instead; null: true in a strict run, resolved when the run starts (for_run).
    require_signal: Bool | None = None


# The checks that compare outputs with a limit on drift: what `drift_limits` may name, from the suite catalogue
# (capacity's per-level checks capacity_outputs_c<N> go by "capacity_outputs", graph_replay's eager-variant comparison
# by "graph_replay_eager", long_context's bursts by "long_context_bursts").
DRIFT_CHECKS = drift_checks()


def drift_check_key(check: str) -> str:
    """The name a per-check setting goes by (capacity's per-level checks capacity_outputs_c<N>: capacity_outputs)."""
    return "capacity_outputs" if check.startswith("capacity_outputs_c") else check


def known_drift_checks(value: dict[str, float], key: str) -> dict[str, float]:
    unknown = sorted(set(value) - set(DRIFT_CHECKS))
    if unknown:  # a misspelt check would leave the default in force, silently
        raise ValueError(f"unknown check(s) {', '.join(unknown)}: {key} names checks among {', '.join(DRIFT_CHECKS)}")
    return value


class ReferenceCheckGates(StrictModel):
    drift_limit: Float = Field(1e-2, gt=0)  # max |delta logprob| of the chosen tokens before any divergence
    # {check: limit} where one check's prompts drift unlike another's (docs/gates.md, "ceilings"); else drift_limit
    drift_limits: dict[str, Annotated[Float, Field(gt=0)]] = {}
    tie_gap: Float = Field(0.0, ge=0)  # a divergence where the reference's top-2 gap is <= this is a tie flip
    # Per check, as drift_limits, for a check no calibration covers whose measured clean flips differ: {check: gap}
    tie_gaps: dict[str, Annotated[Float, Field(ge=0)]] = {}
    # An output check without a calibration (harness calibrate) or an accepted floor for the pair: True fails it
    # ("not calibrated"), False judges it by the limits above alone and says no shift below the limit could be seen.
    require_floor: bool = False

    @field_validator("drift_limits", "tie_gaps")
    @classmethod
    def _known_checks(cls, value: dict[str, float], info: ValidationInfo) -> dict[str, float]:
        return known_drift_checks(value, info.field_name)

    def limit_for(self, check: str) -> float:
        """The drift limit of one check (capacity_outputs_c8 goes by capacity_outputs)."""
        return self.drift_limits.get(drift_check_key(check), self.drift_limit)

    def tie_gap_for(self, check: str) -> float:
        """The tie gap of one check (capacity_outputs_c8 goes by capacity_outputs)."""
        return self.tie_gaps.get(drift_check_key(check), self.tie_gap)


class CalibrationGates(StrictModel):
    """What `harness calibrate` may derive: repeats needed, each derived value's ceiling and how far a limit may move
    before only --trust stores it (measured reasons beside each value in gates.yaml)."""

    min_repeats: Int = Field(5, ge=2)  # clean repeats a calibration needs (K)
    logit_step: Float = Field(0.125, gt=0)  # the arm's logit-quantisation step at its model's logit scale (nats)
    max_drift_limit: Float = Field(0.25, gt=0)  # ceiling of a derived drift limit (nats)
    # Per check, where its prompts' clean drift differs (as reference_checks.drift_limits): {check: ceiling}
    max_drift_limits: dict[str, Annotated[Float, Field(gt=0)]] = {}
    max_tie_gap: Float = Field(1.0, ge=0)  # ceiling of a derived tie gap (nats)
    max_drift_p50: Float = Field(0.0625, gt=0)  # ceiling of the clean repeats' median per-position |delta| (nats)
    # The degeneration detector's calibrated values (harness/judge/degeneration.clean_flips): above these a clean
    # count or collapse would switch the tie-flip cap or the after-flip limit off for good
    max_tie_flip_rate: Float = Field(0.5, ge=0, le=1)  # clean tie flips a repeat / outputs (mean, rounded up)
    max_tie_flip_rates: dict[str, Annotated[Float, Field(ge=0, le=1)]] = {}  # per check, where it differs
    max_span_fraction_delta: Float = Field(0.5, ge=0, le=1)  # largest clean span-fraction rise after a flip
    max_distinct_2_delta: Float = Field(0.35, ge=0, le=1)  # largest clean distinct-2 drop after a flip
    max_move_factor: Float = Field(2.0, gt=1)  # a limit moving more than this x from the previous one: --trust only

    @field_validator("max_drift_limits", "max_tie_flip_rates")
    @classmethod
    def _known_checks(cls, value: dict[str, float], info: ValidationInfo) -> dict[str, float]:
        return known_drift_checks(value, f"calibration.{info.field_name}")

    def tie_flip_ceiling(self, check: str) -> tuple[float, str]:
        """The ceiling of `check`'s clean tie-flip rate and the gates.yaml key that sets it."""
        key = drift_check_key(check)
        if key in self.max_tie_flip_rates:
            return self.max_tie_flip_rates[key], f"calibration.max_tie_flip_rates.{key}"
        return self.max_tie_flip_rate, "calibration.max_tie_flip_rate"

    def drift_ceiling(self, check: str) -> tuple[float, str]:
        """The ceiling of `check`'s drift limit and the gates.yaml key that sets it."""
        key = drift_check_key(check)
        if key in self.max_drift_limits:
            return self.max_drift_limits[key], f"calibration.max_drift_limits.{key}"
        return self.max_drift_limit, "calibration.max_drift_limit"


class LongContextGates(StrictModel):
    """The long_context suite: outputs are judged with reference_checks' limit_for("long_context") and tie_gap; this
    adds how much less of each needle span the candidate may copy than the reference did (copy accuracy, 0-1, per
    cell)."""

    retrieval_margin: Float = Field(0.1, ge=0, le=1)


class CapacityGates(StrictModel):
    """The capacity suite: a request meets the SLO when both its TPOT and its TTFT are within these; a level meets it
    when its p99s do, every request succeeded and its outputs equal the reference's (harness/judge/capacity.py)."""

    slo_tpot_p99_ms: Float = Field(100.0, gt=0)
    slo_ttft_p99_ms: Float = Field(10000.0, gt=0)
    # The candidate's highest level meeting the SLO must be at least this x the reference's.
    min_ratio: Float = Field(1.0, gt=0)
    # Where set and both arms' KV capacities are recorded: the ratio asked is at least this share of the candidate's
    # KV-capacity ratio (DCP's extra KV must turn into served requests), capped by what the ramp can show.
    kv_ratio_share: Float | None = Field(None, gt=0, le=1)
    knee_gain: Float = Field(0.1, gt=0)  # the knee: the last level raising throughput by this over the one before
    max_failed_requests: Int = Field(0, ge=0)


class DcpOpsGates(StrictModel):
    """Factors of the op-level limits (harness/opcheck/tolerance.py derives each case's limit from its dtypes)."""

    k_out: Float = Field(4.0, gt=0)  # roundings of the combined output, in units of eps(output dtype)
    k_lse: Float = Field(16.0, gt=0)  # LSE error, in units of eps(lse dtype) x (1 + max|lse|)


class DegenerationGates(StrictModel):
    """A candidate's output fails when it is clearly more repetitive than the reference's for the same prompt
    (harness/judge/degeneration.py)."""

    min_span: Int = Field(8, ge=2)  # a repeated span shorter than this never fails (units: tokens or words)
    span_fraction_margin: Float = Field(0.25, gt=0, le=1)  # candidate span / length minus the reference's
    distinct_2_margin: Float = Field(0.25, gt=0, le=1)  # reference distinct-2 minus the candidate's
    max_period: Int = Field(16, ge=1)  # longest unit a loop may have
    # a run of one token id at least this long, and over twice the reference's run of that id, fails (token_runs.py)
    min_token_run: Int = Field(8, ge=2)
    # Tie flips (outputs that first diverged where the reference's top-2 gap is within the tie gap): their count is
    # capped by a one-sided Fisher exact test of this run's rate against the clean rate, at this false-alarm rate.
    tie_flip_alpha: Float = Field(0.01, gt=0, lt=1)
    # Without a calibration (or one that measured no rate): the clean counts the cap is tested against ...
    clean_outputs: Int = Field(14, ge=1)  # one repeat's outputs (degeneration.clean_flips says why)
    clean_tie_flips: Int = Field(9, ge=0)
    # ... and the largest clean (candidate minus reference) span-fraction rise and distinct-2 drop of an output
    # after its tie flip: a flipped output fails a margin above these (harness/judge/degeneration.py).
    clean_span_fraction_delta: Float = Field(0.3125, ge=0, le=1)
    clean_distinct_2_delta: Float = Field(0.175, ge=0, le=1)

    @field_validator("clean_tie_flips")
    @classmethod
    def _a_rate(cls, value: int, info) -> int:
        outputs = info.data.get("clean_outputs")
        if outputs is not None and value > outputs:
            raise ValueError(f"clean_tie_flips {value} > clean_outputs {outputs}: a rate above 1")
        return value


class SpecDecodeGates(StrictModel):
    """Speculative decoding (suites/test_spec_decode.py, harness/judge/spec_decode_gates.py)."""

    min_acceptance_length: Float = Field(1.5, ge=1)  # mean 1 + accepted / drafts over the prompt set
    curve_noise_z: Float = Field(3.0, ge=0)  # a later position may exceed an earlier one by z binomial sd
    curve_abs_tolerance: Float = Field(0.02, ge=0)  # ... plus this
    collapse_rate: Float = Field(0.99, gt=0, le=1)  # a position accepted at least this often is a collapse
    # A reference whose outputs are this repetitive (mean longest-span fraction) is trivially predictable: there a
    # draft that is always right is no collapse.
    trivially_predictable_span: Float = Field(0.75, gt=0, le=1)
    min_speedup: Float | None = Field(None, gt=0)  # optional: reference TPOT p50 / candidate TPOT p50 floor
    max_failed_requests: Int = Field(0, ge=0)


class MetricGateLimits(StrictModel):
    """A catalogue timing gate's limits for an arm (gates.yaml `metric_gates.<gate>`): the catalogue's MetricGate
    gives the default tolerance; a section here replaces it for that arm (and the arms that extend it)."""

    tolerance: Float | None = Field(None, ge=0)  # None: the catalogue's
    enforce: Bool = True  # False: computed and recorded, not enforced (two shared CPU cores time noise)
    # set by load_gates from the arm files: a tolerance measured on another device does not judge it (None: older runs)
    arm_device: Literal["gpu", "cpu"] | None = None


class CoverageGates(StrictModel):
    """How far outputs were checked against how far the run was timed (the headline states both)."""

    # True: a run timed at a longer context than any of its output checks reached fails (gate
    # coverage_checked_to_timed); False: the headline says so and nothing fails.
    require_checked_to_timed: Bool = False


class Gates(StrictModel):
    long_prefix: LongPrefixGates = LongPrefixGates()
    coverage: CoverageGates = CoverageGates()
    gsm8k: Gsm8kGates = Gsm8kGates()
    ruler: RulerGates = RulerGates()
    reference_checks: ReferenceCheckGates = ReferenceCheckGates()
    long_context: LongContextGates = LongContextGates()
    capacity: CapacityGates = CapacityGates()
    dcp_ops: DcpOpsGates = DcpOpsGates()
    spec_decode: SpecDecodeGates = SpecDecodeGates()
    degeneration: DegenerationGates = DegenerationGates()
    calibration: CalibrationGates = CalibrationGates()
    metric_gates: dict[str, MetricGateLimits] = {}  # by gate name: the catalogue's timing gates (config/suites.py)

    @field_validator("metric_gates")
    @classmethod
    def _known_gates(cls, value: dict) -> dict:
        unknown = sorted(set(value) - set(metric_gates()))
        if unknown:  # a misspelt gate would leave the catalogue's tolerance in force, silently
            raise ValueError(f"unknown gate(s) {', '.join(unknown)}: metric_gates names the catalogue's timing gates "
                             f"({', '.join(sorted(metric_gates()))})")
        return value


def lineage(arm: str, arms_dir: Path | None = None) -> list[str]:
    """The arm and the arms it `extends:`, the farthest ancestor first; the name alone when no arm file has it."""
    from harness.config.arms import ARMS_DIR, resolve_raw

    try:
        _, files = resolve_raw(arm, arms_dir or ARMS_DIR)
    except ConfigError:
        return [arm]
    return [f.stem for f in reversed(files)]


def arm_device(arm: str, arms_dir: Path | None = None) -> str | None:
    """The device an arm's files name ("gpu" unless they say "cpu"); None when no arm file has the name."""
    from harness.config.arms import ARMS_DIR, resolve_raw

    try:
        raw, _ = resolve_raw(arm, arms_dir or ARMS_DIR)
    except ConfigError:
        return None
    return raw.get("device", "gpu")


def with_arm_device(gates: Gates, device: str | None) -> Gates:
    """Every catalogue timing gate's limits told the arm's device (harness/judge/metric_gate.py reads it)."""
    if device is None:
        return gates
    limits = {name: gates.metric_gates.get(name, MetricGateLimits()).model_copy(update={"arm_device": device})
              for name in metric_gates()}
    return gates.model_copy(update={"metric_gates": limits})


def load_gates(arm: str, path: Path = GATES_FILE, arms_dir: Path | None = None) -> Gates:
    """Defaults, then the sections of the arm's `extends:` ancestors, then the arm's own section: an arm made from
    another (a planted-fault variant, an eager twin) is judged with its base's limits unless it sets its own."""
    raw = read_yaml(path)
    unknown = set(raw) - {"defaults", "arms", "baseline"}  # baseline: read by harness.judge.baseline
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key(s) {sorted(unknown)}; expected defaults, arms, baseline")
    merged = raw.get("defaults") or {}
    for name in lineage(arm, arms_dir):
        merged = deep_merge(merged, (raw.get("arms") or {}).get(name) or {})
    set_by_hand = [g for g, limits in (merged.get("metric_gates") or {}).items()
                   if isinstance(limits, dict) and "arm_device" in limits]
    if set_by_hand:
        raise ConfigError(f"{path}: metric_gates.{set_by_hand[0]}.arm_device for arm {arm!r}: the device comes from "
                          "the arm's files (configs/arms), not gates.yaml; remove it")
    try:
        return with_arm_device(Gates.model_validate(merged), arm_device(arm, arms_dir))
    except ValidationError as exc:
        raise ConfigError(f"{path}: invalid gates for arm {arm!r}: {'; '.join(field_errors(exc))}") from None


def for_run(gates: Gates, strict: bool) -> Gates:
    """The thresholds a run judges with: what the arm's section leaves to the run (require_signal: null) follows
    whether the run is strict. run.json records the result, so a report re-rendered anywhere judges the same."""
    update = {name: section.model_copy(update={"require_signal": strict})
              for name, section in (("gsm8k", gates.gsm8k), ("ruler", gates.ruler)) if section.require_signal is None}
    return gates.model_copy(update=update) if update else gates


class BaselineThresholds(StrictModel):
    # TPOT per arm and concurrency, from the per-request samples of both runs: flagged only when the one-sided
    # Mann-Whitney test rejects "no slower" at tpot_alpha AND the median moved by more than the effect size.
    tpot_alpha: Float = Field(0.05, gt=0, lt=1)
    tpot_effect_size: Float = Field(0.10, ge=0)  # relative increase of the median TPOT
    tpot_effect_size_per_arm: dict[str, Float] = {}  # arms whose timing noise between runs is larger (CPU pair)
    tpot_not_enforced: list[str] = []  # arms whose TPOT flags are shown without failing the run
    kv_tokens_rel_decrease: Float = Field(0.01, ge=0)  # flag KV capacity more than 1% below the baseline's
    accuracy_alpha: Float = Field(0.05, gt=0, lt=1)  # flag lower accuracy when the test rejects equality
    filter: str = "strict-match"


def load_thresholds(path: Path = GATES_FILE) -> BaselineThresholds:
    try:
        return BaselineThresholds.model_validate(read_yaml(path).get("baseline") or {})
    except ValidationError as exc:
        raise ConfigError(f"{path}: invalid baseline thresholds: {'; '.join(field_errors(exc))}") from None
