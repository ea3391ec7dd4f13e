"""The suites run the run as it started: one StartedRun value (arms loaded once, run.json as written), so a workload or
arm YAML edited mid-run changes nothing; pytest run by hand is admitted and recorded as qualify does, and a resume
whose arm changed since the start is refused before anything runs, naming the file and field. Planted faults: a
workload YAML and an arm YAML edited after record_run_start, as happened mid-run once (the reference captured with
16 output tokens, the candidate run with 24)."""

from __future__ import annotations

import functools
import json
import shutil

import pytest
from byhand import runpytest_by_hand

from harness.admission.record import note_resume, record_run_start
from harness.config import arms as config_arms
from harness.config import workloads as config_workloads
from harness.config.armset import ArmSet, Pair
from harness.config.paths import ARMS_DIR, REPO_ROOT, WORKLOADS_DIR
from harness.pytest_plugin.session import HarnessSession
from harness.records import runinfo
from harness.records.manifest import read_manifest
from harness.records.started_run import StartedRun


@pytest.fixture
def started(tmp_path, arms_dir, monkeypatch):
    """A run of `cand` against `ref` (scratch arms and workloads directories) recorded by record_run_start; returns
    (its StartedRun, arms dir, workloads dir, write-arm)."""
    d, write = arms_dir
    workloads = tmp_path / "workloads"
    workloads.mkdir()
    shutil.copy(WORKLOADS_DIR / "long_prefix_cpu.yaml", workloads / "lp.yaml")
    write("ref", "extends: base\n")
    write("cand", "extends: base\nreference: ref\nworkloads: {long_prefix: lp}\nserver: {env: {HF_TOKEN: hf_s3cr3t}}\n")
    monkeypatch.setattr(runinfo, "load_workload",
                        functools.partial(config_workloads.load_workload, workloads_dir=workloads))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    arms = [config_arms.load_arm(n, (), d) for n in ("cand", "ref")]
    arm_set = ArmSet((Pair("cand", "ref"),))
    manifest = record_run_start(run_dir, arms, ["qualify", "--arm", "cand"], ["long_prefix"], arm_set)
    return StartedRun(run_dir, manifest, {a.name: a for a in arms}, arm_set), d, workloads, write


def edit_output_tokens(workloads, tokens: int) -> None:
    path = workloads / "lp.yaml"
    text = path.read_text()
    assert "output_tokens: 32" in text
    path.write_text(text.replace("output_tokens: 32", f"output_tokens: {tokens}"))


def test_a_workload_or_arm_edited_mid_run_does_not_reach_the_suites(started):
    run, d, workloads, write = started
    edit_output_tokens(workloads, 24)
    write("cand", "extends: base\nreference: ref\nworkloads: {long_prefix: lp}\nparallelism: {tp: 4}\n")
    s = HarnessSession(run)
    assert s.workload("long_prefix", "cand").output_tokens == 32  # the candidate's, as recorded
    assert s.arm("cand").parallelism.tp == 8  # as loaded at the start
    resumed = note_resume(run.run_dir, read_manifest(run.run_dir), ["qualify", "--resume", str(run.run_dir)])
    again = HarnessSession(StartedRun(run.run_dir, resumed, run.arms, run.arm_set, resume=True))
    assert again.workload("long_prefix", "cand").output_tokens == 32  # a resumed run: the first start's


def test_the_arms_run_with_their_secrets_and_run_json_records_them_redacted(started):
    run, _, _, _ = started
    s = HarnessSession(run)
    assert s.run.arm_set == ArmSet((Pair("cand", "ref"),))
    assert s.arm("cand").server.env["HF_TOKEN"] == "hf_s3cr3t"  # launched from the loaded arm, not the redacted dump
    assert json.loads((run.run_dir / "run.json").read_text())["arms"]["cand"]["server"]["env"]["HF_TOKEN"] == "<redacted>"


SUITE = '''
import os

def test_run(harness_session):
    with open(os.environ["OUT"], "w") as f:
        f.write(" ".join(f"{p.candidate}:{p.reference}" for p in harness_session.run.arm_set.pairs))
'''


@pytest.fixture
def by_hand(pytester, tmp_path, monkeypatch):
    """pytest run by hand on a suites/ directory with the real plugin, in a fresh interpreter, on a scratch copy of
    configs/arms (edited between runs); returns (run(*args) -> result, the arms dir, the suite's output file)."""
    arms = tmp_path / "arms"
    shutil.copytree(ARMS_DIR, arms)
    pytester.makeconftest('pytest_plugins = ["harness.pytest_plugin"]\n')
    (pytester.mkdir("suites") / "test_a.py").write_text(SUITE)
    out = tmp_path / "out.txt"
    for name, value in {"OUT": out, "PYTHONPATH": REPO_ROOT, "HARNESS_ARMS_DIR": arms}.items():
        monkeypatch.setenv(name, str(value))

    def run(*args: str):
        return runpytest_by_hand(pytester, "suites", "-p", "no:cacheprovider", *args)

    return run, arms, out


def test_by_hand_a_run_is_admitted_and_recorded_and_a_changed_arm_refuses_its_resume(by_hand, tmp_path):
    """`pytest suites --arm cpu-smoke --run-dir D`: admitted and recorded as qualify does (run.json with its pairs,
    the suite sees them); after an edit of the candidate's YAML, `--resume` is refused before anything runs, naming
    the file and field; with the file restored, the resume runs."""
    run, arms, out = by_hand
    run_dir = tmp_path / "run"
    run("--arm", "cpu-smoke", "--run-dir", str(run_dir)).assert_outcomes(passed=1)
    assert out.read_text() == "cpu-smoke:cpu-ref"
    recorded = json.loads((run_dir / "run.json").read_text())
    assert [(p["candidate"], p["reference"]) for p in recorded["pairs"]] == [("cpu-smoke", "cpu-ref")]
    assert recorded["argv"][0] == "pytest" and recorded["argv"][-4:] == ["--arm", "cpu-smoke", "--run-dir", str(run_dir)]
    smoke = arms / "cpu-smoke.yaml"
    original = smoke.read_text()
    smoke.write_text(original.replace("max_num_batched_tokens: 512", "max_num_batched_tokens: 256"))
    out.unlink()
    refused = run("--resume", "--run-dir", str(run_dir))
    assert refused.ret == pytest.ExitCode.USAGE_ERROR and not out.exists()
    assert (f"ConfigError: --resume: arm 'cpu-smoke': {smoke} changed since the run started: field "
            "server.max_num_batched_tokens is now 256, the run started with 512 (run.json)") in refused.stderr.str()
    smoke.write_text(original)
    run("--resume", "--run-dir", str(run_dir)).assert_outcomes(passed=1)  # the run's own arms: run.json's pairs
    assert len(json.loads((run_dir / "run.json").read_text())["resumed"]) == 1


def test_by_hand_an_unreadable_run_json_refuses_the_resume_with_the_reason(by_hand, tmp_path):
    run, _, _ = by_hand
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text("{")
    refused = run("--resume", "--run-dir", str(run_dir))
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert "run.json: not JSON" in refused.stderr.str() and "start a new run" in refused.stderr.str()
