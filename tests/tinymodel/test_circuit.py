"""The CPU tiny model's hand-set retrieval circuit: it copies needle spans at length, leaves ordinary text as the
model without it computes it, and stops copying when a planted fault shifts its previous-token head."""

import json
import random
import subprocess

import numpy as np
import pytest

from harness.config.paths import REPO_ROOT, server_python
from harness.tinymodel.needles import N_NEEDLES, code_dims, needle_copy_prompt
from harness.tinymodel.ropekernel import kernel_gap, kernel_weights, rope_frequencies


def test_needle_codes_share_at_most_one_digit():
    codes = [set(code_dims(i)) for i in range(N_NEEDLES)]
    assert len({frozenset(c) for c in codes}) == N_NEEDLES and all(len(c) == 2 for c in codes)
    assert max(len(codes[a] & codes[b]) for a in range(0, N_NEEDLES, 7) for b in range(N_NEEDLES) if a != b) == 1


def test_needle_copy_prompt_has_one_span_of_distinct_needles_and_its_cue_at_the_end():
    needles = list(range(100, 140))
    prompt, expected = needle_copy_prompt(random.Random(0), list(range(4, 100)), needles, 200, 24, 8, 50)
    assert len(prompt) == 200 and prompt[50:74] == prompt[50:58] + expected and prompt[-8:] == prompt[50:58]
    assert len(set(prompt[50:74])) == 24 and sum(t in needles for t in prompt) == 32


@pytest.mark.parametrize(("theta", "dim", "max_len"), [(1e8, 128, 8192), (1e4, 64, 131072)])
def test_previous_token_kernel_peaks_at_offset_one_with_a_wide_gap_to_max_len(theta, dim, max_len):
    freqs = rope_frequencies(theta, dim)
    w = kernel_weights(freqs, min(max_len, 8192), iters=300)
    gap, _ = kernel_gap(w, freqs, max_len)
    assert gap > 0.15  # of the peak (fitted on 8k offsets here): the circuit scales the peak to PREV_GAP / gap
    # A planted fault: weights on the fast pairs only (no far-position penalty) realign somewhere before max_len.
    fast = np.where(np.arange(len(freqs)) < 4, 1.0, 0.0)
    assert kernel_gap(fast, freqs, max_len)[0] < 0.05


def probe(fault: dict, length: int) -> dict:
    result = subprocess.run([server_python(), str(REPO_ROOT / "tests" / "tinymodel" / "circuit_probe.py"),
                             json.dumps(fault), str(length)], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=300, env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def server_torch():
    ok = subprocess.run([server_python(), "-c", "import torch, transformers"], capture_output=True).returncode == 0
    if not ok:
        pytest.skip("needs torch/transformers in the server environment")


def test_circuit_copies_needles_and_leaves_ordinary_text_alone(server_torch):
    out = probe({}, 384)
    assert out["retrieval"] == {"384": 1.0}
    drift = out["drift"]
    assert drift["greedy_identical"] == drift["prompts"] == 4 and drift["max_abs_delta_logprob"] < 1e-3
    # Served with one KV head per query head (6, which TP2 splits 3 + 3; the circuit's 3 it cannot), the same logits.
    assert out["kv_heads"] == [3, 6] and out["unroll_delta"] < 1e-5


def test_previous_token_head_off_by_one_breaks_retrieval(server_torch):
    out = probe({"prev_offset": 2}, 384)  # reads the token two back: the copy skips one token each step
    assert out["retrieval"]["384"] < 0.1
    assert out["drift"]["greedy_identical"] == 4  # ordinary text still untouched: the fault is in the circuit


def test_mla_circuit_copies_needles_leaves_ordinary_text_and_fails_off_by_one(server_torch, tmp_path):
    """The GPU model's circuit (MLA geometry), on CPU in float32 at a short length, on a residual stream grown 100x
    through the layers as training grows it (the circuit's earlier form retrieved 0.0 there, 1.0 at growth 1); the
    H200 run of the same script (bf16, 1k-122k tokens) is in circuit_mla.py's notes."""
    out = tmp_path / "mla.json"
    result = subprocess.run([server_python(), str(REPO_ROOT / "benchmarks" / "mla_circuit_probe.py"), "--dtype",
                             "float32", "--lengths", "160", "--fault-lengths", "160", "--depths", "0.5",
                             "--drift-prompts", "2", "--kernel-len", "8192", "--residual-growth", "100",
                             "--out", str(out)],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["clean"]["retrieval"] == {"160": 1.0}
    assert doc["clean"]["drift"]["greedy_identical"] == 2 and doc["clean"]["drift"]["max_abs_delta_logprob"] < 1e-3
    assert doc["prev_offset_2"]["retrieval"]["160"] < 0.1


def test_circuit_problems_name_what_falls_short_and_nothing_when_it_retrieves():
    from harness.tinymodel.retrieval import circuit_problems

    clean = {"prompts": 13, "greedy_identical": 13, "max_abs_delta_logprob": 0.0}
    assert circuit_problems(clean, {"1000": 1.0, "122000": 0.95}) == []
    moved = circuit_problems({**clean, "greedy_identical": 12}, {"1000": 1.0})
    assert len(moved) == 1 and "moved ordinary text" in moved[0]
    low = circuit_problems(clean, {"1000": 1.0, "65536": 0.42})
    assert low == ["retrieval below 0.9 at {'65536': 0.42}"]
