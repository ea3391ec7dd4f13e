"""The headline at a glance (issue 58 item 7): the lines that FAIL come first and marked in the annotation and the
report, under a count; tables/headline.md keeps the measures' order (the stored-run re-render tests hold it byte
for byte). Checked on the real lines of a stored CPU run, clean and with two checks planted to fail."""

from __future__ import annotations

from harness.report.glance import glance, glance_markdown, verdict_of
from harness.report.render import render_run
from tests.report.stored_failing import STORED, failing_copy

LINES = ["TPOT p50 c1: cpu-smoke 5.0 ms vs cpu-ref 5.1 ms (-2.0%)",
         "Check graph_replay vs cpu-ref: PASS (32/32 exact; not calibrated)",
         "Check teacher_forcing vs cpu-ref: FAIL (35/38 exact; not calibrated)",
         "Gate long_prefix_tpot_p50: FAIL (no data: c1 (not enforced for this arm: gates.yaml enforce_timing false))",
         "Check long_context vs cpu-ref: PASS (33/33 cells pass; long_context vs its floor: FAIL)",
         "Capacity FAIL: at TPOT p99 <= 300 ms: cpu-smoke serves c2, cpu-ref c4",
         "Check prefix_reuse vs cpu-ref: aborted (0/6 exact)"]


def test_failures_come_first_in_order_then_unenforced_then_the_rest():
    g = glance(LINES)
    assert g.failed == [LINES[2], LINES[5], LINES[6]]
    assert g.unenforced == [LINES[3]]
    assert g.rest == [LINES[0], LINES[1], LINES[4]]  # a FAIL inside the parentheses is not the line's verdict
    assert g.tally == "3 of 7 lines FAIL (1 more FAIL, not enforced)"


def test_the_verdict_is_the_word_before_the_first_parenthesis():
    assert verdict_of("cpu-fast vs cpu-ref: FAILED (gate gsm8k_paired_accuracy)") == "FAILED"
    assert verdict_of("cpu-smoke vs cpu-ref: PASSED") == "PASSED"
    assert verdict_of("KV capacity: cpu-smoke 25,600 tokens vs cpu-ref 174,720 tokens (0.15x)") is None
    assert verdict_of("Coverage: outputs checked to 4,024 context tokens (FAIL later)") is None


def test_markdown_marks_each_failure_and_keeps_the_rest_unmarked():
    md = glance_markdown(LINES).splitlines()
    assert md[:3] == ["### Headline", "", "**3 of 7 lines FAIL (1 more FAIL, not enforced)**"]
    assert md[4:8] == [f"- ❌ {LINES[2]}", f"- ❌ {LINES[5]}", f"- ❌ {LINES[6]}", f"- ⚠️ {LINES[3]}"]
    assert md[8:11] == [f"- {LINES[0]}", f"- {LINES[1]}", f"- {LINES[4]}"]
    assert glance_markdown([]) == ""


def test_a_stored_failing_cpu_run_shows_its_failures_first_and_keeps_headline_md_in_measure_order(tmp_path):
    run = failing_copy(tmp_path)
    rendered = render_run(run)
    bullets = [x for x in rendered.markdown.split("### Accuracy")[0].splitlines() if x.startswith("- ")]
    assert "**2 of 20 lines FAIL (1 more FAIL, not enforced)**" in rendered.markdown
    assert bullets[:3] == ["- ❌ Check prefix_reuse vs cpu-ref: FAIL (3/6 exact; not calibrated)",
                           "- ❌ Check teacher_forcing vs cpu-ref: FAIL (35/38 exact; not calibrated)",
                           "- ⚠️ Gate long_prefix_tpot_p50: FAIL (no data: cpu-smoke c1: timing invalid (buffered "
                           "stream): 1/4 requests' output arrived at once (not enforced for this arm: gates.yaml "
                           "enforce_timing false))"]
    assert not any("FAIL (" in x for x in bullets[3:])
    # the pasted PR summary keeps the measures' order, unmarked
    pasted = (run / "tables" / "headline.md").read_text().splitlines()
    assert pasted[0].startswith("- TPOT p50 c1:") and "- Check prefix_reuse vs cpu-ref: FAIL (3/6 exact; " \
        "not calibrated)" in pasted and not any("❌" in x for x in pasted)
    page = rendered.html_path.read_text()
    assert '<p class="tally bad">2 of 20 lines FAIL (1 more FAIL, not enforced)</p>' in page
    assert page.index('<li class="fail">') < page.index('<li class="unenforced">') < page.index("<li>TPOT p50 c1")


def test_the_clean_stored_run_has_no_failure_on_top(tmp_path):
    import shutil

    run = tmp_path / STORED.name
    shutil.copytree(STORED, run, ignore=shutil.ignore_patterns("tables"))
    rendered = render_run(run)
    assert "**0 of 20 lines FAIL (1 more FAIL, not enforced)**" in rendered.markdown
    assert "❌" not in rendered.markdown and '<p class="tally ok">' in rendered.html_path.read_text()
