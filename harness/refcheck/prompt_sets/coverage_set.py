"""output_coverage's prompt set: the candidate's cells (its chunk budget, DCP size and max_model_len place some of
them) and its session, captured by capture_coverage (every cell alone, the session turn by turn on the reference's
own outputs)."""

from __future__ import annotations

from harness.measure.generation import Generation, Sampling
from harness.records.started_run import StartedRun
from harness.refcheck.prompt_sets.registry import PromptSet, candidate_workload
from harness.refcheck.prompts.coverage_cells import CoveragePrompts, build_coverage_prompts
from harness.refcheck.send.coverage_send import capture_coverage

COVERAGE = "output_coverage"


def build(run: StartedRun, candidate: str) -> tuple[CoveragePrompts, Sampling]:
    w, arm, space = candidate_workload(run, candidate, COVERAGE)
    prompts = build_coverage_prompts(w, space, arm)
    return prompts, Sampling(prompts.max_tokens, w.top_logprobs)


def capture(live, prompts: CoveragePrompts, sampling: Sampling) -> dict[str, Generation]:
    return capture_coverage(live, prompts, sampling.top_logprobs)


PROMPT_SETS = (PromptSet(COVERAGE, COVERAGE, "coverage_outputs", build, capture),)
