"""Gates from configs/gates.yaml: small parsed objects; each check returns a failure sentence or None."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.config.arms import deep_merge, read_yaml
from harness.config.errors import ConfigError
from harness.config.paths import CONFIG_DIR
from harness.judge.stats import mcnemar_exact_p, wilson_interval

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


class Gates(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    long_prefix: LongPrefixGates = LongPrefixGates()
    gsm8k: Gsm8kGates = Gsm8kGates()
    reference_checks: ReferenceCheckGates = ReferenceCheckGates()


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
        fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{path}: invalid gates for arm {arm!r}: {fields}") from None


def tpot_regression(arm: str, ref: str, conc: int, cand_p50: float | None, ref_p50: float | None,
                    tolerance: float) -> str | None:
    if cand_p50 is None or ref_p50 is None:
        missing = arm if cand_p50 is None else ref
        return f"c{conc}: no TPOT p50 for {missing}: cannot compare"
    limit = ref_p50 * (1 + tolerance)
    if cand_p50 > limit:
        return (f"c{conc}: {arm} TPOT p50 {cand_p50 * 1e3:.3f} ms > {ref} {ref_p50 * 1e3:.3f} ms x "
                f"(1 + {tolerance:g}) = {limit * 1e3:.3f} ms")
    return None


def failed_requests(arm: str, conc: int, failed: int, limit: int) -> str | None:
    if failed > limit:
        return f"{arm} c{conc}: {failed} failed request(s), at most {limit} allowed"
    return None


def cold_start(arm: str, tpot_s: float | None, steady_p50_s: float | None, factor: float) -> str | None:
    """A DCP transport not warmed before graph capture specialises on first use: it shows here."""
    if tpot_s is None or steady_p50_s is None:
        return None
    if tpot_s > factor * steady_p50_s:
        return (f"{arm}: cold-start TPOT {tpot_s * 1e3:.3f} ms > {factor:g} x steady-state p50 "
                f"{steady_p50_s * 1e3:.3f} ms")
    return None


def paired_accuracy(cand: dict[int, bool], ref: dict[int, bool]) -> tuple[int, int, int]:
    """(questions in both, b = only the reference right, c = only the candidate right)."""
    common = cand.keys() & ref.keys()
    b = sum(1 for q in common if ref[q] and not cand[q])
    c = sum(1 for q in common if cand[q] and not ref[q])
    return len(common), b, c


def mcnemar_regression(arm: str, ref: str, b: int, c: int, alpha: float) -> str | None:
    """Fails only when the candidate is worse and the paired exact test rejects equal accuracy."""
    p = mcnemar_exact_p(b, c)
    if b > c and p < alpha:
        return (f"{arm} is less accurate than {ref}: {b} questions only {ref} got right vs {c} only {arm} got right "
                f"(exact McNemar p = {p:.4f} < {alpha:g})")
    return None


def accuracy_floors(arm: str, correct: int, n: int, min_accuracy: float | None,
                    wilson_floor: float | None) -> list[str]:
    out = []
    acc = correct / n if n else 0.0
    if min_accuracy is not None and acc < min_accuracy:
        out.append(f"{arm}: accuracy {acc:.2%} ({correct}/{n}) below the floor {min_accuracy:.2%}")
    if wilson_floor is not None:
        lo, _ = wilson_interval(correct, n)
        if lo < wilson_floor:
            out.append(f"{arm}: 95% Wilson lower bound {lo:.2%} ({correct}/{n}) below the floor {wilson_floor:.2%}")
    return out


def kv_capacity_agrees(arm: str, log_tokens: int, metrics_tokens: int | None) -> str | None:
    """The log's KV tokens must equal /metrics kv_cache_size_tokens (older vLLMs do not export it: no check)."""
    if metrics_tokens is None or metrics_tokens == log_tokens:
        return None
    return f"arm {arm!r}: log says {log_tokens} KV tokens, /metrics kv_cache_size_tokens says {metrics_tokens}"


def prefix_hit_proven(arm: str, hits: float | None, expected: int, caching_on: bool) -> str | None:
    """The probes' partial-prefix hit, proven by the vllm:prefix_cache_hits counter delta over them."""
    if not caching_on:
        return f"arm {arm!r} has prefix caching off: a partial-prefix hit cannot happen, enable it to run this check"
    if hits is None:
        return f"arm {arm!r}: /metrics has no vllm:prefix_cache_hits counter; the partial hit cannot be proven"
    if hits < expected:
        return (f"arm {arm!r}: prefix-cache hits over the probes {hits:g} tokens < {expected} expected "
                "(the shared part was not reused)")
    return None
