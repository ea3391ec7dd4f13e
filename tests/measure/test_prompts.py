import json

import pytest

from harness.config.arms import Arm
from harness.config.errors import ConfigError
from harness.config.workloads import load_workload
from harness.measure.prompts import TokenSpace, build_prompts, token_space


def test_prompts_are_deterministic_share_prefix_and_avoid_specials():
    w = load_workload("long_prefix_cpu")
    space = TokenSpace(64, frozenset({0, 1, 2, 3}))
    a, b = build_prompts(w, space), build_prompts(w, space)
    assert a == b and a.fingerprint() == b.fingerprint()
    prompts = [*a.warmup, *a.measured[1], *a.measured[2]]
    assert all(p[: w.prefix_tokens] == a.prefix for p in prompts)
    assert all(len(p) == w.prompt_tokens for p in prompts)
    suffixes = {tuple(p[w.prefix_tokens:]) for p in prompts}
    assert len(suffixes) == len(prompts), "suffixes must differ per request"
    assert not {t for p in prompts for t in p} & {0, 1, 2, 3}
    other = build_prompts(w.model_copy(update={"seed": 1}), space)
    assert other.fingerprint() != a.fingerprint()


def test_token_space_from_local_model(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 100, "bos_token_id": 1, "eos_token_id": 2}))
    (tmp_path / "tokenizer.json").write_text(json.dumps({"added_tokens": [{"id": 0}, {"id": 3}]}))
    arm = Arm.model_validate({"name": "t", "model": {"path": str(tmp_path), "served_name": "m", "max_model_len": 8}})
    space = token_space(arm, load_workload("long_prefix_cpu"))
    assert space.vocab_size == 100 and space.excluded == {0, 1, 2, 3}


def test_token_space_keeps_a_tiny_models_needle_tokens_out_of_random_prompts(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 16, "bos_token_id": 1, "eos_token_id": 2}))
    (tmp_path / "tinymodel.json").write_text("{}")
    arm = Arm.model_validate({"name": "t", "model": {"path": str(tmp_path), "served_name": "m", "max_model_len": 8}})
    w = load_workload("long_prefix_cpu")
    assert token_space(arm, w).allowed() == [0, *range(3, 16)]
    (tmp_path / "tiny_model.json").write_text(json.dumps({"needle_tokens": [12, 13, 14, 15]}))
    space = token_space(arm, w)
    assert space.reserved == {12, 13, 14, 15} and space.excluded == {1, 2}
    assert space.allowed() == [0, *range(3, 12)]
    prompts = build_prompts(w, space)
    assert not {t for p in [*prompts.warmup, *prompts.measured[1]] for t in p} & space.reserved
    (tmp_path / "tiny_model.json").write_text("{not json")
    with pytest.raises(ConfigError, match="tiny_model.json is unreadable"):
        token_space(arm, w)


def test_hub_model_needs_vocab_size():
    arm = Arm.model_validate({"name": "t", "model": {"path": "org/m", "source": "hub", "served_name": "m",
                                                     "max_model_len": 8}})
    with pytest.raises(ConfigError, match="set vocab_size in the workload YAML"):
        token_space(arm, load_workload("long_prefix_cpu"))
    assert token_space(arm, load_workload("long_prefix_120k")).vocab_size == 163840




def test_metric_prompts_warm_every_length_never_repeat_and_are_the_same_every_time():
    from harness.config.workloads import MetricWorkload
    from harness.measure.prompts import TokenSpace, metric_prompts

    w = MetricWorkload(name="t", lengths=[8, 32], requests_per_length=3, warmup_requests=2, seed=5)
    space = TokenSpace(1000, frozenset({0, 1}), frozenset({7}))
    warmup, measured = metric_prompts(w, space)
    assert [len(p) for p in warmup] == [8, 8, 32, 32] and [len(p) for p in measured] == [8, 8, 8, 32, 32, 32]
    every = [tuple(p) for p in warmup + measured]
    assert len(set(every)) == len(every)  # no prefix-cache hit between two requests
    assert not {0, 1, 7} & {t for p in every for t in p}  # special and reserved tokens left out
    assert metric_prompts(w, space) == (warmup, measured)
    assert metric_prompts(w.model_copy(update={"seed": 6}), space)[1] != measured
