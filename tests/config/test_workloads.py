
import pytest

from harness.config.errors import ConfigError
from harness.config.workloads import load_workload


def test_shipped_workloads():
    big = load_workload("long_prefix_120k")
    assert (big.prefix_tokens, big.suffix_tokens, big.output_tokens, big.concurrency) == (114000, 6000, 400, [1, 2])
    assert big.max_len == 120_400
    small = load_workload("long_prefix_cpu")
    assert small.max_len <= 4096


def test_bad_workload_yaml(tmp_path):
    (tmp_path / "w.yaml").write_text("prefix_tokens: 10\nsuffix_tokens: 1\noutput_tokens: 1\nconcurrency: []\n")
    with pytest.raises(ConfigError) as exc:
        load_workload("w", tmp_path)
    msg = str(exc.value)
    assert "w.yaml" in msg and "field output_tokens" in msg and "field concurrency" in msg and "requests_per_level" in msg
    with pytest.raises(ConfigError, match="unknown workload 'nope'"):
        load_workload("nope", tmp_path)


def test_prompt_basis_defaults_to_token_ids_and_takes_only_its_two_values(tmp_path):
    assert load_workload("long_prefix_cpu").prompt_basis == "token_ids"
    base = "prefix_tokens: 10\nsuffix_tokens: 1\noutput_tokens: 2\nconcurrency: [1]\nrequests_per_level: 1\n"
    (tmp_path / "t.yaml").write_text(base + "prompt_basis: text\n")
    assert load_workload("t", tmp_path).prompt_basis == "text"
    (tmp_path / "b.yaml").write_text(base + "prompt_basis: strings\n")
    with pytest.raises(ConfigError, match="field prompt_basis"):
        load_workload("b", tmp_path)
