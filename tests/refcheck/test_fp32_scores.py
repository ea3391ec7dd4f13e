"""The float32 anchor's scores: the scorer itself (transformers in the server environment, on the generated tiny model)
scores each continuation token given exactly its prefix; the store computes them once per reference key and never
reuses them for other tokens or another key."""

from __future__ import annotations

import json
import subprocess

import pytest

from harness.config.errors import ConfigError
from harness.config.paths import REPO_ROOT, server_python
from harness.refcheck.prompts.check_prompts import CheckPrompt, prompt_sha
from harness.refcheck.store import fp32_scores as fs

MODEL = REPO_ROOT / "models" / "tiny-llama"


def run_scorer(tmp_path, requests: list[dict], *extra: str) -> dict[str, list[float]]:
    probe = subprocess.run([server_python(), "-c", "import torch, transformers"], capture_output=True)
    if probe.returncode != 0 or not (MODEL / "config.json").is_file():
        pytest.skip(f"needs torch/transformers in the server environment and {MODEL} (`make model`)")
    job, out = tmp_path / "job.json", tmp_path / "out.json"
    job.write_text(json.dumps({"requests": requests}))
    proc = subprocess.run([server_python(), "-m", "harness.tinymodel.teacher_score", "--model", str(MODEL), "--job",
                           str(job), "--out", str(out), *extra], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(out.read_text())["scores"]


def test_the_scorer_scores_each_token_given_exactly_its_prefix(tmp_path):
    """Request b is request a with two of its tokens moved into the prompt: its scores are a's from the third on (to
    float32 rounding). A scorer off by one position (b's tokens scored one step late) would not match."""
    prompt, tokens = [5, 17, 230, 41, 99, 7, 300, 12], [64, 8, 120, 33, 250, 19]
    scores = run_scorer(tmp_path, [{"id": "a", "prompt": prompt, "tokens": tokens},
                                   {"id": "b", "prompt": prompt + tokens[:2], "tokens": tokens[2:]},
                                   {"id": "late", "prompt": prompt + tokens[:1], "tokens": tokens[2:]}])
    assert len(scores["a"]) == len(tokens) and all(x <= 0 for x in scores["a"])
    assert max(abs(x - y) for x, y in zip(scores["a"][2:], scores["b"], strict=True)) < 1e-4
    assert max(abs(x - y) for x, y in zip(scores["a"][2:], scores["late"], strict=True)) > 1e-2


def test_a_bad_job_file_is_refused_with_exit_2(tmp_path):
    (tmp_path / "job.json").write_text("{}")
    proc = subprocess.run([server_python(), "-m", "harness.tinymodel.teacher_score", "--model", str(MODEL), "--job",
                           str(tmp_path / "job.json"), "--out", str(tmp_path / "o.json")], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "is no job file" in proc.stderr and not (tmp_path / "o.json").exists()


def outputs_file(tmp_path, prompts: list[CheckPrompt], tokens: list[int]):
    path = tmp_path / "cpu-ref-abc.json"
    path.write_text(json.dumps({"outputs": {p.id: {"prompt_sha": prompt_sha(p.tokens), "token_ids": tokens,
                                                   "logprobs": [-0.1] * len(tokens), "top": []} for p in prompts}}))
    return path


def test_scores_are_computed_once_per_key_and_never_reused_for_other_tokens(tmp_path, monkeypatch):
    prompts = [CheckPrompt("p0", [1, 2, 3], "g"), CheckPrompt("p1", [4, 5], "g")]
    calls = []

    def scorer(python, model_dir, requests):  # the scorer's output document, as teacher_score writes it
        calls.append(sorted(requests))
        return {"dtype": "float32", "torch": "t", "transformers": "x",
                "scores": {i: [-0.5 - len(calls)] * len(r["tokens"]) for i, r in requests.items()}}

    monkeypatch.setattr(fs, "score", scorer)
    path = outputs_file(tmp_path, prompts, [7, 8])
    first = fs.fp32_scores(path, "abc", prompts, MODEL, "python")
    assert first == {"p0": [-1.5, -1.5], "p1": [-1.5, -1.5]} and len(calls) == 1
    assert fs.scores_file(path).name == "cpu-ref-abc.fp32.json"
    assert fs.fp32_scores(path, "abc", prompts, MODEL, "python") == first and len(calls) == 1  # from the store
    assert fs.fp32_scores(path, "other", prompts, MODEL, "python") != first and len(calls) == 2  # another key
    outputs_file(tmp_path, prompts, [7, 9])  # the reference recaptured other tokens under the same name
    assert fs.fp32_scores(path, "other", prompts, MODEL, "python")["p0"] == [-3.5, -3.5] and len(calls) == 3


def test_outputs_of_other_prompts_are_refused_naming_the_prompt(tmp_path):
    prompts = [CheckPrompt("p0", [1, 2, 3], "g")]
    path = outputs_file(tmp_path, prompts, [7])
    with pytest.raises(ConfigError, match="prompt p0 is missing or of other tokens"):
        fs.fp32_scores(path, "abc", [CheckPrompt("p0", [1, 2, 4], "g")], MODEL, "python")
    assert not fs.scores_file(path).exists()
