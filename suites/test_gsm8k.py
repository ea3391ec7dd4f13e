"""GSM8K through lm-eval's local-completions against each arm, and the paired statistical gate."""

import pytest

from harness.config import gates
from harness.measure.gsm8k import (
    evaluate,
    filter_scores,
    lm_eval_version,
    make_model,
    score_samples,
    select_task,
    task_hash,
)
from harness.records.schema import FilterScore, GateRecord, Gsm8kRecord
from harness.serve.serverlog import tail
from harness.config.workloads import Gsm8kWorkload, load_workload, workload_for


def test_gsm8k(served_arm, harness_session, record):
    arm = served_arm.arm
    w = load_workload(workload_for(harness_session.arm(harness_session.candidate_name), "gsm8k"), kind=Gsm8kWorkload)
    source = select_task(harness_session.run_dir / "gsm8k_task")  # data validated before any request
    lm = make_model(served_arm.info.base_url, arm.model.served_name, w.num_concurrent, w.max_retries,
                    arm.timeouts.request_s, w.max_gen_toks, served_arm.server.check_alive)
    ev = evaluate(lm, source, w.num_fewshot, w.limit, harness_session.run_dir / arm.name / "gsm8k")
    scored = score_samples(ev.samples)
    aggregate = filter_scores(ev.results, source.task)
    reason = ev.dead or ev.error
    record(Gsm8kRecord, arm=arm.name, workload=w.name, task=source.task, data_files=source.data_files,
           lm_eval_version=lm_eval_version(), task_hash=task_hash(ev.samples),
           num_fewshot=w.num_fewshot, limit=w.limit, n=scored.n,
           scores={f: FilterScore(exact_match=aggregate[f][0], stderr=aggregate[f][1], correct=scored.correct[f])
                   for f in aggregate},
           request_errors=ev.request_errors, invalid=scored.invalid, status="aborted" if reason else "complete",
           reason=reason, wall_s=round(ev.wall_s, 2), num_concurrent=w.num_concurrent,
           samples_path=str(ev.samples_path) if ev.samples_path else None)
    harness_session.measurements[("gsm8k", arm.name)] = {"per_question": scored.per_question,
                                                          "correct": scored.correct, "n": scored.n}
    if ev.dead:
        pytest.fail(f"arm {arm.name!r}: server died during GSM8K after {scored.n - ev.request_errors} answered "
                    f"questions; samples kept in {ev.samples_path}.\n{ev.dead}", pytrace=False)
    assert ev.error is None, f"arm {arm.name!r}: {ev.error}\n{tail(served_arm.server.log_text(), 5)}"
    limit = gates.load_gates(harness_session.candidate_name).gsm8k.max_request_errors
    assert ev.request_errors <= limit, (
        f"arm {arm.name!r}: {ev.request_errors} GSM8K request(s) failed after retries (at most {limit}); "
        f"last error: {lm.last_error}")


def test_gsm8k_vs_reference(harness_session, record):
    cand, ref, mine, theirs = harness_session.both_measured("gsm8k")
    g = gates.load_gates(cand).gsm8k
    n, b, c = gates.paired_accuracy(mine["per_question"], theirs["per_question"])
    failures = [gates.mcnemar_regression(cand, ref, b, c, g.mcnemar_alpha),
                *gates.accuracy_floors(cand, mine["correct"][g.filter], mine["n"], g.min_accuracy,
                                       g.wilson_floor)]
    failures = [f for f in failures if f]
    detail = "; ".join(failures) or f"{n} paired questions, {b} only {ref} right, {c} only {cand} right"
    record(GateRecord, arm=cand, gate="gsm8k_paired_accuracy", reference=ref, passed=not failures, detail=detail,
           numbers={"paired": n, "only_reference": b, "only_candidate": c})
    assert not failures, "\n".join(failures)
