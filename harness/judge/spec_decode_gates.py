"""Speculative-decoding gates as pure functions of the records (suites/test_spec_decode.py records them; `harness
report` recomputes them). A gate whose input is missing, aborted or failed is FAIL with "no data: ...".

  spec_decode_acceptance_length  n-gram: counters equal the proposer replayed (ngram_replay.py); a draft model:
                                 mean 1 + accepted / drafts >= min_acceptance_length
  spec_decode_position_curve     per-position acceptance non-increasing within binomial noise
  spec_decode_collapse           no position accepted >= collapse_rate unless the reference's outputs are trivially
                                 predictable (the seed's garbled GLM + DCP4 + MTP run: acceptance ~100%)
  spec_decode_output_equality    greedy outputs equal the reference's (the existing comparison, tie flips as there)
  spec_decode_degeneration       no output clearly more repetitive than the reference's for the same prompt
  spec_decode_speedup            optional floor on reference TPOT p50 / candidate TPOT p50
  spec_decode_draft_kv           only for a draft on a DCP target: the policy the server states matches the arm's
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.config.arms import Speculative
from harness.config.thresholds import SpecDecodeGates
from harness.judge.degeneration import mean_span_fraction, text_units
from harness.judge.gates import GateResult, latest
from harness.judge.ngram_replay import Replay, counter_mismatches, lookup_bounds, replay
from harness.records.meaning import of_kind
from harness.records.schema import (
    DegenerationRecord,
    OutcomeRecord,
    Record,
    ReferenceCheckRecord,
    SpecDecodeRecord,
)

SUITE = "spec_decode"
EQUALITY_CHECK = "spec_decode"  # the ReferenceCheckRecord.check of the output comparison


def suite_skipped(records: list[Record]) -> bool:
    """The suite skipped itself (the candidate has no drafter) and left no record: no gate to compute. A suite that
    ran and failed, or never ran, still gets its gates -- they read FAIL (no data)."""
    outcomes = [r.outcome for r in of_kind(records, OutcomeRecord) if r.suite == SUITE]
    return bool(outcomes) and all(o == "skipped" for o in outcomes) and \
        not of_kind(records, SpecDecodeRecord)


def outputs_fields(texts: list[str], replayed: Speculative | None, max_model_len: int,
                   outputs: Sequence[tuple[list[int], list[int]]], failed: int) -> dict:
    """A SpecDecodeRecord's fields from the arm's own outputs: their repetition and, on an n-gram arm, the counters
    vLLM's proposer must have made (ngram_replay). `failed`: requests that did not finish."""
    fields: dict = {"mean_span_fraction": mean_span_fraction([text_units(t) for t in texts])}
    if replayed is None or replayed.method != "ngram":
        return fields
    if failed or not outputs:
        return {**fields, "replay_problem": f"{failed} of {failed + len(outputs)} request(s) failed: no full replay"}
    if any(not prompt for prompt, _ in outputs):
        return {**fields, "replay_problem": "the server returned no prompt token ids (return_token_ids): no replay"}
    lo, hi = lookup_bounds(replayed.extra)
    r = replay(list(outputs), lo, hi, replayed.num_speculative_tokens, max_model_len)
    return {**fields, "replay_drafts": r.drafts, "replay_accepted": [r.accepted_min, r.accepted_max]}


def speedup(ref_tpot: float | None, cand_tpot: float | None) -> float | None:
    return ref_tpot / cand_tpot if ref_tpot and cand_tpot else None


def record_gaps(arm: str, r: SpecDecodeRecord | None, limits: SpecDecodeGates) -> list[str]:
    """Why one arm's spec_decode record cannot be judged."""
    if r is None:
        return [f"no data: no spec_decode record for {arm}"]
    if r.status == "aborted":
        return [f"no data: {arm} spec_decode aborted after {r.requests} request(s): {r.reason or 'unknown'}"]
    if r.failed > limits.max_failed_requests:
        return [f"no data: {arm}: {r.failed}/{r.requests} spec_decode request(s) failed"]
    return []


