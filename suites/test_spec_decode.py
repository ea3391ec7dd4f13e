"""Speculative decoding, for arms with a `speculative` section: fixed greedy GSM8K-style and long-context prompts,
one at a time, on the candidate and on its reference (the same server without a drafter). From the candidate's
/metrics deltas: drafts, draft tokens, accepted tokens, mean acceptance length 1 + accepted/drafts and per-position
acceptance; TPOT and tokens/s on both arms (the speed-up); every output compared with the reference's; the
degeneration detector on both arms' text; the gates of harness/judge/spec_decode_gates.py, computed from
results.jsonl."""

import asyncio
from pathlib import Path

import pytest

from harness.config.paths import gsm8k_dir
from harness.config.suites import BY_NAME
from harness.config.workloads import SpecDecodeWorkload
from harness.judge.catalogue_gate import catalogue_gates
from harness.judge.degeneration import degeneration_fields, mean_span_fraction, text_units
from harness.judge.ngram_replay import lookup_bounds, replay
from harness.judge.spec_decode_gates import EQUALITY_CHECK, acceptance_length, position_rates
from harness.measure.metrics import fetch_metrics
from harness.measure.spec_decode_metrics import (
    load_spec_prompts,
    prompts_sha,
    read_samples,
    run_prompts,
    spec_counters,
    timing_fields,
)
from harness.records.schema import DegenerationRecord, GateRecord, ReferenceCheckRecord, SpecDecodeRecord
from harness.refcheck.batches import record_fields
from harness.refcheck.check import ReferenceCheck, reference_check
from harness.refcheck.compare import tie_flipped
from harness.refcheck.spec_decode_equality import compare_samples
from harness.refcheck.store import arm_config_sha, noise_digest
from harness.serve.serverlog import parse_draft_kv, parse_kv_capacity, tail


def drafters_for(session, arm_name: str) -> list[str]:
    """The candidates with a speculative section that this arm's own run serves (itself, or as their reference)."""
    return [c for c in session.candidates_for(arm_name) if session.arm(c).speculative is not None]


def skip_reason(session, arm_name: str, served: bool) -> str | None:
    """Read by the plugin before any server starts, for each test's arm (`served`: the arm's own run, else the
    candidate's comparison): the suite is for candidates with a drafter; a reference runs it only as their baseline."""
    if served and drafters_for(session, arm_name):
        return None
    if not served and session.arm(arm_name).speculative is not None:
        return None
    if arm_name not in session.run.arm_set.candidates:
        served_by = [repr(c) for c in session.candidates_for(arm_name)]
        whose = (f"candidate {served_by[0]} has none" if len(served_by) == 1
                 else f"candidates {', '.join(served_by)} have none")
        return (f"arm {arm_name!r} is the reference: spec_decode runs it only as the no-drafter baseline of a "
                f"candidate with a speculative section, and {whose}")
    return f"arm {arm_name!r} has no speculative section: spec_decode measures draft arms (e.g. cpu-spec)"


def draft_kv_policy(arm, log_text: str, version: str | None) -> tuple[str | None, str | None]:
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


def replay_fields(arm, samples: list) -> dict:
    """An n-gram arm's counters as its drafter must have made them on its own outputs (harness/judge/ngram_replay.py);
    nothing for other drafters (a draft model's proposals depend on its weights, not on the tokens alone)."""
    spec = arm.speculative
    if spec is None or spec.method != "ngram":
        return {}
    ok = [s for s in samples if not s.error]
    if len(ok) != len(samples) or not ok:
        return {"replay_problem": f"{len(samples) - len(ok)} of {len(samples)} request(s) failed: no full replay"}
    if any(not s.prompt_token_ids for s in ok):
        return {"replay_problem": "the server returned no prompt token ids (return_token_ids): no replay"}
    lo, hi = lookup_bounds(spec.extra)
    r = replay([(s.prompt_token_ids, s.token_ids) for s in ok], lo, hi, spec.num_speculative_tokens,
               arm.model.max_model_len)
    return {"replay_drafts": r.drafts, "replay_accepted": [r.accepted_min, r.accepted_max]}


def measure_arm(live, w: SpecDecodeWorkload, run_dir: Path) -> dict:
    """One arm through the candidate's prompt set: the SpecDecodeRecord's fields (counter deltas on a drafter)."""
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
    spec = arm.speculative
    counters = {}
    if spec is not None and after is not None:
        d = after.minus(before) if before else after
        per_pos = [d.accepted_per_pos.get(i, 0.0) for i in range(spec.num_speculative_tokens)]
        counters = {"drafts": d.drafts, "draft_tokens": d.draft_tokens, "accepted": d.accepted,
                    "accepted_per_pos": per_pos, "acceptance_length": acceptance_length(d.drafts, d.accepted),
                    "position_rates": position_rates(per_pos, d.drafts)}
    log = live.server.log_text()
    observed, declared = draft_kv_policy(arm, log, live.info.vllm_version)
    kv = parse_kv_capacity(log)
    return {"arm": arm.name, "workload": w.name, "prompts_sha": prompts_sha(prompts),
            "status": "aborted" if aborted else "complete", "reason": aborted,
            "method": spec.method if spec else None,
            "num_speculative_tokens": spec.num_speculative_tokens if spec else None,
            "mean_span_fraction": mean_span_fraction([text_units(s.text) for s in samples if not s.error]),
            "draft_kv": observed, "draft_kv_declared": declared, "kv_tokens": kv.tokens if kv else None,
            "samples_path": str(sink), "has_counters": after is not None, **counters, **timing_fields(samples),
            **(replay_fields(arm, samples) if counters else {})}


