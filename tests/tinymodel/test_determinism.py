"""The GPU tiny model's generator is deterministic: two runs (toy sizes, on CPU, in the server environment) give the
same weights hash and the same safetensors bytes. On the device the same code runs with deterministic CUDA kernels."""

import hashlib
import json
import subprocess

import pytest

from harness.config.paths import REPO_ROOT, gsm8k_dir, server_python
from harness.tinymodel.generate import PLANS, QUICK

GSM8K_TRAIN = gsm8k_dir() / "train.jsonl"  # where the harness reads it: $HARNESS_GSM8K_DIR, else ../shared/data


def test_the_gpu_model_is_planned_for_cpu_and_the_cpu_model_stays_as_it_was():
    """The GPU model trains on CPU (one model on every GPU kind): short, no copy task (it did not train at this size;
    retrieval is the circuit's, measured and refused below 0.9)."""
    assert PLANS["deepseek_v3"].copy_steps == 0 and not PLANS["deepseek_v3"].probe_lengths
    assert PLANS["deepseek_v3"].steps * PLANS["deepseek_v3"].seq_len * PLANS["deepseek_v3"].batch <= 60 * 128 * 8
    assert PLANS["llama"].copy_steps == 0 and PLANS["llama"].steps == 300
    assert QUICK.copy_steps and QUICK.corpus_rows


def generate(out, *extra):
    result = subprocess.run([server_python(), "-m", "harness.tinymodel", "--arch", "deepseek_v3", "--quick",
                             "--out", str(out), "--gsm8k-train", str(GSM8K_TRAIN), *extra], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads((out / "tiny_model.json").read_text())


def needs_server_torch():
    probe = subprocess.run([server_python(), "-c", "import torch, transformers, tokenizers"], capture_output=True)
    if probe.returncode != 0 or not GSM8K_TRAIN.is_file():
        pytest.skip(f"needs torch/transformers in the server environment ({server_python()}) and {GSM8K_TRAIN}")


@pytest.fixture(scope="module")
def first_model(tmp_path_factory):
    """One quick generation (with the circuit), shared by the tests that compare another one with it."""
    needs_server_torch()
    out = tmp_path_factory.mktemp("a")
    return out, generate(out)


def test_two_generations_give_the_same_weights_hash(first_model, tmp_path):
    (dir_a, a), b = first_model, generate(tmp_path / "b")
    assert a["deterministic"] == "strict" and a["weights_sha256"] == b["weights_sha256"]
    assert a["tokenizer_sha256"] == b["tokenizer_sha256"]
    assert a["copy_steps"] == 3 and "96" in a["copy_accuracy_bf16"]
    assert a["quality"]["weights_sha256"] == a["weights_sha256"] and a["quality"]["retrieval_accuracy"]
    files = [hashlib.sha256((d / "model.safetensors").read_bytes()).hexdigest() for d in (dir_a, tmp_path / "b")]
    assert files[0] == files[1]


def test_the_circuit_control_is_the_trained_model_without_needles_or_circuit(first_model, tmp_path):
    """--without-retrieval-circuit (the device control of the circuit's bf16 noise): the same training, saved
    without the needle vocabulary or the circuit, and tiny_model.json says so."""
    (dir_with, with_circuit), without = first_model, generate(tmp_path / "without", "--without-retrieval-circuit")
    assert without["retrieval"]["installed"] is False and "needle_tokens" not in without
    assert "needle_tokens" in with_circuit and without["weights_sha256"] != with_circuit["weights_sha256"]
    assert without["final_loss"] == with_circuit["final_loss"]  # the same training run
    vocab = [json.loads((d / "config.json").read_text())["vocab_size"] for d in (tmp_path / "without", dir_with)]
    assert vocab[0] < vocab[1]


def test_the_circuit_control_is_refused_for_the_cpu_llama():
    from harness.tinymodel.generate import main

    assert main(["--arch", "llama", "--without-retrieval-circuit", "--out", "x", "--gsm8k-train", "x"]) == 2
