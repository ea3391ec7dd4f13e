"""Build vs build (`qualify --keep-outputs`, `--baseline-build`): the candidate's own outputs of the reference checks'
prompts, captured as a reference's are, stored in the run (a passed run's are a baseline later); with a baseline
build, each compared with that signed-off build's stored output for the same prompt, judged as a reference check with
the pair's calibrated limits (harness/refcheck/judging/build_outputs.py)."""

import json

from harness.config.errors import ConfigError
from harness.records.schema import ReferenceCheckRecord
from harness.refcheck.judging import build_outputs as bo
from harness.refcheck.judging.compare import checked_to
from harness.refcheck.judging.comparisons import BatchComparisons, record_fields
from harness.refcheck.prompt_sets.check_set import CHECKS
from harness.refcheck.send.batches import capture
from harness.refcheck.store.reference_store import make_key


def reference_noise_key(harness_session, under_test, prompts, sampling) -> str:
    """The noise key of the reference's outputs of these prompts: where the pair's calibration is (none: "")."""
    if under_test.reference is None:
        return ""
    ref = harness_session.arm(under_test.reference)
    identity = harness_session.references.identity(ref.name)
    return make_key(ref, identity, prompts, sampling, "").noise_key


def test_build_outputs(candidate, harness_session, under_test, record):
    arm = candidate.arm
    run = harness_session.run
    _, prompts, sampling = under_test.prompt_set(CHECKS)
    identity = harness_session.references.identity(arm.name)
    build = run.manifest.builds.get(arm.name) if run.manifest.builds else None
    outputs = capture(candidate, prompts.all(), sampling)
    meta = bo.outputs_meta(arm, identity, prompts.fingerprint(), sampling,
                           build.model_dump(mode="json") if build else {})
    bo.save_outputs(bo.outputs_path(run.run_dir, arm.name), meta, prompts.all(), outputs)
    baseline = run.manifest.baseline_build
    if baseline is None:  # stored only: this run may be signed off as a baseline (a passed run)
        assert len(outputs) == len(prompts.all())
        return

    problems = []
    try:
        doc = bo.read_doc(bo.outputs_path(baseline.run_dir, arm.name))
        mismatch = bo.meta_mismatch(doc["meta"], arm, identity)
        problems += [f"baseline {baseline.run_id}: {mismatch}"] if mismatch else []
        stored, missing = bo.stored_generations(doc, prompts.all())
        problems += missing
    except ConfigError as exc:
        stored, problems = {}, [f"FAIL (no data: {exc})"]
    comparisons = bo.compare_builds(prompts.all(), outputs, stored)
    sink = run.run_dir / arm.name / "build_outputs_comparisons.jsonl"
    sink.write_text("".join(c.model_dump_json() + "\n" for c in comparisons))

    calibrated = under_test.reference_check(bo.LIMITS_FROM,
                                            reference_noise_key(harness_session, under_test, prompts, sampling))
    check = bo.build_check(calibrated)
    fields = record_fields(bo.CHECK, f"{arm.name}@{baseline.run_id}", json.dumps(baseline.build_hash),
                           BatchComparisons(comparisons), check.drift_limit, sink, problems, check.tie_gap)
    judged = check.judge(fields, comparisons, False)
    of = judged.fields.model_copy(update={**bo.floor_line(calibrated),
                                          "detectable": bo.power_line(comparisons, check.drift_limit, check.tie_gap)})
    rec = record(ReferenceCheckRecord, arm=arm.name, of=of, checked_to_tokens=checked_to(comparisons))
    assert rec.passed, (f"build_outputs of {arm.name!r} against its signed-off build (run {baseline.run_id}, build "
                        f"{baseline.build_hash}):\n" + "\n".join(rec.diverged))
