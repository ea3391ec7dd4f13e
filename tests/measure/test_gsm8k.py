import pytest

from harness.config.errors import ConfigError
from harness.config.paths import gsm8k_dir
from harness.measure.gsm8k import (
    INVALID,
    REQUEST_ERROR,
    data_file_hashes,
    offline_task,
    score_samples,
    validate_jsonl,
)


@pytest.mark.skipif(not (gsm8k_dir() / "test.jsonl").is_file(),
                    reason="the shared GSM8K files ($HARNESS_GSM8K_DIR, default ../shared/data/gsm8k) are not here")
def test_shared_data_validates():
    assert validate_jsonl(gsm8k_dir() / "test.jsonl") == 1319
    assert validate_jsonl(gsm8k_dir() / "train.jsonl") == 7473


def test_missing_and_malformed_data_fail_before_any_request(tmp_path):
    with pytest.raises(ConfigError, match=r"GSM8K data file .*nope.jsonl not found: set HARNESS_GSM8K_DIR"):
        validate_jsonl(tmp_path / "nope.jsonl")
    bad = tmp_path / "test.jsonl"
    bad.write_text('{"question": "q", "answer": "#### 1"}\n{"question": "q", "answer": \n')
    with pytest.raises(ConfigError, match=r"test.jsonl:2: malformed JSON"):
        validate_jsonl(bad)
    bad.write_text('{"question": "q"}\n')
    with pytest.raises(ConfigError, match=r"test.jsonl:1: missing field\(s\) \['answer'\]"):
        validate_jsonl(bad)


def test_offline_task_is_lm_evals_gsm8k_on_local_files(tmp_path):
    import yaml

    data = tmp_path / "gsm8k"
    data.mkdir()
    for split in ("train", "test"):
        (data / f"{split}.jsonl").write_text('{"question": "1 + 1?", "answer": "#### 2"}\n')
    source = offline_task(data, tmp_path)
    cfg = yaml.safe_load((tmp_path / "gsm8k_local.yaml").read_text())
    assert cfg["dataset_path"] == "json" and "dataset_name" not in cfg
    assert cfg["dataset_kwargs"]["data_files"]["test"].endswith("gsm8k/test.jsonl")
    assert [f["name"] for f in cfg["filter_list"]] == ["strict-match", "flexible-extract"]
    assert cfg["num_fewshot"] == 5 and cfg["generation_kwargs"]["do_sample"] is False
    assert source.task == "gsm8k_local" and source.include_path == tmp_path


def sample(doc, flt, resp, extracted, ok):
    return {"doc_id": doc, "filter": flt, "resps": [[resp]], "filtered_resps": [extracted], "exact_match": float(ok)}


def test_score_samples_counts_from_the_per_sample_log():
    samples = []
    for doc, resp, strict, flexible in [(0, "... #### 18", ("18", True), ("18", True)),
                                        (1, "it is 7 apples", (INVALID, False), ("7", True)),
                                        (2, "", (INVALID, False), (INVALID, False)),
                                        (3, REQUEST_ERROR, (INVALID, False), (INVALID, False)),
                                        (4, "no number", (INVALID, False), (INVALID, False))]:
        samples += [sample(doc, "strict-match", resp, *strict), sample(doc, "flexible-extract", resp, *flexible)]
    s = score_samples(samples)
    assert s.n == 5 and s.correct == {"strict-match": 1, "flexible-extract": 2}
    assert s.request_errors == 1 and s.invalid == 2  # the empty answer and "no number"; the error is not invalid
    assert s.per_question["strict-match"] == {0: True, 1: False, 2: False, 3: False, 4: False}
    assert s.per_question["flexible-extract"] == {0: True, 1: True, 2: False, 3: False, 4: False}


def test_data_files_are_recorded_as_sha256_hashes(tmp_path):
    """Provenance: the record (and so the report's "Data files (sha256)") carries hashes, never paths."""
    import hashlib

    f = tmp_path / "test.jsonl"
    f.write_bytes(b'{"question": "q", "answer": "#### 1"}\n')
    assert data_file_hashes({"test": str(f)}) == {"test.jsonl": "sha256:" + hashlib.sha256(f.read_bytes()).hexdigest()}
    assert data_file_hashes(None) is None


def test_non_utf8_data_is_a_config_error_naming_the_line(tmp_path):
    bad = tmp_path / "test.jsonl"
    bad.write_bytes(b'{"question": "q", "answer": "#### 1"}\n{"question": "\xff", "answer": "#### 1"}\n')
    with pytest.raises(ConfigError, match=r"test.jsonl:2: not UTF-8 \(byte 0xff at column 15\)"):
        validate_jsonl(bad)
