"""Gates -> exit code and JUnit: a suite whose gate fails makes pytest exit 1, and its JUnit test case carries
the gate's sentence (what Buildkite test analytics shows). A small fake suite runs through the real plugin."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

from harness.config.paths import REPO_ROOT
from harness.report.render import render_run

FAKE_SUITE = '''
from harness.records.schema import GateRecord

SENTENCE = "c1: cpu-smoke TPOT p50 9.000 ms > cpu-ref 5.000 ms x (1 + 0.05) = 5.250 ms"


def test_tpot_vs_reference(record):
    passed = {passed}
    record(GateRecord, arm="cpu-smoke", gate="long_prefix_tpot_p50", reference="cpu-ref", passed=passed,
           detail="within tolerance" if passed else SENTENCE)
    assert passed, SENTENCE


def test_other_check(record):
    pass
'''


def run_fake_suite(tmp_path, passed: bool):
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "test_fake.py").write_text(textwrap.dedent(FAKE_SUITE.format(passed=passed)))
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run([sys.executable, "-m", "pytest", str(suites / "test_fake.py"), "-p", "harness.pytest_plugin.plugin",
                           "-p", "no:cacheprovider", "--arm", "cpu-smoke", "--run-dir", str(run),
                           f"--junitxml={run / 'junit.xml'}", "-o", "junit_family=xunit2", "-q"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    return proc, run


def test_failing_gate_fails_the_run_and_its_junit_case_carries_the_sentence(tmp_path):
    proc, run = run_fake_suite(tmp_path, passed=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    cases = {c.get("name"): c for c in ET.parse(run / "junit.xml").getroot().iter("testcase")}
    assert set(cases) == {"test_tpot_vs_reference", "test_other_check"}
    failure = cases["test_tpot_vs_reference"].find("failure")
    assert failure is not None and cases["test_other_check"].find("failure") is None
    sentence = "c1: cpu-smoke TPOT p50 9.000 ms > cpu-ref 5.000 ms x (1 + 0.05) = 5.250 ms"
    assert sentence in failure.get("message") and sentence in failure.text
    rendered = render_run(run, exit_code=proc.returncode)
    assert f"| long_prefix_tpot_p50 | cpu-smoke vs cpu-ref | FAIL      | {sentence} |" in rendered.markdown
    assert "| fake    | cpu-smoke | test_tpot_vs_reference | failed    |" in rendered.markdown
    assert "FAILED (exit code 1)" in rendered.html_path.read_text()


def test_passing_gate_exits_0_with_no_failure_in_junit(tmp_path):
    proc, run = run_fake_suite(tmp_path, passed=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not list(ET.parse(run / "junit.xml").getroot().iter("failure"))
    rendered = render_run(run, exit_code=proc.returncode)
    assert "| long_prefix_tpot_p50 | cpu-smoke vs cpu-ref | PASS      | within tolerance |" in rendered.markdown
