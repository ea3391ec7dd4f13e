"""Bad input: one readable message naming file and field, exit code 2, nothing started."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.config.paths import REPO_ROOT


def harness(*args: str, arms_dir=None, reports_dir=None) -> subprocess.CompletedProcess:
    # Not a strict run even under CI=true (.ci/run sets it): strictness is tested on its own (test_bad_input)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if arms_dir:
        env["HARNESS_ARMS_DIR"] = str(arms_dir)
    if reports_dir:
        env["HARNESS_REPORTS_DIR"] = str(reports_dir)
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def bad_arms(arms_dir):
    d, write = arms_dir
    write("syntax", "model: {path: x\nparallelism: [\n")
    write("typo", "extends: base\nparallelism: {tpp: 8}\n")
    write("mistyped", "extends: base\nparallelism: {tp: eight}\n")
    write("nomodel", "extends: base\nmodel: {path: /nonexistent/model}\n")
    write("cycle1", "extends: cycle2\n")
    write("cycle2", "extends: cycle1\n")
    write("violates", "extends: base\nparallelism: {tp: 8, dcp: 2, pcp: 2}\n")
    return d


@pytest.mark.parametrize("arm, needle", [
    ("unknown-arm", "unknown arm 'unknown-arm'"),
    ("syntax", "syntax.yaml: line 2, column 12: YAML syntax error"),
    ("typo", "field parallelism.tpp: unknown field"),
    ("mistyped", "field parallelism.tp: Input should be a valid integer"),
    ("nomodel", "field model.path: local model directory /nonexistent/model does not exist"),
    ("cycle1", "extends cycle in configs/arms: cycle1 -> cycle2 -> cycle1"),
    ("violates", "pcp_off_with_dcp: pcp 2 with dcp 2: prefill CP must be 1 when DCP > 1"),
])
@pytest.mark.parametrize("command", ["plan", "qualify"])
def test_bad_arm_exits_2_with_one_message_and_starts_nothing(bad_arms, tmp_path, arm, needle, command):
    reports = tmp_path / "reports"
    result = harness(command, "--arm", arm, "--no-vllm-check", arms_dir=bad_arms, reports_dir=reports)
    assert result.returncode == 2, result.stdout + result.stderr
    assert needle in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert not reports.exists(), "a run directory was created for an arm that failed its checks"


def test_bad_set_exits_2():
    result = harness("plan", "--arm", "dcp8", "--set", "parallelism.dcp", "--no-vllm-check")
    assert result.returncode == 2 and "expected PATH=VALUE" in result.stderr


def test_plan_of_shipped_arm_passes_preflight():
    result = harness("plan", "--arm", "tp16-dcp16", "--no-vllm-check", "--set", "launcher.nodes=[gpu-a01,gpu-a02]")
    assert result.returncode == 0, result.stderr
    assert "[node 1 @ gpu-a02]" in result.stdout and "96 transport heads" in result.stdout
    unallocated = harness("plan", "--arm", "tp16-dcp16", "--no-vllm-check")  # this machine does not decide
    assert unallocated.returncode == 0 and "--nodelist=<node0>" in unallocated.stdout
    assert "slurm_allocation: arm 'tp16-dcp16'" in unallocated.stdout and "outside a SLURM allocation" in unallocated.stdout


def test_make_tiny_model_takes_the_arch_and_device_the_gpu_arms_document():
    from harness.cli import build_parser

    args = build_parser().parse_args(["make-tiny-model", "--arch", "deepseek_v3", "--device", "cuda", "--out", "m"])
    assert (args.arch, args.device, args.out) == ("deepseek_v3", "cuda", "m")
    assert build_parser().parse_args(["make-tiny-model"]).arch == "llama"


def test_make_tiny_model_forwards_keep_weak_retrieval_to_the_generator(monkeypatch):
    from harness import cli

    calls = []
    monkeypatch.setattr(cli.subprocess, "call", lambda argv, env: calls.append(argv) or 0)
    for extra in ([], ["--keep-weak-retrieval"]):
        cli.cmd_make_tiny_model(cli.build_parser().parse_args(["make-tiny-model", "--arch", "deepseek_v3", *extra]))
    assert ["--keep-weak-retrieval" in argv for argv in calls] == [False, True]


def test_plan_prints_env_secrets_redacted():
    result = harness("plan", "--arm", "dcp8", "--no-vllm-check", "--set", "server.env.HF_TOKEN=s3cr3t-plan",
                     "--set=server.env.VLLM_API_KEY=s3cr3t-plan2")
    assert result.returncode == 0, result.stderr
    assert "env HF_TOKEN=<redacted>" in result.stdout and "env VLLM_API_KEY=<redacted>" in result.stdout
    assert "s3cr3t-plan" not in result.stdout + result.stderr


def test_resume_alone_takes_the_runs_own_candidates_from_run_json(tmp_path):
    """`qualify --resume RUN` without --arm/--arms: the run's pairs, as run.json recorded them (one candidate with its
    reference, or several each against its own)."""
    import json

    from harness.admission.admitting import named_candidates, resumed_manifest
    from harness.admission.request import QualifyRequest

    def names(info: dict, **given):
        run = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        run.mkdir()
        (run / "run.json").write_text(json.dumps(info))
        request = QualifyRequest(resume=str(run), **given)
        return named_candidates(request, resumed_manifest(request)[1])

    several = {"arms": {"cpu-smoke": {}, "cpu-spec": {}, "cpu-ref": {}},
               "pairs": [{"candidate": "cpu-smoke", "reference": "cpu-ref"},
                         {"candidate": "cpu-spec", "reference": "cpu-ref"}]}
    assert names(several) == (["cpu-smoke", "cpu-spec"], None)
    assert names({"arms": {"cpu-smoke": {}, "tp8": {}}}) == (["cpu-smoke"], "tp8")  # before pairs were recorded
    assert names(several, arms="cpu-smoke,cpu-spec") == (["cpu-smoke", "cpu-spec"], None)
    assert names(several, arm="cpu-smoke") == (["cpu-smoke"], None)  # checked against run.json later


def test_plan_of_several_arms_plans_each_and_fails_naming_the_one_that_violates(bad_arms):
    result = harness("plan", "--arms", "base,violates", "--no-vllm-check", arms_dir=bad_arms)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "=== base (1 of 2) ===" in result.stdout and "=== violates (2 of 2) ===" in result.stdout
    assert "error: arm 'violates' fails preflight" in result.stderr and "arm 'base'" not in result.stderr
    ok = harness("plan", "--arms", "base", "--no-vllm-check", arms_dir=bad_arms)
    assert ok.returncode == 0 and "===" not in ok.stdout, ok.stderr  # one arm: the single-arm output
    for both_or_none in (["--arm", "base", "--arms", "base"], []):
        refused = harness("plan", *both_or_none, "--no-vllm-check", arms_dir=bad_arms)
        assert refused.returncode == 2 and "name one arm (--arm NAME) or several (--arms a,b)" in refused.stderr


def test_plan_of_candidates_sharing_a_reference_with_other_workloads_exits_2(arms_dir):
    d, write = arms_dir
    write("ref", "extends: base\n")
    write("c1", "extends: base\nreference: ref\n")
    write("c2", "extends: base\nreference: ref\nworkloads: {long_prefix: long_prefix_gpu_smoke}\n")
    result = harness("plan", "--arms", "c1,c2", "--no-vllm-check", arms_dir=d)
    assert result.returncode == 2 and "long_prefix" in result.stderr and "c2" in result.stderr, result.stderr
    assert harness("plan", "--arms", "c1", "--no-vllm-check", arms_dir=d).returncode == 0


def test_scoped_set_reaches_the_reference_and_eager_variant_before_they_are_validated(arms_dir):
    """`--set ARM:model.path=DIR` fixes a reference (or eager variant) whose YAML names a model this machine lacks:
    the arm is validated with its override, not from its YAML alone."""
    d, write = arms_dir
    model = d.parent / "model"
    write("ref", "extends: base\nmodel: {path: /nonexistent/ref-model}\n")
    write("eager", "extends: base\nmodel: {path: /nonexistent/eager-model}\nserver: {enforce_eager: true}\n")
    write("cand", "extends: base\nreference: ref\neager_variant: eager\n")
    bare = harness("plan", "--arm", "cand", "--no-vllm-check", arms_dir=d)
    assert bare.returncode == 2 and "field reference: arm 'ref' is invalid" in bare.stderr, bare.stderr
    for command in ("plan", "qualify"):
        extra = ["--suites", "kv_capacity", "--run-dir", str(d.parent / "run")] if command == "qualify" else []
        fixed = harness(command, "--arm", "cand", "--no-vllm-check", "--set", f"ref:model.path={model}",
                        "--set", f"eager:model.path={model}", *extra, arms_dir=d)
        out = fixed.stdout + fixed.stderr
        assert "is invalid" not in out and "/nonexistent" not in out, out
        # cand's own KV is uncapped: its output_coverage (a default suite) runs its KV families on its twin
        assert command == "qualify" or ("named arms: ref (reference), eager (eager variant), cand.kv-twin (KV-capped "
                                        "twin): valid") in out
