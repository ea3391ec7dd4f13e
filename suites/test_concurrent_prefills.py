"""Concurrent mixed-length prefills (workload concurrent_prefills, refcheck/prompt_sets/concurrent_prefills.py): prompts
from a few tokens to near max_model_len, some partial prefix hits, sent together in each arrival order; every output
against the reference arm's output of the same prompt sent alone, judged by the check's limits and floor (its
calibration's, or gates.yaml's). Partial hits the server's counter cannot prove read FAIL (no data), never PASS."""

from __future__ import annotations

from harness.records.schema import ReferenceCheckRecord
from harness.refcheck.judging.compare import checked_to
from harness.refcheck.judging.comparisons import record_fields
from harness.refcheck.prompt_sets.concurrent_prefills import PREFILLS, send_bursts
from harness.refcheck.send.coverage_send import CoverageServer


def skip_reason(session, under_test, served: bool) -> str | None:
    """Read before any server starts: every output is compared with the reference's."""
    if session.reference_of(under_test.arm) is None:
        return f"arm {under_test.arm!r} names no reference arm: {PREFILLS} compares a candidate with its reference"
    return None


def test_concurrent_prefills(concurrent_prefills_outputs, candidate, harness_session, under_test, record):
    stored, arm = concurrent_prefills_outputs, under_test.candidate
    w, prompts, _ = under_test.prompt_set(PREFILLS)
    check = under_test.reference_check(PREFILLS, stored.noise_key)
    sink = harness_session.run_dir / arm / f"{PREFILLS}_vs_{stored.arm}_comparisons.jsonl"
    sink.parent.mkdir(parents=True, exist_ok=True)
    sink.unlink(missing_ok=True)
    server = CoverageServer(candidate, w.top_logprobs, f"{PREFILLS}-{harness_session.run_id}", sink)
    fam = send_bursts(server, prompts, stored.outputs, w.orders)
    fields = record_fields(PREFILLS, stored.arm, stored.key, fam.compared, check.drift_limit, sink, fam.unproven,
                           check.tie_gap)
    fields = check.judge(fields, fam.compared.comparisons, bool(fam.compared.aborted)).fields
    fields = fields.model_copy(update={"detail": "; ".join([fields.detail, *fam.notes])})
    rec = record(ReferenceCheckRecord, arm=arm, of=fields, checked_to_tokens=checked_to(fam.compared.comparisons),
                 cached_tokens_proven=fam.cached_tokens, covered=fam.covered)
    assert rec.passed, (f"{PREFILLS} on {arm!r} vs {stored.arm!r} (reference {stored.path}): {rec.detail}\n"
                        + "\n".join(rec.diverged) + (f"\n{fam.compared.aborted}" if fam.compared.aborted else ""))
