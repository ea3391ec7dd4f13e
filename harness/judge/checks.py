"""Checks on one arm's own figures (pure): each returns the failure sentence, or None when the check holds."""

from __future__ import annotations

from harness.config.thresholds import LongPrefixGates
from harness.judge.stats import wilson_interval
from harness.records.schema import ColdStartRecord, LongPrefixRecord


def failed_requests(arm: str, conc: int, failed: int, limit: int) -> str | None:
    if failed > limit:
        return f"{arm} c{conc}: {failed} failed request(s), at most {limit} allowed"
    return None


def cold_start(arm: str, tpot_s: float | None, steady_p50_s: float | None, factor: float,
               no_data: str | None = None) -> str | None:
    """A DCP transport not warmed before graph capture specialises on first use: it shows here. Without both TPOTs
    it fails "no data: <no_data>", never passes (a buffered first request or a void c1 level judged nothing)."""
    if tpot_s is None or steady_p50_s is None:
        why = no_data or ("no cold-start TPOT" if tpot_s is None else "no steady-state TPOT p50")
        return f"{arm}: cold-start check: no data: {why}"
    if tpot_s > factor * steady_p50_s:
        return (f"{arm}: cold-start TPOT {tpot_s * 1e3:.3f} ms > {factor:g} x steady-state p50 "
                f"{steady_p50_s * 1e3:.3f} ms")
    return None


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


def long_prefix_failures(arm: str, levels: list[LongPrefixRecord], cold: ColdStartRecord,
                         limits: LongPrefixGates) -> tuple[list[str], list[str]]:
    """(failures, warnings) of one arm's long-prefix run: failed requests per level, the cold start (a warning
    where gates.yaml does not enforce timing; no data is a failure where it does), a failed warm-up request (its own
    failure: no cold-start line beside it)."""
    failures = [failed_requests(arm, r.concurrency, r.failed, limits.max_failed_requests) for r in levels]
    slow = None if cold.error else cold_start(arm, cold.tpot_s, cold.steady_tpot_p50_s, cold.factor_limit,
                                              cold.no_data)
    warnings = [f"not enforced (gates.yaml): {slow}"] if slow and not limits.enforce_timing else []
    failures += [slow if limits.enforce_timing else None,
                 f"{arm}: warm-up request failed: {cold.error}" if cold.error else None]
    return [f for f in failures if f], warnings


def attention_backend_fallback(arm: str, expected: str | None, selected: list[str]) -> str | None:
    """A silent fallback to another attention backend is a failed check, not a footnote."""
    shown = selected[0] if selected else None
    if expected is None or shown == expected:
        return None
    if shown is None:
        return f"arm {arm!r}: expected {expected}, but the server log names no attention backend"
    return f"arm {arm!r}: expected {expected}, vLLM selected {shown} (silent fallback)"
