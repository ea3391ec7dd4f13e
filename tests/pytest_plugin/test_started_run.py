"""The plugin runs what the run started with: each suite's workload is the one run.json recorded (the YAML only
without a run.json), and an arm whose YAML changed since the start fails its tests with one readable error.
Planted faults: a workload YAML and an arm YAML edited after record_run_start, as happened mid-run once (the reference
captured with 16 output tokens, the candidate run with 24)."""

from __future__ import annotations

import functools
import json
import shutil

import pytest

from harness.config import arms as config_arms
from harness.config import workloads as config_workloads
from harness.config.armset import ArmSet, Pair
from harness.config.errors import ConfigError
from harness.config.paths import REPO_ROOT, WORKLOADS_DIR
from harness.pytest_plugin import started_run as session_module
from harness.pytest_plugin.options import Options
from harness.pytest_plugin.session import HarnessSession
from harness.qualify.record import note_resume, record_run_start
from harness.records import runinfo
from harness.records.manifest import read_manifest


@pytest.fixture
def started(tmp_path, arms_dir, monkeypatch):
    """A run of `cand` against `ref` (scratch arms and workloads directories) recorded by record_run_start; returns
    (run_dir, arms dir, workloads dir, write-arm)."""
    d, write = arms_dir
    workloads = tmp_path / "workloads"
    workloads.mkdir()
    shutil.copy(WORKLOADS_DIR / "long_prefix_cpu.yaml", workloads / "lp.yaml")
    write("ref", "extends: base\n")
    write("cand", "extends: base\nreference: ref\nworkloads: {long_prefix: lp}\nserver: {env: {HF_TOKEN: hf_s3cr3t}}\n")
    for module in (runinfo, session_module):  # both read the scratch directories
        monkeypatch.setattr(module, "load_workload",
                            functools.partial(config_workloads.load_workload, workloads_dir=workloads))
    monkeypatch.setattr(session_module, "load_arm", functools.partial(config_arms.load_arm, arms_dir=d))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    arms = [config_arms.load_arm(n, (), d) for n in ("cand", "ref")]
    record_run_start(run_dir, arms, ["qualify", "--arm", "cand"], ["long_prefix"], ArmSet((Pair("cand", "ref"),)))
    return run_dir, d, workloads, write


def edit_output_tokens(workloads, tokens: int) -> None:
    path = workloads / "lp.yaml"
    text = path.read_text()
    assert "output_tokens: 32" in text
    path.write_text(text.replace("output_tokens: 32", f"output_tokens: {tokens}"))


def test_a_workload_edited_mid_run_does_not_reach_the_suites(started):
    run_dir, _, workloads, _ = started
    edit_output_tokens(workloads, 24)
    s = HarnessSession(Options(arm="cand", run_dir=run_dir))
    assert s.workload("long_prefix").output_tokens == 32  # the candidate's, as recorded
    s.focus_on("suites/test_long_prefix.py::test_long_prefix[ref]")
    assert s.candidate_name == "cand" and s.workload("long_prefix").output_tokens == 32  # the reference's: the same
    note_resume(run_dir, read_manifest(run_dir), ["qualify", "--resume", str(run_dir)])
    resumed = HarnessSession(Options(arm="cand", run_dir=run_dir, resume=True))
    assert resumed.workload("long_prefix").output_tokens == 32  # a resumed run: the first start's


def test_without_run_json_the_yaml_is_read_and_the_edit_shows(started):
    """The counterpart: pytest run by hand on a run directory without run.json reads the YAML, edit included; so
    what protected the run above is the recorded workload."""
    run_dir, _, workloads, _ = started
    edit_output_tokens(workloads, 24)
    (run_dir / "run.json").unlink()
    assert HarnessSession(Options(arm="cand", run_dir=run_dir)).workload("long_prefix").output_tokens == 24


def test_an_unreadable_run_json_fails_what_needs_it_with_the_reason(started):
    run_dir, _, _, _ = started
    (run_dir / "run.json").write_text("{")
    s = HarnessSession(Options(arm="cand", run_dir=run_dir))
    with pytest.raises(ConfigError, match=r"run.json: not JSON .*what this run started with is not known; restore it, or start a new run"):
        s.workload("long_prefix")


