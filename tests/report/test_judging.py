"""Judging a stored run apart from rendering it (harness/report/judging.py): qualify judges first, records run.json's
end with the verdict, then renders; the report must show that same judgement."""

from __future__ import annotations

import json

from reportrun import make_run

from harness.report.judging import judge
from harness.report.render import render_judged
from harness.report.rundata import load_run


def test_pytests_pass_with_an_enforced_gate_failing_is_judged_1(tmp_path):
    run = make_run(tmp_path, outputs_valid=False)  # the candidate's timed outputs differ: its TPOT gate is FAIL
    judged = judge(load_run(run), None, 0)
    assert judged.exit_code == 1 and [g.gate for g in judged.gates if not g.passed] == ["long_prefix_tpot_p50"]
    assert judge(load_run(make_run(tmp_path / "ok")), None, 0).exit_code == 0  # the same run with valid outputs passes


def test_the_report_shows_the_judgement_it_is_given(tmp_path):
    """render_judged renders the judgement it is given, not one of its own: what qualify recorded is what the report
    says."""
    run = load_run(make_run(tmp_path, outputs_valid=False))
    judged = judge(run, None, 0)
    rendered = render_judged(run, judged)
    assert rendered.exit_code == judged.exit_code == 1
    gates = {g["Gate"]: g["Verdict"] for g in json.loads((run.run_dir / "tables" / "gates.json").read_text())}
    assert gates["long_prefix_tpot_p50"] == "FAIL"
    judged.exit_code = 0  # planted: a judgement that disagrees with the records is shown as given
    assert render_judged(run, judged).exit_code == 0