def draft_gaps(arm: str, r: SpecDecodeRecord) -> list[str]:
    if r.method is None:
        return [f"no data: {arm} has no speculative config (its spec_decode record has no method)"]
    if not r.drafts:
        return [f"no data: {arm} made no draft over {r.requests} request(s) (vllm:spec_decode_num_drafts delta "
                f"{r.drafts}): nothing to judge"]
    return []


def acceptance_judgement(arm: str, r: SpecDecodeRecord, limits: SpecDecodeGates) -> tuple[list[str], str]:
    """(failures, detail when none) of the acceptance gate on a record that has drafts."""
    measured = f"mean acceptance length {r.acceptance_length:.3f} ({r.accepted:g} accepted over {r.drafts:g} drafts)"
    if r.method == "ngram":
        if r.replay_drafts is None or len(r.replay_accepted) != 2:
            return [f"no data: {arm}: {r.replay_problem or 'no n-gram replay recorded'}"], ""
        replayed = Replay(drafts=r.replay_drafts, accepted_min=r.replay_accepted[0], accepted_max=r.replay_accepted[1])
        lo, hi = r.replay_accepted
        span = f"{lo}" if lo == hi else f"{lo}-{hi}"
        return counter_mismatches(arm, r.drafts, r.accepted, replayed), \
            f"{measured} = vLLM's n-gram proposer replayed over its outputs ({r.replay_drafts} drafts, {span} accepted)"
    if r.acceptance_length < limits.min_acceptance_length:
        return [f"{arm} {measured} < {limits.min_acceptance_length:g}"], ""
    return [], f"{measured} >= {limits.min_acceptance_length:g}"


def curve_violations(rates: list[float], drafts: float, z: float, tolerance: float) -> list[str]:
    """Positions whose rate exceeds the previous one by more than z binomial sd + tolerance."""
    out = []
    for i in range(1, len(rates)):
        p = rates[i - 1]
        allowed = p + z * math.sqrt(max(p * (1 - p), 0.0) / drafts) + tolerance
        if rates[i] > allowed:
            out.append(f"position {i} accepted {rates[i]:.3f} > position {i - 1} {p:.3f} (+ noise allowance "
                       f"{allowed - p:.3f})")
    return out


def collapsed(rates: list[float], limit: float) -> list[int]:
    return [i for i, r in enumerate(rates) if r >= limit]


def gate(name: str, cand: str, ref: str, failures: list[str], ok_detail: str, numbers: dict | None = None,
         enforced: bool = True) -> GateResult:
    return GateResult(name, SUITE, cand, ref, not failures, "; ".join(failures) or ok_detail, numbers or {}, enforced)


