"""Speculative decoding, for arms with a `speculative` section: fixed greedy GSM8K-style and long-context prompts,
one at a time, on the candidate and on its reference (the same server without a drafter). From the candidate's
/metrics deltas: drafts, draft tokens, accepted tokens, mean acceptance length 1 + accepted/drafts and per-position
acceptance; TPOT and tokens/s on both arms (the speed-up); every output compared with the reference's; the
degeneration detector on both arms' text; the gates of harness/judge/spec_decode_gates.py, computed from
results.jsonl. Measured by harness/measure/spec_decode.py; the outputs compared by
harness/refcheck/judging/spec_decode_equality.py."""

import pytest

from harness.config.suites import BY_NAME
from harness.judge.catalogue_gate import catalogue_gates
from harness.judge.spec_decode_gates import EQUALITY_CHECK, outputs_fields
from harness.measure.spec_decode import measure_arm
from harness.records.meaning import of_kind
from harness.records.schema import DegenerationRecord, GateRecord, ReferenceCheckRecord, SpecDecodeRecord
from harness.refcheck.judging.spec_decode_equality import compare_arms
from harness.serve.serverlog import tail


def drafters_for(session, arm_name: str) -> list[str]:
    """The candidates with a speculative section that this arm's own run serves (itself, or as their reference)."""
    return [c for c in session.candidates_for(arm_name) if session.arm(c).speculative is not None]


def skip_reason(session, under_test, served: bool) -> str | None:
    """Read by the plugin before any server starts, for each test's arm (`served`: the arm's own run, else the
    candidate's comparison): the suite is for candidates with a drafter; a reference runs it only as their baseline."""
    arm_name = under_test.arm
    if served and drafters_for(session, arm_name):
        return None
    if not served and session.arm(arm_name).speculative is not None:
        return None
    if arm_name not in session.candidates:
        served_by = [repr(c) for c in session.candidates_for(arm_name)]
        whose = (f"candidate {served_by[0]} has none" if len(served_by) == 1
                 else f"candidates {', '.join(served_by)} have none")
        return (f"arm {arm_name!r} is the reference: spec_decode runs it only as the no-drafter baseline of a "
                f"candidate with a speculative section, and {whose}")
    return f"arm {arm_name!r} has no speculative section: spec_decode measures draft arms (e.g. cpu-spec)"


def test_spec_decode(served_arm, harness_session, under_test, record):
    arm = served_arm.arm
    # the prompt set of the candidate this run serves (a reference's: its first candidate with a drafter)
    cand = (drafters_for(harness_session, arm.name) or [under_test.candidate])[0]
    m = measure_arm(served_arm, harness_session.workload("spec_decode", cand), harness_session.run_dir)
    finished = m.finished()
    judged = outputs_fields([s.text for s in finished], arm.speculative if m.counters else None,
                            arm.model.max_model_len, [(s.prompt_token_ids, s.token_ids) for s in finished],
                            len(m.samples) - len(finished))
    rec = record(SpecDecodeRecord, arm=arm.name, **m.record_fields(), **judged)
    if rec.status == "aborted":
        pytest.fail(f"arm {arm.name!r}: server died during spec_decode after {rec.requests} request(s); samples kept "
                    f"in {rec.samples_path}.\n{rec.reason}", pytrace=False)
    assert rec.failed == 0, (f"arm {arm.name!r}: " + "; ".join(rec.errors[:3])
                             + f"\n{tail(served_arm.server.log_text(), 5)}")
    if arm.speculative is not None:
        assert m.counters_seen, f"arm {arm.name!r} has a speculative config but /metrics has no spec_decode counters"


def test_spec_decode_vs_reference(harness_session, under_test, record):
    cand, ref = under_test.pair()
    gates_cfg = under_test.thresholds()
    records = harness_session.records()
    # The output check's limits, as long_prefix_outputs': a calibration of this candidate against this reference's
    # outputs of this run, else gates.yaml's and, under require_floor (every GPU spec arm), FAIL "not calibrated".
    sha = next((r.prompts_sha for r in reversed(of_kind(records, SpecDecodeRecord)) if r.arm == ref), None)
    _, noise = under_test.run_outputs_key(f"spec_decode run {ref} (prompts {sha})")
    equality = compare_arms(records, cand, ref, harness_session.run_dir, gates_cfg,
                            under_test.reference_check(EQUALITY_CHECK, noise))
    if equality is not None:
        record(ReferenceCheckRecord, arm=cand, of=equality.check)
        record(DegenerationRecord, arm=cand, **equality.degeneration)
    gates = catalogue_gates(BY_NAME["spec_decode"], harness_session.records(), cand, ref, gates_cfg)
    for g in gates:
        record(GateRecord, **g.record_fields())
    failed = [f"{g.gate}: {g.detail}" for g in gates if not g.passed and g.enforced]
    assert not failed, "\n".join(failed)
