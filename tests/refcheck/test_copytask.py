"""Copy-from-far-back sequences and the GPU prompt set's copy prompts (pure)."""

import random

import pytest

from harness.config.workloads import ReferenceChecksWorkload, load_workload
from harness.measure.prompts import TokenSpace
from harness.refcheck.prompts.check_prompts import build_check_prompts
from harness.tinymodel.copytask import copy_accuracy, copy_prompt, copy_sequence

ALLOWED = list(range(4, 2048))


def test_training_sequence_repeats_an_early_span_at_the_end_deterministically():
    s = copy_sequence(random.Random(1), ALLOWED, 2048, 64)
    assert len(s.tokens) == 2048 and s.span_start < 512 - 64 and s.repeat_start == 2048 - 64
    assert s.tokens[s.span_start:s.span_start + 64] == s.span == s.tokens[-64:]
    assert copy_sequence(random.Random(1), ALLOWED, 2048, 64) == s
    with pytest.raises(ValueError):
        copy_sequence(random.Random(1), ALLOWED, 100, 64)


def test_copy_prompt_ends_with_the_cue_and_expects_the_rest_of_the_span():
    prompt, expected = copy_prompt(random.Random(2), ALLOWED, 8400, 96, 16, 32)
    assert len(prompt) == 8400 and len(expected) == 80
    assert prompt[-16:] == prompt[32:48] and prompt[48:128] == expected
    assert copy_accuracy(expected, expected) == 1.0 and copy_accuracy(expected[:40], expected) == 0.5
    with pytest.raises(ValueError):
        copy_prompt(random.Random(2), ALLOWED, 100, 96, 16, 32)


def test_gpu_prompt_set_has_copy_prompts_past_the_shard_boundary_and_keeps_the_other_prompts():
    w = load_workload("reference_checks_gpu", kind=ReferenceChecksWorkload)
    space = TokenSpace(2052, frozenset({0, 1, 2, 3}))
    prompts = build_check_prompts(w, space)
    copies = prompts.rounds[-1]
    assert [p.id for p in copies] == ["copy300-0", "copy300-1", "copy8400-0", "copy8400-1", "copy16600-0",
                                      "copy16600-1"]
    assert all(p.tokens[-16:] == p.tokens[32:48] for p in copies)
    # teacher-forced (prompt + 64 output tokens) they end in a chunk of <= 512 under the arms' 8192-token budget
    assert all(0 < (len(p.tokens) + 64) % 8192 <= 512 for p in copies)
    # the same bytes for every arm and run; the prompts before the copy round do not change when it is added
    assert build_check_prompts(w, space).fingerprint() == prompts.fingerprint()
    without = build_check_prompts(w.model_copy(update={"copy_prompts": None}), space)
    assert without.all() == prompts.all()[:-len(copies)]
    assert w.max_len == 20064 + 64
