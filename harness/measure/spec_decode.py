"""One arm through the spec_decode suite's prompt set (I/O): the candidate's fixed greedy prompts, one at a time, after
one unmeasured request; the /metrics spec-decode counter deltas over them (on a drafter), the draft KV policy and KV
capacity the server's log states, and every sample kept. A SpecDecodeMeasurement is what a SpecDecodeRecord is made
of (its judged parts, the repetition of the outputs and the n-gram replay, are judge/spec_decode_gates.py's)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from harness.config.arms import Arm
from harness.config.paths import gsm8k_dir
from harness.config.workloads import SpecDecodeWorkload
from harness.measure.metrics import fetch_metrics
from harness.measure.spec_decode_metrics import (
    SpecCounters,
    SpecSample,
    acceptance_length,
    load_spec_prompts,
    position_rates,
    prompts_sha,
    run_prompts,
    spec_counters,
    timing_fields,
)
from harness.serve.launch import LiveServer
from harness.serve.serverlog import parse_draft_kv, parse_kv_capacity


@dataclass(frozen=True)
class SpecDecodeMeasurement:
    arm: Arm
    workload: str
    prompts_sha: str
    samples: list[SpecSample]
    samples_path: Path
    aborted: str | None  # why the prompts stopped early (the server died); None: every prompt was sent
    counters_seen: bool  # /metrics exported spec-decode counters after the prompts
    counters: SpecCounters | None  # their delta over the prompts, on an arm with a drafter; None otherwise
    draft_kv: str | None  # the draft KV policy the log states, or why none is known (draft_kv_policy)
    draft_kv_declared: str | None
    kv_tokens: int | None  # KV capacity from the log (with the draft on a speculative arm)

    def finished(self) -> list[SpecSample]:
        return [s for s in self.samples if not s.error]

    def record_fields(self) -> dict:
        """The SpecDecodeRecord's measured fields: counters (with vLLM's acceptance length and per-position rates),
        request counts and timings, the log's draft KV and capacity."""
        spec = self.arm.speculative
        counters = {}
        if spec is not None and self.counters is not None:
            d = self.counters
            per_pos = [d.accepted_per_pos.get(i, 0.0) for i in range(spec.num_speculative_tokens)]
            counters = {"drafts": d.drafts, "draft_tokens": d.draft_tokens, "accepted": d.accepted,
                        "accepted_per_pos": per_pos, "acceptance_length": acceptance_length(d.drafts, d.accepted),
                        "position_rates": position_rates(per_pos, d.drafts)}
        return {"workload": self.workload, "prompts_sha": self.prompts_sha,
                "status": "aborted" if self.aborted else "complete", "reason": self.aborted,
                "method": spec.method if spec else None,
                "num_speculative_tokens": spec.num_speculative_tokens if spec else None,
                "draft_kv": self.draft_kv, "draft_kv_declared": self.draft_kv_declared, "kv_tokens": self.kv_tokens,
                "samples_path": str(self.samples_path), **counters, **timing_fields(self.samples)}


def draft_kv_policy(arm: Arm, log_text: str, version: str | None) -> tuple[str | None, str | None]:
    """(observed, declared): the policy the log states, or why none is known; declared only where it matters."""
    spec = arm.speculative
    if spec is None:
        return None, None
    if spec.method in ("ngram", "ngram_gpu", "suffix"):
        return f"none ({spec.method}: no draft model, no draft KV)", None
    stated = parse_draft_kv(log_text)
    observed = stated or f"not logged (vLLM {version or '?'} states no draft KV policy)"
    declared = ("sharded" if arm.dcp_env.shard_draft == "force" else "replicated") if arm.parallelism.dcp > 1 else None
    return observed, declared


def measure_arm(live: LiveServer, w: SpecDecodeWorkload, run_dir: Path) -> SpecDecodeMeasurement:
    """One arm through the candidate's prompt set (counter deltas on a drafter); samples in
    <run_dir>/<arm>/spec_decode_samples.jsonl."""
    arm = live.arm
    prompts = load_spec_prompts(w, gsm8k_dir())
    base = live.info.base_url
    sink = run_dir / arm.name / "spec_decode_samples.jsonl"
    sink.unlink(missing_ok=True)
    # One unmeasured request first: the first one after start pays one-off costs on both arms alike.
    asyncio.run(run_prompts(base, arm.model.served_name, prompts[:1], w, arm.timeouts.request_s,
                            live.server.check_alive, sink.with_name("spec_decode_warmup.jsonl")))
    before = spec_counters(fetch_metrics(base))
    samples, aborted = asyncio.run(run_prompts(base, arm.model.served_name, prompts, w, arm.timeouts.request_s,
                                               live.server.check_alive, sink))
    after = spec_counters(fetch_metrics(base)) if not aborted else None
    delta = (after.minus(before) if before else after) if arm.speculative is not None and after is not None else None
    log = live.server.log_text()
    observed, declared = draft_kv_policy(arm, log, live.info.vllm_version)
    kv = parse_kv_capacity(log)
    return SpecDecodeMeasurement(arm, w.name, prompts_sha(prompts), samples, sink, aborted, after is not None, delta,
                                 observed, declared, kv.tokens if kv else None)
