"""Changing-input graph replay: rounds of concurrent requests whose count walks across captured batch sizes and
padding boundaries, new prompts and lengths each round; every output compared with the reference arm's, and on
arms that name an `eager_variant`, with the same arm under --enforce-eager."""

import pytest

from harness.judge.degeneration import degeneration_fields
from harness.records.schema import DegenerationRecord, ReferenceCheckRecord
from harness.refcheck.judging.compare import checked_to, tie_flipped
from harness.refcheck.judging.comparisons import degeneration_pairs, record_fields, write_diverged_outputs
from harness.refcheck.prompt_sets.check_set import CHECKS
from harness.refcheck.prompts.order import reorder_rounds
from harness.refcheck.send.batches import compare_batches


def check_against(stored, candidate, harness_session, under_test, record, check: str):
    arm = candidate.arm
    _, prompts, sampling = under_test.prompt_set(CHECKS)
    gates = under_test.thresholds()
    judging = under_test.reference_check(check, stored.noise_key)
    sink = harness_session.run_dir / arm.name / f"{check}_vs_{stored.arm}_comparisons.jsonl"
    sink.unlink(missing_ok=True)
    rounds = reorder_rounds(prompts.rounds, harness_session.order_seed)
    compared = compare_batches(candidate, rounds, sampling, stored.outputs, sink)
    write_diverged_outputs(compared, stored.outputs, sink.with_name(f"{check}_vs_{stored.arm}_diverged_outputs.jsonl"))
    # Token ids: a loop in the candidate's tokens against the reference's tokens for the same prompt
    loops = record(DegenerationRecord, arm=arm.name, **degeneration_fields(
        degeneration_pairs(compared, stored.outputs), stored.arm, gates.degeneration,
        tie_flipped=tie_flipped(compared.comparisons, judging.tie_gap), calibrated=judging.calibrated_spread))
    fields = record_fields(check, stored.arm, stored.key, compared, judging.drift_limit, sink, loops.flagged,
                           judging.tie_gap)
    judged = judging.judge(fields, compared.comparisons, bool(compared.aborted))
    return record(ReferenceCheckRecord, arm=arm.name, of=judged.fields,
                  checked_to_tokens=checked_to(compared.comparisons)), compared


def test_graph_replay(reference_outputs, eager_outputs, candidate, harness_session, under_test, record):
    rec, compared = check_against(reference_outputs, candidate, harness_session, under_test, record, "graph_replay")
    assert rec.passed, (f"graph_replay on {candidate.arm.name!r} vs {reference_outputs.arm!r} "
                        f"(reference {reference_outputs.path}):\n" + "\n".join(rec.diverged)
                        + (f"\n{compared.aborted}" if compared.aborted else ""))


def test_graph_replay_vs_eager(reference_outputs, eager_outputs, candidate, harness_session, under_test, record):
    if eager_outputs is None:
        pytest.skip(f"arm {candidate.arm.name!r} names no eager_variant (GPU arms do; on CPU the reference is eager)")
    rec, compared = check_against(eager_outputs, candidate, harness_session, under_test, record, "graph_replay_eager")
    assert rec.passed, (f"graph_replay on {candidate.arm.name!r} vs its eager variant {eager_outputs.arm!r}:\n"
                        + "\n".join(rec.diverged) + (f"\n{compared.aborted}" if compared.aborted else ""))
