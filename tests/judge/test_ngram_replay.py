"""The n-gram replay: the port of vLLM's proposer gives vLLM's own proposals (its numba function, run in the server
environment, on random and repetitive contexts); the replay counts drafts and accepted tokens as the server's
counters do on a worked example; a wrong port (shortest match, latest occurrence) is caught."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from harness.config.paths import REPO_ROOT, server_python
from harness.judge.ngram_replay import lookup_bounds, propose, replay, replay_request

VLLM_PROPOSER = r"""
import json, sys
import numpy as np
from vllm.v1.spec_decode.ngram_proposer import _find_longest_matched_ngram_and_propose_tokens as find
cases = json.loads(sys.stdin.read())
print(json.dumps([find(np.array(c, dtype=np.int32), lo, hi, mml, k).tolist() for c, lo, hi, k, mml in cases]))
"""


def contexts(seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(300):
        vocab = rng.choice([2, 3, 5, 20])  # small vocabularies repeat: many matches, of every length
        out.append([rng.randrange(vocab) for _ in range(rng.randrange(1, 60))])
    return out


def test_the_port_proposes_what_vllms_own_proposer_proposes():
    params = [(2, 4, 3, 4096), (1, 1, 5, 4096), (3, 5, 4, 4096), (2, 4, 3, 40)]  # the last: max_model_len caps k
    cases = [(c, *params[i % len(params)]) for i, c in enumerate(contexts())]
    proc = subprocess.run([server_python(), "-c", VLLM_PROPOSER], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=300, cwd=REPO_ROOT)
    if proc.returncode != 0 and "No module named 'vllm'" in proc.stderr:
        pytest.skip("needs vLLM in the server environment (make setup)")
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = [propose(c, lo, hi, k, mml) for c, lo, hi, k, mml in cases]
    assert sum(bool(t) for t in theirs) > 100  # the cases exercise matches, not only "no proposal"
    assert ours == theirs


def test_a_wrong_port_is_caught_by_the_same_cases():
    def shortest_latest(context, lo, hi, k, mml):  # plausible but wrong: the latest occurrence of the shortest n-gram
        for n in range(lo, hi + 1):
            tail = context[-n:]
            for start in range(len(context) - n - 1, -1, -1):
                if len(tail) == n and context[start:start + n] == tail:
                    return context[start + n:start + n + k]
        return []

    cases = [(c, 2, 4, 3, 4096) for c in contexts(1)]
    assert any(propose(*c) != shortest_latest(*c) for c in cases)


def test_replay_counts_drafts_and_accepted_tokens_step_by_step():
    prompt, output = [1, 2, 3, 1, 2], [3, 1, 2, 9, 9, 9]  # the first 3 comes from the prefill, undrafted
    r = replay_request(prompt, output, 2, 4, 3, 4096)
    # context 1 2 3 1 2 3: its suffix "1 2 3" occurs at 0 -> proposes 1 2 3; the output goes 1 2 9: 2 accepted and
    # the target's 9 added. Context ... 1 2 9: no earlier "2 9" -> no draft, 9 added; ... 9 9: no earlier "9 9" either.
    assert (r.drafts, r.draft_tokens, r.accepted_min, r.accepted_max, r.per_pos_min) == (1, 3, 2, 2, [1, 1, 0])


def test_a_last_draft_past_max_tokens_gives_a_range():
    prompt, output = [5, 6, 7, 8, 5, 6], [7, 8, 5]  # ctx ... 5 6 7 -> proposes 8 5 6; output has 8 5 then ends
    r = replay_request(prompt, output, 2, 4, 3, 4096)
    assert (r.drafts, r.accepted_min, r.accepted_max) == (1, 2, 3)  # the third (6) was verified, never streamed


def test_requests_sum_as_the_counters_do():
    a, b = ([1, 2, 3, 1, 2], [3, 1, 2, 9, 9, 9]), ([5, 6, 7, 8, 5, 6], [7, 8, 5])
    r = replay([a, b], 2, 4, 3, 4096)
    assert (r.drafts, r.draft_tokens, r.accepted_min, r.accepted_max) == (2, 6, 4, 5)


def test_lookup_bounds_as_vllm_resolves_them():
    assert lookup_bounds({}) == (5, 5)
    assert lookup_bounds({"prompt_lookup_max": 4}) == (4, 4)
    assert lookup_bounds({"prompt_lookup_min": 2, "prompt_lookup_max": 4}) == (2, 4)
