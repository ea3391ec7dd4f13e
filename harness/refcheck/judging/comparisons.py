"""The comparisons a reference check made (BatchComparisons: every comparison, the candidate's outputs, why it stopped
early) and what they give: the check's record fields, the degeneration detector's pairs, the diverged outputs kept for
re-judging. Senders fill a BatchComparisons as each output arrives (batches.py, long_context_grid.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.measure.generation import Generation
from harness.records.schema import ReferenceCheckFields, RequestComparison
from harness.refcheck.judging.compare import judge_comparisons, summary_fields


@dataclass
class BatchComparisons:
    comparisons: list[RequestComparison] = field(default_factory=list)
    aborted: str | None = None  # why the check stopped early (server death, request error), with the log tail
    outputs: dict[str, list[int]] = field(default_factory=dict)  # prompt id -> the candidate's tokens (degeneration)
    generations: dict[str, Generation] = field(default_factory=dict)  # prompt id -> the candidate's output (hit_miss)


def record_fields(check: str, reference: str, stored_key: str, compared: BatchComparisons, drift_limit: float,
                  sink: Path, extra_failures: list[str] = (), tie_gap: float = 0.0) -> ReferenceCheckFields:
    """The check's verdict and numbers from the comparisons made; `diverged` lists every failure."""
    verdict = judge_comparisons(check, compared.comparisons, drift_limit, tie_gap)
    failures = [*extra_failures, *verdict.failures]
    if compared.aborted:
        failures.insert(0, f"aborted after {len(compared.comparisons)} comparison(s): "
                           f"{compared.aborted.splitlines()[0]}")
    return ReferenceCheckFields(check=check, reference=reference, reference_key=stored_key, passed=not failures,
                                detail="; ".join([verdict.detail, *extra_failures]), drift_limit=drift_limit,
                                diverged=failures, status="aborted" if compared.aborted else "complete",
                                reason=compared.aborted, comparisons_path=str(sink),
                                **summary_fields(compared.comparisons, tie_gap))


def degeneration_pairs(compared: BatchComparisons,
                       reference: dict[str, Generation]) -> list[tuple[str, list[int], list[int]]]:
    """(request, candidate tokens, reference tokens) for the degeneration detector, in the order they were sent."""
    return [(pid, tokens, reference[pid].token_ids) for pid, tokens in compared.outputs.items() if pid in reference]


def write_diverged_outputs(compared: BatchComparisons, reference: dict[str, Generation], path: Path) -> None:
    """Both sides' tokens of every request that diverged: the record a degeneration or tie-flip verdict can be
    re-judged from (and turned into a unit test) after the machine is gone."""
    with path.open("w") as f:
        for c in compared.comparisons:
            if not c.exact and c.request in compared.outputs and c.request in reference:
                f.write(json.dumps({"request": c.request, "first_divergence": c.first_divergence,
                                    "reference_gap_at_divergence": c.reference_gap_at_divergence,
                                    "candidate": compared.outputs[c.request],
                                    "reference": reference[c.request].token_ids}) + "\n")