def test_an_unchanged_arm_loads_from_its_yaml_secrets_and_all(started):
    run_dir, _, _, _ = started
    s = HarnessSession(Options(arm="cand", run_dir=run_dir))
    assert s.run.arm_set == ArmSet((Pair("cand", "ref"),))
    assert s.arm("cand").server.env["HF_TOKEN"] == "hf_s3cr3t"  # launched from the YAML, not the redacted dump
    assert json.loads((run_dir / "run.json").read_text())["arms"]["cand"]["server"]["env"]["HF_TOKEN"] == "<redacted>"
    assert s.arm("ref").name == "ref"


def test_an_arm_edited_mid_run_is_refused_with_its_file_and_field(started):
    run_dir, d, _, write = started
    write("cand", "extends: base\nreference: ref\nworkloads: {long_prefix: lp}\nserver: {env: {HF_TOKEN: hf_s3cr3t}}\n"
                  "parallelism: {tp: 4}\n")
    s = HarnessSession(Options(arm="cand", run_dir=run_dir))
    with pytest.raises(ConfigError) as exc:
        s.arm("cand")
    assert str(exc.value) == (f"arm 'cand': {d / 'cand.yaml'} changed since the run started: field parallelism.tp is "
                              "now 4, the run started with 8 (run.json). Restart the run, or restore the file")
    assert s.arm("ref").name == "ref"  # the other arm runs on
    assert s.run.arm_set == ArmSet((Pair("cand", "ref"),))  # the run's pairs stay the recorded ones


def test_a_changed_secret_is_caught_without_showing_it(started):
    run_dir, _, _, write = started
    write("cand", "extends: base\nreference: ref\nworkloads: {long_prefix: lp}\nserver: {env: {HF_TOKEN: hf_0ther}}\n")
    # both dumps are redacted alike: a rotated token is no change of the arm, and never printed
    assert HarnessSession(Options(arm="cand", run_dir=run_dir)).arm("cand").server.env["HF_TOKEN"] == "hf_0ther"


SUITE = '''
import os

def test_workload(harness_session):
    with open(os.environ["OUT"], "w") as f:
        f.write(str(harness_session.workload("long_prefix").output_tokens))

def test_arm(harness_session):
    harness_session.arm(harness_session.candidate_name)
'''


def test_through_the_plugin_the_arms_tests_fail_with_the_message_alone(started, pytester, tmp_path, monkeypatch):
    """The real plugin in a fresh pytest: the suite gets the recorded workload, and the test that loads the edited
    arm fails with the ConfigError's sentence, no traceback through the harness; its outcome record says the same."""
    run_dir, d, workloads, write = started
    edit_output_tokens(workloads, 24)
    write("cand", "extends: base\nreference: ref\nworkloads: {long_prefix: lp}\nserver: {env: {HF_TOKEN: hf_s3cr3t}}\n"
                  "parallelism: {tp: 4}\n")
    pytester.makeconftest('pytest_plugins = ["harness.pytest_plugin"]\n')
    (pytester.mkdir("suites") / "test_a.py").write_text(SUITE)
    out = tmp_path / "out.txt"
    for name, value in {"OUT": out, "PYTHONPATH": REPO_ROOT, "HARNESS_ARMS_DIR": d,
                        "HARNESS_WORKLOADS_DIR": workloads}.items():
        monkeypatch.setenv(name, str(value))
    result = pytester.runpytest_subprocess("suites", "--arm", "cand", "--run-dir", str(run_dir), "-p",
                                           "no:cacheprovider")
    assert out.read_text() == "32"
    text = result.stdout.str()
    result.assert_outcomes(passed=1, failed=1)
    assert "ConfigError: arm 'cand': " in text and "changed since the run started: field parallelism.tp" in text
    assert "Traceback" not in text and "raise ConfigError" not in text and "session.py" not in text, text
    outcomes = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    (failed,) = [r for r in outcomes if r["kind"] == "outcome" and r["outcome"] == "failed"]
    assert failed["message"].startswith("ConfigError: arm 'cand': ") and "restore the file" in failed["message"]
