"""Gates -> exit code and JUnit: a suite whose gate fails makes pytest exit 1, and its JUnit test case carries
the gate's sentence (what Buildkite test analytics shows). A small fake suite runs through the real plugin."""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET

from startedruns import shipped

from harness.report.render import render_run

FAKE_SUITE = '''
from harness.config.thresholds import load_gates
from harness.judge.gates import tpot_gate
from harness.records.schema import GateRecord, LongPrefixRecord, ReferenceCheckRecord, Summary


def level(arm, tpot_s):
    return dict(arm=arm, workload="w", prompts_sha="sha", concurrency=1, status="complete", requests=4, failed=0,
                ttft=Summary.of([0.1]), tpot=Summary.of([tpot_s] * 4), itl=Summary.of([tpot_s]), e2e=Summary.of([1.0]),
                kv_usage=None, gpu_memory_mib=None, samples_path="s")


def test_measure(record):
    record(LongPrefixRecord, **level("dcp8", {cand_tpot}))
    record(LongPrefixRecord, **level("tp8", 0.005))
    # the timed outputs matched the reference's: the TPOT gate counts
    record(ReferenceCheckRecord, arm="dcp8", check="long_prefix_outputs", reference="tp8", reference_key="k",
           passed=True, detail="long_prefix_outputs: 4/4 exact", requests=4, exact_matches=4,
           first_divergence_min=None, max_drift=0.0, nonfinite=0, drift_limit=0.01)


def test_tpot_vs_reference(harness_session, under_test, record):
    cand, ref = under_test.pair()
    gate = tpot_gate(harness_session.records(), cand, ref, load_gates(cand).long_prefix)
    record(GateRecord, **gate.record_fields())
    assert gate.passed, gate.detail
'''


def run_fake_suite(pytester, tmp_path, passed: bool):
    """The fake suite under the real plugin, its run (dcp8 vs tp8, recorded without admission: no GPU here) handed to
    pytest as a value, as qualify hands it."""
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_fake.py").write_text(textwrap.dedent(FAKE_SUITE.format(cand_tpot=0.005 if passed else 0.009)))
    run = tmp_path / "run"
    result = pytester.runpytest_inprocess(str(suites / "test_fake.py"), "-p", "harness.pytest_plugin", "-p",
                                          "no:cacheprovider", f"--junitxml={run / 'junit.xml'}", "-o",
                                          "junit_family=xunit2", "-q", plugins=[shipped(run, ["dcp8"])])
    (run / "run.json").unlink()  # the report below recomputes the gate from results.jsonl alone
    return result, run


def test_failing_gate_fails_the_run_and_its_junit_case_carries_the_sentence(pytester, tmp_path):
    proc, run = run_fake_suite(pytester, tmp_path, passed=False)
    assert proc.ret == 1, proc.stdout.str()
    cases = {c.get("name"): c for c in ET.parse(run / "junit.xml").getroot().iter("testcase")}
    assert set(cases) == {"test_tpot_vs_reference", "test_measure"}
    failure = cases["test_tpot_vs_reference"].find("failure")
    assert failure is not None and cases["test_measure"].find("failure") is None
    sentence = "c1: dcp8 TPOT p50 9.000 ms > tp8 5.000 ms x (1 + 0.05) = 5.250 ms"
    assert sentence in failure.get("message") and sentence in failure.text
    rendered = render_run(run, exit_code=proc.ret)  # the gate recomputed from results.jsonl alone
    assert f"| long_prefix_tpot_p50 | dcp8 vs tp8        | FAIL      | {sentence} |" in rendered.markdown
    assert "| fake    | dcp8  | test_tpot_vs_reference | failed    |" in rendered.markdown
    assert "FAILED (exit code 1)" in rendered.html_path.read_text()


def test_passing_gate_exits_0_with_no_failure_in_junit(pytester, tmp_path):
    proc, run = run_fake_suite(pytester, tmp_path, passed=True)
    assert proc.ret == 0, proc.stdout.str()
    assert not list(ET.parse(run / "junit.xml").getroot().iter("failure"))
    rendered = render_run(run, exit_code=proc.ret)
    assert ("| long_prefix_tpot_p50 | dcp8 vs tp8        | PASS      | TPOT p50 within 0.05 of tp8 at every concurrency |"
            in rendered.markdown)