def spec_decode_gates(records: list[Record], cand: str, ref: str, limits: SpecDecodeGates) -> list[GateResult]:
    mine = (latest(records, SpecDecodeRecord, cand) or [None])[0]
    theirs = (latest(records, SpecDecodeRecord, ref) or [None])[0]
    gaps = record_gaps(cand, mine, limits)
    drafted = gaps or draft_gaps(cand, mine)
    out = []

    numbers = {"acceptance_length": mine.acceptance_length} if not drafted else {}
    failures, ok_detail = list(drafted), ""
    if not drafted:
        failures, ok_detail = acceptance_judgement(cand, mine, limits)
    out.append(gate("spec_decode_acceptance_length", cand, ref, failures, ok_detail, numbers))

    failures = list(drafted) or curve_violations(mine.position_rates, mine.drafts, limits.curve_noise_z,
                                                 limits.curve_abs_tolerance)
    rates = ", ".join(f"{r:.3f}" for r in mine.position_rates) if not drafted else ""
    out.append(gate("spec_decode_position_curve", cand, ref, failures, f"non-increasing within noise: {rates}"))

    failures = list(drafted) + record_gaps(ref, theirs, limits)
    if not failures and theirs.mean_span_fraction is None:
        failures.append(f"no data: {ref} has no output repetition measure")
    if not failures:
        hot = collapsed(mine.position_rates, limits.collapse_rate)
        trivial = theirs.mean_span_fraction >= limits.trivially_predictable_span
        if hot and not trivial:
            failures.append(f"acceptance collapse: position(s) {hot} accepted >= {limits.collapse_rate:g} ({rates}) "
                            f"while {ref}'s outputs are not trivially predictable (mean repeated-span fraction "
                            f"{theirs.mean_span_fraction:.2f} < {limits.trivially_predictable_span:g})")
    out.append(gate("spec_decode_collapse", cand, ref, failures,
                    f"no position >= {limits.collapse_rate:g} ({rates}) or the reference is trivially predictable"))

    out.append(from_check(records, cand, ref))
    out.append(from_degeneration(records, cand, ref))

    if mine is not None and mine.draft_kv_declared:
        out.append(draft_kv_gate(cand, ref, mine.draft_kv_declared, mine.draft_kv))
    if limits.min_speedup is not None:
        failures = gaps + record_gaps(ref, theirs, limits)
        factor = speedup(theirs.tpot.p50, mine.tpot.p50) if not failures else None
        if not failures and factor is None:
            failures.append("no data: a TPOT p50 is missing")
        elif factor is not None and factor < limits.min_speedup:
            failures.append(f"{cand} speed-up {factor:.2f}x over {ref} (TPOT p50) < {limits.min_speedup:g}x")
        out.append(gate("spec_decode_speedup", cand, ref, failures,
                        f"speed-up {factor or 0:.2f}x >= {limits.min_speedup:g}x", {"speedup": factor}))
    return out


def from_check(records: list[Record], cand: str, ref: str) -> GateResult:
    """Output equality: the spec_decode ReferenceCheckRecord the suite wrote (the existing comparison)."""
    found = [r for r in of_kind(records, ReferenceCheckRecord) if r.arm == cand and r.check == EQUALITY_CHECK]
    if not found:
        return gate("spec_decode_output_equality", cand, ref, [f"no data: no output comparison of {cand} with {ref}"],
                    "")
    r = found[-1]
    failures = [] if r.passed else [r.detail + (": " + "; ".join(r.diverged[:3]) if r.diverged else "")]
    if r.status == "aborted":
        failures = [f"no data: the comparison was aborted: {r.reason}"]
    return gate("spec_decode_output_equality", cand, ref, failures, r.detail,
                {"exact": r.exact_matches, "requests": r.requests})


def from_degeneration(records: list[Record], cand: str, ref: str, suite: str = SUITE) -> GateResult:
    found = [r for r in of_kind(records, DegenerationRecord) if r.arm == cand and r.suite == suite]
    name = f"{suite}_degeneration"
    if not found:
        return GateResult(name, suite, cand, ref, False, f"no data: no degeneration record of {cand}")
    r = found[-1]
    return GateResult(name, suite, cand, ref, r.passed, r.detail if r.passed else "; ".join([r.detail, *r.flagged[:3]]),
                      {"requests": r.requests, "flagged": len(r.flagged)})


def draft_kv_gate(cand: str, ref: str, declared: str, observed: str | None) -> GateResult:
    """A draft on a DCP target: the draft KV policy the server states must be the declared one; unstated is FAIL."""
    if observed is None or observed.startswith("not logged"):
        return gate("spec_decode_draft_kv", cand, ref, [f"no data: the server did not state its draft KV policy "
                                                        f"({observed or 'not logged'}); declared {declared}"], "")
    failures = [] if observed == declared else [f"draft KV {observed} in the server log, the arm declares {declared}"]
    return gate("spec_decode_draft_kv", cand, ref, failures, f"draft KV {observed}, as declared")
