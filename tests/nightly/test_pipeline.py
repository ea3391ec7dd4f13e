"""`harness pipeline`: the emitted YAML validates against Buildkite's published pipeline schema (buildkite/pipeline-schema
schema.json, as vendored by the check-jsonschema package: `vendor.buildkite`), each step qualifies one arm group with
`qualify --arms`, and each step's command dry-runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.resources import files

import jsonschema
import pytest
import yaml

from harness.config.arms import load_arm
from harness.config.paths import REPO_ROOT
from harness.nightly.pipeline import arm_groups, pipeline

SCHEMA = json.loads((files("check_jsonschema.builtin_schemas.vendor") / "buildkite.json").read_text())
ARMS = "dcp8,gpu-mla,cpu-smoke,dspark-dcp8"
# A multi-node arm's step needs its allocation's hosts (launcher.nodes) from the agent: emitted, not dry-run here.
MULTI_NODE = "tp16-dcp16"
MLA_CONFIG = {"architectures": ["DeepseekV3ForCausalLM"], "num_attention_heads": 16, "num_key_value_heads": 16,
              "kv_lora_rank": 512, "qk_rope_head_dim": 64, "max_position_embeddings": 65536, "vocab_size": 2048}


def emit(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "harness", "pipeline", *args], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)


def schema_errors(doc: dict) -> list[str]:
    validator = jsonschema.validators.validator_for(SCHEMA)(SCHEMA)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


@pytest.fixture(scope="module")
def nightly() -> dict:
    return emit("--arms", f"{ARMS},{MULTI_NODE}", "--nightly", "--parallel")


def test_nightly_pipeline_validates_against_buildkites_schema(nightly):
    assert schema_errors(nightly) == []


def test_a_step_buildkite_would_refuse_fails_the_schema(nightly):
    broken = json.loads(json.dumps(nightly))
    broken["steps"][0]["retry"]["automatic"][0]["limit"] = 11  # Buildkite allows at most 10 automatic retries
    broken["steps"][1]["artifact_paths"] = 3
    errors = schema_errors(broken)
    assert errors and any("steps/0" in e for e in errors) and any("steps/1" in e for e in errors)


def test_one_step_per_arm_group_placed_by_gpu_count(nightly):
    steps = {s["key"]: s for s in nightly["steps"]}
    # dcp8 and dspark-dcp8 share tp8: one step, one run, tp8 started once; tp16-dcp16 (also against tp8) needs two
    # nodes and gets a step of its own
    assert list(steps) == [f"qualify-{g}" for g in ("dcp8_dspark-dcp8", "gpu-mla", "cpu-smoke", "tp16-dcp16")]
    assert steps["qualify-dcp8_dspark-dcp8"]["env"]["HARNESS_ARMS"] == "dcp8,dspark-dcp8"
    assert steps["qualify-dcp8_dspark-dcp8"]["label"] == ":vllm: qualify dcp8, dspark-dcp8 vs tp8"
    assert steps["qualify-dcp8_dspark-dcp8"]["agents"] == {"queue": "gpu", "gpus": "24"}  # three arms side by side
    assert steps["qualify-gpu-mla"]["agents"] == {"queue": "gpu", "gpus": "2"}
    assert steps["qualify-cpu-smoke"]["agents"] == {"queue": "cpu"}
    assert steps["qualify-tp16-dcp16"]["agents"] == {"queue": "gpu", "gpus": "16", "nodes": "2"}
    assert steps["qualify-dcp8_dspark-dcp8"]["concurrency_group"] == "dcp-harness/gpu-24gpu"
    for key, s in steps.items():
        run_id = s["env"]["HARNESS_RUN_ID"]
        assert run_id == f"nightly-${{BUILDKITE_BUILD_NUMBER}}-{key.removeprefix('qualify-')}"
        group = key.removeprefix("qualify-")
        assert s["artifact_paths"] == [f"reports/{run_id}/**/*", f"reports/history-{group}.sqlite"]
        assert s["env"]["HARNESS_HISTORY"] == f"reports/history-{group}.sqlite" and s["env"]["HARNESS_HISTORY_CHECK"] == "1"
        assert {"exit_status": -1, "limit": 2} in s["retry"]["automatic"]
        assert s["env"]["HARNESS_BASELINE_FROM"] == "previous-nightly" and s["concurrency"] == 1


def test_serial_groups_ask_for_the_largest_arm_and_no_baseline_without_nightly():
    doc = emit("--arms", "dcp8")
    step = doc["steps"][0]
    assert step["agents"]["gpus"] == "8" and "HARNESS_BASELINE_FROM" not in step["env"]
    assert step["env"]["HARNESS_RUN_ID"] == "ci-${BUILDKITE_BUILD_NUMBER}-dcp8" and schema_errors(doc) == []
    shared = emit("--arms", "dcp8,dspark-dcp8")["steps"]
    assert len(shared) == 1 and shared[0]["agents"]["gpus"] == "8"  # one server at a time


def load_set(*names: str):
    from harness.config.armset import expand_arm_set

    arms = {n: load_arm(n, geometry=False) for n in names}
    for a in list(arms.values()):
        if a.reference:
            arms.setdefault(a.reference, load_arm(a.reference, geometry=False))
    return expand_arm_set(list(names), {n: arms[n].reference for n in names}), arms


def test_a_named_reference_runs_in_its_candidates_group():
    groups = arm_groups(*load_set("gpu-mla", "gpu-mla-ref"))
    assert [([c.name for c in g.candidates], [a.name for a in g.arms]) for g in groups] == [
        (["gpu-mla"], ["gpu-mla", "gpu-mla-ref"])]
    assert pipeline(groups, nightly=False)["steps"][0]["agents"]["gpus"] == "1"


def test_groups_follow_shared_references_and_node_counts():
    """Linked candidates share a step; a candidate that is another's reference joins it; different node counts
    split, and unrelated candidates get steps of their own."""
    groups = arm_groups(*load_set("gpu-dcp2", "gpu-tp2-2node", "gpu-mla", "gpu-mla-eager", "cpu-smoke"))
    assert [(g.key, [a.name for a in g.arms]) for g in groups] == [
        ("gpu-dcp2", ["gpu-dcp2", "gpu-tp2"]), ("gpu-tp2-2node", ["gpu-tp2-2node", "gpu-tp2"]),
        ("gpu-mla_gpu-mla-eager", ["gpu-mla", "gpu-mla-eager", "gpu-mla-ref"]), ("cpu-smoke", ["cpu-smoke", "cpu-ref"])]


def test_unknown_arm_exits_2_naming_it():
    out = subprocess.run([sys.executable, "-m", "harness", "pipeline", "--arms", "dcp8,nope"], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "unknown arm 'nope'" in out.stderr and not out.stdout


GROUPS = {"dcp8_dspark-dcp8": "dcp8,dspark-dcp8", "gpu-mla": "gpu-mla", "cpu-smoke": "cpu-smoke"}


@pytest.mark.parametrize("group", GROUPS)
def test_each_steps_command_dry_runs(nightly, group, tmp_path):
    """The step's own command, with the step's env, in dry-run mode: the script finds the previous nightly the way it
    would (here: given), prints the qualify and artifact commands and runs `harness plan --arms` on the group (each
    candidate's plan)."""
    step = next(s for s in nightly["steps"] if s["key"] == f"qualify-{group}")
    env = {**os.environ, **{k: v.replace("${BUILDKITE_BUILD_NUMBER}", "42") for k, v in step["env"].items()},
           "HARNESS_DRY_RUN": "1", "NIGHTLY_BASELINE_BUILD": "0190-abc", "NIGHTLY_BASELINE_NUMBER": "41",
           "HARNESS_PYTHON": sys.executable}
    if group == "gpu-mla":  # its tiny MLA model is generated on the GPU host; here a config.json stands in for it
        (tmp_path / "tiny-mla").mkdir()
        (tmp_path / "tiny-mla" / "config.json").write_text(json.dumps(MLA_CONFIG))
        shutil.copytree(REPO_ROOT / "configs" / "arms", tmp_path / "arms")
        ref = tmp_path / "arms" / "gpu-mla-ref.yaml"
        ref.write_text(ref.read_text().replace("path: models/tiny-mla", f"path: {tmp_path / 'tiny-mla'}"))
        env["HARNESS_ARMS_DIR"] = str(tmp_path / "arms")
    out = subprocess.run(step["command"].split(), cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (f"would run: buildkite-agent artifact download reports/nightly-41-{group}/results.jsonl baseline/ "
            "--build 0190-abc") in out.stdout
    assert f"-m harness qualify --arms {GROUPS[group]} --run-id nightly-42-{group}" in out.stdout
    assert f"--baseline baseline/reports/nightly-41-{group}/results.jsonl" in out.stdout
    assert (f"would run: buildkite-agent artifact download reports/history-{group}.sqlite . --build 0190-abc"
            in out.stdout)
    assert f"-m harness history check --run nightly-42-{group} (store reports/history-{group}.sqlite)" in out.stdout
    preflights = [part.split("this machine")[0] for part in out.stdout.split("\npreflight:")[1:]]
    assert len(preflights) == len(GROUPS[group].split(",")), "one plan per candidate"
    assert all("[ok] tp_divisible_by_dcp" in p and "[FAIL]" not in p for p in preflights), out.stdout


def test_a_shared_history_path_is_used_by_every_nightly_step_and_not_carried_as_an_artifact():
    doc = emit("--arms", "dcp8,gpu-mla", "--nightly", "--history", "/shared/dcp-history.sqlite")
    for s in doc["steps"]:
        assert s["env"]["HARNESS_HISTORY"] == "/shared/dcp-history.sqlite" and s["env"]["HARNESS_HISTORY_CHECK"] == "1"
        assert s["artifact_paths"] == [f"reports/{s['env']['HARNESS_RUN_ID']}/**/*"]
    assert all("HARNESS_HISTORY" not in s["env"] for s in emit("--arms", "dcp8")["steps"])
