"""Driving a live server through the reference checks' prompts (I/O): capture reference outputs, or send
batches to the candidate and compare each output as it arrives.

Comparisons are appended to a JSONL file as they are made, so a server that dies mid-check leaves every
comparison already made on disk, and the check reports where it stopped.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.config.errors import HarnessError, LaunchError
from harness.measure.generation import Generation, Sampling, generate_batch
from harness.records.schema import ReferenceCheckFields, RequestComparison
from harness.refcheck.compare import compare_outputs, judge_comparisons, summary_fields
from harness.refcheck.prompts import CheckPrompt
from harness.serve.launch import LiveServer
from harness.serve.serverlog import tail


def send(live: LiveServer, batch: list[CheckPrompt], sampling: Sampling,
         cache_salt: str | None = None) -> list[Generation]:
    return asyncio.run(generate_batch(live.info.base_url, live.arm.model.served_name, [p.tokens for p in batch],
                                      sampling, live.arm.timeouts.request_s, live.server.check_alive, cache_salt))


def capture(live: LiveServer, prompts: list[CheckPrompt], sampling: Sampling) -> dict[str, Generation]:
    """One prompt at a time, each under its own cache salt: the reference computes every output alone and from
    scratch, even on an arm with prefix caching on (gpu-tp2), where the probes would otherwise hit the warm prompt."""
    return {p.id: send(live, [p], sampling, cache_salt=f"reference-{p.id}")[0] for p in prompts}


@dataclass
class BatchComparisons:
    comparisons: list[RequestComparison] = field(default_factory=list)
    aborted: str | None = None  # why the check stopped early (server death, request error), with the log tail
    outputs: dict[str, list[int]] = field(default_factory=dict)  # prompt id -> the candidate's tokens (degeneration)
    generations: dict[str, Generation] = field(default_factory=dict)  # prompt id -> the candidate's output (hit_miss)


def compare_batches(live: LiveServer, batches: list[list[CheckPrompt]], sampling: Sampling,
                    reference: dict[str, Generation], sink: Path) -> BatchComparisons:
    """Each batch in flight at once; every output compared with the reference output for the same prompt id."""
    compared = BatchComparisons()
    sink.parent.mkdir(parents=True, exist_ok=True)
    with sink.open("a") as f:
        for batch in batches:
            try:
                outputs = send(live, batch, sampling)
            except LaunchError as exc:  # the server died: its message already carries the log tail
                compared.aborted = f"{batch[0].group}: {exc}"
                return compared
            except HarnessError as exc:  # a request failed: add what the server logged
                compared.aborted = f"{batch[0].group}: {exc}\nserver log tail:\n{tail(live.server.log_text(), 15)}"
                return compared
            for p, out in zip(batch, outputs, strict=True):
                compared.outputs[p.id] = out.token_ids
                compared.generations[p.id] = out
                c = compare_outputs(p.id, len(p.tokens), out, reference[p.id], p.group)
                compared.comparisons.append(c)
                f.write(c.model_dump_json() + "\n")
                f.flush()
    return compared


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
