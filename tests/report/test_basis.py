"""The verdict's first line names how it was reached (issue 55 item 6): what judged the candidates' reference
checks -- a calibration trusted by hand, a first calibration, gates.yaml's seed limits -- and which tests were
skipped. The judged_by lines are written by the real CheckLimits, as a run writes them into its records."""

from __future__ import annotations

from pathlib import Path

from harness.records.schema import OutcomeRecord, ReferenceCheckRecord
from harness.refcheck.judging.check import CheckLimits, run_budget
from harness.refcheck.store.floor_store import Calibration
from harness.report.basis import verdict_basis, warning_labels
from harness.report.render import annotation, render_run
from tests.report.stored_failing import failing_copy

CAND, REF = "gpu-mla", "gpu-ref"
REASON = "bf16 seeds fail every clean repeat (issue 55)"


def limits(check: str, trusted: str | None = None, first: bool = True, confirmed: bool = False,
           inherited: list | None = None) -> CheckLimits:
    calibration = Calibration(check, 0.1, 0.02, 5, 0.0, "derived", "deterministic over 5 repeats",
                              "2026-12-04T00:00:00", "cal-h100", {}, supersedes=None if first else "cal-older",
                              trusted=trusted, inherited=inherited)
    return CheckLimits(check, CAND, 0.1, 0.02, True, Path("/floors/gpu-mla-0123456789abcdef"), calibration,
                       confirmed=confirmed)


def uncalibrated(check: str) -> CheckLimits:
    return CheckLimits(check, CAND, 0.25, 0.0, False, Path("/floors"), None)


def record(lim: CheckLimits, passed: bool = True, detectable: str | None = None) -> ReferenceCheckRecord:
    """The check's record as judge_floor writes it: a calibrated check's line ends with its run's error budget."""
    budget = f"; {run_budget(lim).text}" if lim.calibration is not None else ""
    return ReferenceCheckRecord(run_id="r", arm=CAND, suite=lim.check, check=lim.check, reference=REF,
                                reference_key="k", passed=passed, detail="", requests=4, exact_matches=4,
                                first_divergence_min=None, max_drift=0.0, nonfinite=0, drift_limit=lim.drift_limit,
                                judged_by=lim.judged_by + budget, detectable=detectable)


def skipped(test: str, arm: str = CAND) -> OutcomeRecord:
    return OutcomeRecord(run_id="r", arm=arm, suite=test.split("::")[0], test=test, outcome="skipped",
                         message="skips on every GPU arm")


def test_a_trusted_first_calibration_says_so_first():
    records = [record(limits(c, trusted=REASON)) for c in ("teacher_forcing", "graph_replay")]
    assert verdict_basis(records, [CAND]) == (f"calibration trusted by hand: {REASON}; first calibration; "
                                              "2 reference checks calibrated; error budget 1 % per run (m = 1); 0 tests skipped")


def test_a_confirmed_untrusted_calibration_carries_no_warning():
    records = [record(limits(c, first=False, confirmed=True)) for c in ("teacher_forcing", "graph_replay")]
    assert verdict_basis(records, [CAND]) == "2 reference checks calibrated; error budget 1 % per run (m = 1); 0 tests skipped"


def test_skipped_calibrated_families_are_named_and_the_reference_arms_skips_are_not_counted():
    records = [record(limits("teacher_forcing", first=False, confirmed=True)),
               skipped("suites/test_output_coverage.py::test_kv_pressure"),
               skipped("suites/test_output_coverage.py::test_recycled_blocks"),
               skipped("suites/test_gsm8k.py::test_gsm8k_outputs_vs_reference"),
               skipped("suites/test_spec_decode.py::test_spec_decode[gpu-ref]", arm=REF)]
    assert verdict_basis(records, [CAND]) == ("1 reference check calibrated; error budget 1 % per run (m = 1); 3 tests skipped: "
                                              "kv_pressure, "
                                              "recycled_blocks, gsm8k_outputs_vs_reference")


