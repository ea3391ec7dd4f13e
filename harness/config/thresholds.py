"""Gate thresholds from configs/gates.yaml: small parsed objects, defaults merged with an arm's own section.

The judgements that use them are in harness.judge."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.config.errors import ConfigError
from harness.config.files import deep_merge, field_errors, read_yaml
from harness.config.paths import CONFIG_DIR

GATES_FILE = CONFIG_DIR / "gates.yaml"


class LongPrefixGates(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tpot_p50_tolerance: float = Field(0.05, ge=0)
    max_failed_requests: int = Field(0, ge=0)
    cold_start_tpot_factor: float = Field(2.0, gt=1)
    # False: the timing gates (TPOT vs reference, cold start) are computed and recorded but do not fail the run.
    enforce_timing: bool = True


class Gsm8kGates(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    filter: str = "strict-match"
    mcnemar_alpha: float = Field(0.05, gt=0, lt=1)
    max_request_errors: int = Field(0, ge=0)
    min_accuracy: float | None = Field(None, ge=0, le=1)  # absolute floor on the candidate's accuracy
    wilson_floor: float | None = Field(None, ge=0, le=1)  # the candidate's 95% Wilson lower bound must reach it


class ReferenceCheckGates(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    drift_limit: float = Field(1e-2, gt=0)  # max |delta logprob| of the chosen tokens before any divergence
    tie_gap: float = Field(0.0, ge=0)  # a divergence where the reference's top-2 gap is <= this is a tie flip


class DcpOpsGates(BaseModel):
    """Factors of the op-level limits (harness/opcheck/tolerance.py derives each case's limit from its dtypes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    k_out: float = Field(4.0, gt=0)  # roundings of the combined output, in units of eps(output dtype)
    k_lse: float = Field(16.0, gt=0)  # LSE error, in units of eps(lse dtype) x (1 + max|lse|)


class Gates(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    long_prefix: LongPrefixGates = LongPrefixGates()
    gsm8k: Gsm8kGates = Gsm8kGates()
    reference_checks: ReferenceCheckGates = ReferenceCheckGates()
    dcp_ops: DcpOpsGates = DcpOpsGates()


def load_gates(arm: str, path: Path = GATES_FILE) -> Gates:
    """Defaults merged with the arm's own section."""
    raw = read_yaml(path)
    unknown = set(raw) - {"defaults", "arms", "baseline"}  # baseline: read by harness.judge.baseline
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key(s) {sorted(unknown)}; expected defaults, arms, baseline")
    merged = deep_merge(raw.get("defaults") or {}, (raw.get("arms") or {}).get(arm) or {})
    try:
        return Gates.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(f"{path}: invalid gates for arm {arm!r}: {'; '.join(field_errors(exc))}") from None


class BaselineThresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tpot_p50_rel_increase: float = Field(0.10, ge=0)  # flag TPOT p50 more than 10% above the baseline's
    kv_tokens_rel_decrease: float = Field(0.01, ge=0)  # flag KV capacity more than 1% below the baseline's
    accuracy_alpha: float = Field(0.05, gt=0, lt=1)  # flag lower accuracy when the test rejects equality
    filter: str = "strict-match"


def load_thresholds(path: Path = GATES_FILE) -> BaselineThresholds:
    try:
        return BaselineThresholds.model_validate(read_yaml(path).get("baseline") or {})
    except ValidationError as exc:
        raise ConfigError(f"{path}: invalid baseline thresholds: {'; '.join(field_errors(exc))}") from None