def test_spec_decode(served_arm, harness_session, record):
    arm = served_arm.arm
    # the prompt set of the candidate this run serves (a reference's: its first candidate with a drafter)
    cand = (drafters_for(harness_session, arm.name) or [harness_session.candidate_name])[0]
    fields = measure_arm(served_arm, harness_session.workload("spec_decode", cand), harness_session.run_dir)
    counters_seen = fields.pop("has_counters")
    rec = record(SpecDecodeRecord, **fields)
    if rec.status == "aborted":
        pytest.fail(f"arm {arm.name!r}: server died during spec_decode after {rec.requests} request(s); samples kept "
                    f"in {rec.samples_path}.\n{rec.reason}", pytrace=False)
    assert rec.failed == 0, (f"arm {arm.name!r}: " + "; ".join(rec.errors[:3])
                             + f"\n{tail(served_arm.server.log_text(), 5)}")
    if arm.speculative is not None:
        assert counters_seen, f"arm {arm.name!r} has a speculative config but /metrics has no spec_decode counters"


def equality_check(session, cand: str, ref: str) -> ReferenceCheck:
    """The output check's limits, as long_prefix_outputs': a calibration of this candidate against this reference's
    outputs of this run (its config, the prompt set and the model stand in for a store key), else gates.yaml's and,
    under require_floor (every GPU spec arm), FAIL "not calibrated"."""
    sha = next((r.prompts_sha for r in reversed(session.records()) if isinstance(r, SpecDecodeRecord) and r.arm == ref),
               None)
    key = f"spec_decode run {ref} (prompts {sha}), reference config {arm_config_sha(session.arm(ref))}"
    noise = noise_digest({"reference": key, "model": session.references.identity(ref)})
    return reference_check(session.thresholds(), session.arm(cand), EQUALITY_CHECK, noise,
                           session.run.calibration_repeat, session.run.build_of(cand))


def compare_arms(records: list, cand: str, ref: str, run_dir: Path, gates_cfg,
                 check: ReferenceCheck | None = None) -> list:
    """The output comparison and the degeneration record of the candidate against the reference (from the two
    arms' samples files), ready to be written; nothing when either arm has no samples. `check`: the check's limits
    (equality_check), paired with its floor; None: gates.yaml's limits alone."""
    mine = [r for r in records if isinstance(r, SpecDecodeRecord) and r.arm == cand]
    theirs = [r for r in records if isinstance(r, SpecDecodeRecord) and r.arm == ref]
    if not (mine and theirs and mine[-1].samples_path and theirs[-1].samples_path):
        return []
    c_samples, r_samples = read_samples_or_empty(mine[-1].samples_path), read_samples_or_empty(theirs[-1].samples_path)
    sink = run_dir / cand / f"spec_decode_vs_{ref}_comparisons.jsonl"
    run = compare_samples(c_samples, r_samples, sink)
    fixed = gates_cfg.reference_checks
    limit = check.drift_limit if check else fixed.limit_for(EQUALITY_CHECK)
    tie_gap = check.tie_gap if check else fixed.tie_gap
    base = {"run_id": run_dir.name, "arm": cand, "suite": "spec_decode"}
    fields = record_fields(EQUALITY_CHECK, ref, f"spec_decode run {ref}", run, limit, sink, [], tie_gap)
    if check is not None:
        fields = check.judge(fields, run.comparisons, bool(run.aborted)).fields
    checked = ReferenceCheckRecord(**base, **fields.model_dump())
    by_id = {s.id: s for s in r_samples if not s.error}
    pairs = [(s.id, text_units(s.text), text_units(by_id[s.id].text))
             for s in c_samples if not s.error and s.id in by_id]
    spread = check.calibrated_spread if check else None
    return [checked, DegenerationRecord(**base, **degeneration_fields(pairs, ref, gates_cfg.degeneration, " ".join,
                                                                    tie_flipped(run.comparisons, tie_gap), spread))]


def test_spec_decode_vs_reference(harness_session, record):
    cand, ref = harness_session.pair()
    gates_cfg = harness_session.thresholds()
    check = equality_check(harness_session, cand, ref)
    for r in compare_arms(harness_session.records(), cand, ref, harness_session.run_dir, gates_cfg, check):
        harness_session.writer.append(r)
    gates = catalogue_gates(BY_NAME["spec_decode"], harness_session.records(), cand, ref, gates_cfg)
    for g in gates:
        record(GateRecord, **g.record_fields())
    failed = [f"{g.gate}: {g.detail}" for g in gates if not g.passed and g.enforced]
    assert not failed, "\n".join(failed)


def read_samples_or_empty(path: str) -> list:
    """A samples file that is gone leaves no comparison: the gates then read 'no data'."""
    try:
        return read_samples(Path(path))
    except OSError:
        return []
