"""The reference checks' prompt set (prefix_reuse, graph_replay, teacher_forcing): the candidate's reference_checks
workload, each prompt's reference output captured alone."""

from __future__ import annotations

from harness.measure.generation import Sampling
from harness.records.started_run import StartedRun
from harness.refcheck.prompt_sets.registry import PromptSet, candidate_workload
from harness.refcheck.prompts.check_prompts import CheckPrompts, build_check_prompts

CHECKS = "reference_checks"


def build(run: StartedRun, candidate: str) -> tuple[CheckPrompts, Sampling]:
    w, _, space = candidate_workload(run, candidate, CHECKS)
    return build_check_prompts(w, space), Sampling(w.output_tokens, w.top_logprobs)


PROMPT_SETS = (PromptSet(CHECKS, CHECKS, "reference_outputs", build),)
