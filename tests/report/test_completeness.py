"""The report's "Missing or incomplete" list: one line per suite x arm, with its reason."""

from harness.records.manifest import parse_manifest
from harness.records.schema import OutcomeRecord
from harness.report.completeness import gaps

CAND_SKIP = "Skipped: arm 'cpu-smoke' has no speculative section: spec_decode measures draft arms (e.g. cpu-spec)"
REF_SKIP = ("Skipped: arm 'cpu-ref' is the reference: spec_decode runs it only as the no-drafter baseline of a "
            "candidate with a speculative section, and candidate 'cpu-smoke' has none")
# A `make qualify` run (cpu-smoke vs cpu-ref) as results.jsonl records its spec_decode suite: the per-arm test skips
# on each arm, and the comparison test, which has no arm of its own, is recorded for the candidate.
INFO = parse_manifest({"arms": {"cpu-smoke": {}, "cpu-ref": {}}, "suites": ["spec_decode"],
                       "per_arm_suites": ["spec_decode"], "finished": "1", "exit_code": 0})


def outcome(arm: str, test: str, message: str, kind: str = "skipped") -> OutcomeRecord:
    return OutcomeRecord(run_id="r", arm=arm, suite="spec_decode", outcome=kind, message=message,
                         test=f"suites/test_spec_decode.py::{test}")


QUALIFY_RECORDS = [outcome("cpu-smoke", "test_spec_decode[cpu-smoke]", CAND_SKIP),
                   outcome("cpu-ref", "test_spec_decode[cpu-ref]", REF_SKIP),
                   outcome("cpu-smoke", "test_spec_decode_vs_reference", CAND_SKIP)]


def test_a_suite_skipped_by_two_tests_of_one_arm_is_listed_once_per_arm_with_its_reason():
    assert gaps(INFO, QUALIFY_RECORDS, ["cpu-smoke", "cpu-ref"]) == [
        "spec_decode x cpu-smoke: skipped: arm 'cpu-smoke' has no speculative section: spec_decode measures draft "
        "arms (e.g. cpu-spec)",
        "spec_decode x cpu-ref: skipped: " + REF_SKIP.removeprefix("Skipped: ")]


def test_distinct_reasons_of_one_suite_x_arm_share_its_line():
    records = [outcome("cpu-smoke", "test_spec_decode[cpu-smoke]", "Skipped: no drafter"),
               outcome("cpu-smoke", "test_spec_decode_vs_reference", "E   RuntimeError: boom", "error"),
               outcome("cpu-smoke", "test_spec_decode_vs_reference", "Skipped: no drafter")]
    assert gaps(INFO, records, ["cpu-smoke"]) == ["spec_decode x cpu-smoke: skipped: no drafter; "
                                                  "error: E   RuntimeError: boom"]


def test_a_passed_test_beside_a_skipped_one_leaves_the_skip_listed():
    records = [outcome("cpu-smoke", "test_spec_decode[cpu-smoke]", "", "passed"),
               outcome("cpu-smoke", "test_spec_decode_vs_reference", "Skipped: no reference samples")]
    assert gaps(INFO, records, ["cpu-smoke"]) == ["spec_decode x cpu-smoke: skipped: no reference samples"]


def test_each_kind_says_in_its_own_words_what_did_not_finish():
    """The lines each record kind declares (harness/records/meaning.py), in record order, reasons cut to one line."""
    from harness.records.schema import DcpOpsRecord, Gsm8kRecord, ServerRecord
    from harness.report.completeness import aborted
    from tests.report.test_tables import lp

    level = lp("dcp8", 2, (11.8, 19.4, 27.5), (0.01, 0.02), failed=1, status="aborted").model_copy(
        update={"reason": "server died\ntraceback", "metrics_scrape_errors": 2})
    gsm = Gsm8kRecord(run_id="r", arm="dcp8", suite="gsm8k", workload="gsm8k", task="gsm8k", data_files=None,
                      lm_eval_version="0", task_hash=None, num_fewshot=5, limit=None, n=0, scores={}, request_errors=0,
                      invalid=0, status="aborted", reason=None, wall_s=1.0, num_concurrent=1, samples_path=None)
    ops = DcpOpsRecord(run_id="r", arm="dcp8", suite="dcp_ops", status="no_data", passed=False, detail="no runner\nx",
                       world=2, device="cpu")
    server = ServerRecord(run_id="r", arm="tp8", suite="server", status="failed", reason="exited 1\nlog")
    assert aborted([level, gsm, ops, server]) == [
        "long_prefix x dcp8 c2: 2 /metrics scrape(s) failed during the workload: KV-cache use is summarised from the "
        "rest", "long_prefix x dcp8 c2: aborted after 8 request(s): server died", "gsm8k x dcp8: aborted: ",
        "dcp_ops x dcp8: no runner", "server x tp8: failed to start: exited 1"]
