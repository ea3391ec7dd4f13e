"""The long_context grid's prompt sets: its cells (lengths x depths) and its sweep at this run's lengths (the run's
length seed), each cell's reference output captured alone and cold; needles from the candidate's model dir."""

from __future__ import annotations

from harness.measure.generation import Sampling
from harness.records.started_run import StartedRun
from harness.refcheck.prompt_sets.registry import PromptSet, candidate_workload
from harness.refcheck.prompts.long_context import (
    LongContextPrompts,
    build_long_context_prompts,
    build_sweep_prompts,
    read_needle_tokens,
)

LONG_CONTEXT, LONG_CONTEXT_SWEEP = "long_context", "long_context_sweep"


def published_needles(run: StartedRun, candidate: str) -> list[int] | None:
    model = run.arm(candidate).model
    return read_needle_tokens(model.local_dir() if model.source == "local" else None)


def build_grid(run: StartedRun, candidate: str) -> tuple[LongContextPrompts, Sampling]:
    w, _, space = candidate_workload(run, candidate, LONG_CONTEXT)
    return (build_long_context_prompts(w, space, published_needles(run, candidate)),
            Sampling(w.output_tokens, w.top_logprobs))


def build_sweep(run: StartedRun, candidate: str) -> tuple[LongContextPrompts, Sampling]:
    """The sweep's cells: captured anew whenever the length seed draws lengths the store does not hold; none where
    the workload plans no sweep (its fixture then starts no server)."""
    w, _, space = candidate_workload(run, candidate, LONG_CONTEXT)
    return (build_sweep_prompts(w, space, run.length_seed, published_needles(run, candidate)),
            Sampling(w.output_tokens, w.top_logprobs))


PROMPT_SETS = (PromptSet(LONG_CONTEXT, LONG_CONTEXT, "long_context_outputs", build_grid),
               PromptSet(LONG_CONTEXT_SWEEP, LONG_CONTEXT, "long_context_sweep_outputs", build_sweep))
