"""GSM8K through lm-eval's local-completions against each arm, and the paired statistical gate (its catalogue entry's
AccuracyGate, computed from results.jsonl)."""

from pathlib import Path

import pytest

from harness.config.arms import model_files
from harness.config.suites import BY_NAME
from harness.judge.catalogue_gate import catalogue_gates
from harness.judge.degeneration import degeneration_fields, text_units
from harness.judge.gates import latest
from harness.judge.gsm8k_outputs import CHECK, answers_verdict, compare_answers, without_limit
from harness.measure.gsm8k import evaluate, gsm8k_fields, responses_by_doc, select_task
from harness.measure.lm_eval_arm import arm_model, evaluation_failure
from harness.records.jsonl import read_jsonl
from harness.records.schema import DegenerationRecord, GateRecord, Gsm8kRecord, ReferenceCheckRecord
from harness.refcheck.judging.compare import summary_fields

SUITE = BY_NAME["gsm8k"]


def test_gsm8k(served_arm, harness_session, under_test, record):
    arm = served_arm.arm
    w = under_test.workload("gsm8k")
    source = select_task(harness_session.run_dir / "gsm8k_task")  # data validated before any request
    lm = arm_model(served_arm, w, w.max_gen_toks)
    ev = evaluate(lm, source, w.num_fewshot, w.limit, harness_session.run_dir / arm.name / "gsm8k")
    rec = record(Gsm8kRecord, arm=arm.name, **gsm8k_fields(ev, source, w))
    if failure := evaluation_failure(served_arm, lm, ev, rec.n, under_test.thresholds(), SUITE):
        pytest.fail(failure, pytrace=False)


def test_gsm8k_vs_reference(harness_session, under_test, record):
    cand, ref = under_test.pair()
    (gate,) = catalogue_gates(SUITE, harness_session.records(), cand, ref, under_test.thresholds())
    record(GateRecord, **gate.record_fields())
    assert gate.passed, gate.detail


def answers_of(harness_session, under_test) -> list[dict[int, str]]:
    """doc id -> answer text, for the candidate and the reference, from lm-eval's samples logs ({} where missing)."""
    cand, ref = under_test.pair()
    records = harness_session.records()
    texts = []
    for arm in (cand, ref):
        r = (latest(records, Gsm8kRecord, arm) or [None])[0]
        rows = read_jsonl(Path(r.samples_path))[0] if r and r.samples_path and Path(r.samples_path).is_file() else []
        texts.append(responses_by_doc(rows))
    return texts


def test_gsm8k_outputs_vs_reference(harness_session, under_test, record):
    """Each candidate answer against the reference's, token by token in the model's tokenizer (issue 46): a fault deep
    in a generation changes answers whether or not either arm gets them right."""
    cand, ref = under_test.pair()
    gates = under_test.thresholds()
    allowed, required = gates.gsm8k.max_diverged_answers, gates.reference_checks.require_floor
    where = model_files(harness_session.arm(cand))
    if where is None or not (where / "tokenizer.json").is_file():
        reason = (f"arm {cand!r}: no tokenizer.json beside its model ({where}): the answers cannot be compared in "
                  "tokens")
        if allowed is None and not required:
            pytest.skip(f"{reason}; not judged on this arm either (gsm8k.max_diverged_answers unset)")
        pytest.fail(reason, pytrace=False)
    from tokenizers import Tokenizer  # lm-eval's dependency: only where answers are compared

    tok = Tokenizer.from_file(str(where / "tokenizer.json"))
    mine, theirs = answers_of(harness_session, under_test)
    comparisons = compare_answers(mine, theirs, lambda text: tok.encode(text, add_special_tokens=False).ids)
    passed, detail, lines = answers_verdict(comparisons, allowed)
    judged_by = f"gates.yaml gsm8k.max_diverged_answers {allowed}"
    if allowed is None:
        fails, detail = without_limit(cand, detail, required)
        if not fails:
            pytest.skip(detail)
        judged_by = "not measured for this arm (gsm8k.max_diverged_answers unset)"
    numbers = summary_fields(comparisons)
    rec = record(ReferenceCheckRecord, arm=cand, check=CHECK, reference=ref, reference_key="",
                 passed=passed, detail=detail, drift_limit=0.0, diverged=lines, judged_by=judged_by,
                 **{k: v for k, v in numbers.items() if k not in ("tie_flips", "tie_gap")})
    assert rec.passed, "\n".join([rec.detail, *rec.diverged[:20]])


def test_gsm8k_degeneration_vs_reference(harness_session, under_test, record):
    """Each candidate answer against the reference's answer to the same question: no answer clearly more
    repetitive (a garbled arm loops; accuracy alone can miss it on a weak model)."""
    cand, ref = under_test.pair()
    texts = answers_of(harness_session, under_test)
    pairs = [(f"question {q}", text_units(texts[0][q]), text_units(texts[1][q]))
             for q in sorted(texts[0].keys() & texts[1].keys())]
    fields = degeneration_fields(pairs, ref, under_test.thresholds().degeneration, " ".join)
    rec = record(DegenerationRecord, arm=cand, **fields)
    assert rec.passed, "\n".join([rec.detail, *rec.flagged])