def test_a_test_skipped_then_run_is_not_counted_and_a_partial_label_says_how_many():
    records = [skipped("suites/test_output_coverage.py::test_kv_pressure"),
               OutcomeRecord(run_id="r", arm=CAND, suite="s", test="suites/test_output_coverage.py::test_kv_pressure",
                             outcome="passed"),
               record(limits("teacher_forcing", trusted=REASON)), record(limits("graph_replay", first=False)),
               record(uncalibrated("prefix_reuse"))]
    assert verdict_basis(records, [CAND]) == (f"calibration trusted by hand: {REASON} (1 of 3 checks); first "
                                              "calibration (1 of 3 checks); 2 of 3 reference checks calibrated, 1 "
                                              "by gates.yaml limits; error budget 1 % per run (m = 1); 0 tests skipped")


def test_labels_end_where_the_next_part_begins_and_inherited_ones_name_their_calibration():
    lim = limits("teacher_forcing", trusted=REASON, first=False, inherited=[
        {"label": "first calibration", "calibration": "cal-a", "reason": None},
        {"label": "trusted by hand", "calibration": "cal-a", "reason": "seed limits fail bf16"}])
    line = record(lim).judged_by + "; run on the calibration's own build"
    assert "per check" in line  # the run's error budget follows the labels
    assert warning_labels(line) == [
        f"trusted by hand: {REASON}",
        "first calibration (inherited from calibration cal-a, not confirmed since)",
        "trusted by hand: seed limits fail bf16 (inherited from calibration cal-a, not confirmed since)"]
    assert warning_labels(uncalibrated("teacher_forcing").judged_by) == []
    assert verdict_basis([record(lim)], [CAND]) == (
        f"calibration trusted by hand: {REASON}; calibration trusted by hand: seed limits fail bf16 (inherited from "
        "calibration cal-a, not confirmed since); first calibration (inherited from calibration cal-a, not confirmed "
        "since); 1 reference check calibrated; error budget 1 % per run (m = 1); 0 tests skipped")


def test_the_basis_states_the_runs_budget_and_the_smallest_shift_its_checks_catch():
    floor = ("smallest mean shift caught at 80 %: 0.000412 per check at alpha 0.01/2 (1 % per run; its floor test at "
             "0.0013; the run's mean |delta| above the clean mean, 5 clean repeats)")
    anchor = "float32 anchor: smallest rise of the excess caught at 80 %: 5.6e-05 (alpha 0.01/2 per check, ...)"
    records = [record(limits("teacher_forcing", first=False, confirmed=True), detectable=f"{floor}; {anchor}"),
               record(limits("graph_replay", first=False, confirmed=True), detectable=floor.replace("412", "35"))]
    assert verdict_basis(records, [CAND]) == (
        "2 reference checks calibrated; error budget 1 % per run (m = 1), smallest shift caught at 80 %: 5.6e-05 "
        "(teacher_forcing, float32 anchor) to 0.00035 (graph_replay); 0 tests skipped")


def test_no_reference_check_and_unrecorded_limits_are_said():
    assert verdict_basis([], [CAND]) == "no reference check judged; 0 tests skipped"
    old = record(uncalibrated("teacher_forcing")).model_copy(update={"judged_by": None})
    assert verdict_basis([old], [CAND]) == "1 reference check with no record of what judged it; 0 tests skipped"
    both = [old, record(uncalibrated("graph_replay"))]
    assert verdict_basis(both, [CAND]) == ("1 of 2 reference checks by gates.yaml limits, not calibrated; 1 reference "
                                           "check with no record of what judged it; 0 tests skipped")


def test_the_stored_cpu_runs_annotation_opens_with_its_basis(tmp_path):
    run = failing_copy(tmp_path)
    rendered = render_run(run)
    assert rendered.basis == ("13 reference checks by gates.yaml limits, not calibrated; 4 tests skipped: "
                              "graph_replay_vs_eager, spec_decode, dcp_ops, spec_decode_vs_reference")
    first = annotation([("cpu-smoke", "cpu-ref")], rendered.exit_code, rendered.markdown, basis=rendered.basis)
    assert first.splitlines()[0] == f"## DCP qualification FAILED: cpu-smoke vs cpu-ref (exit code 1) — judged: " \
        f"{rendered.basis}"
    assert f'<div class="basis">judged: {rendered.basis}</div>' in rendered.html_path.read_text()
