import pytest

from harness.config import gates
from harness.config.errors import ConfigError
from harness.measure.gsm8k import INVALID, REQUEST_ERROR, offline_task, score_samples, validate_jsonl
from harness.config.paths import gsm8k_dir


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

    source = offline_task(gsm8k_dir(), tmp_path)
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
    assert s.per_question == {0: True, 1: False, 2: False, 3: False, 4: False}


def test_paired_gate_uses_discordant_pairs():
    ref = {i: i % 10 != 0 for i in range(100)}  # 90 right
    same = dict(ref)
    assert gates.paired_accuracy(same, ref) == (100, 0, 0)
    worse = {i: (v and i >= 24) for i, v in ref.items()}  # loses 1-9, 11-19, 21-23: 21 questions
    n, b, c = gates.paired_accuracy(worse, ref)
    assert (n, b, c) == (100, 21, 0)
    assert "exact McNemar p" in gates.mcnemar_regression("dcp8", "tp8", b, c, 0.05)
    assert gates.mcnemar_regression("dcp8", "tp8", 3, 1, 0.05) is None  # not significant
    assert gates.mcnemar_regression("dcp8", "tp8", 0, 30, 0.05) is None  # better is never a failure


def test_accuracy_floors():
    assert gates.accuracy_floors("dcp8", 1279, 1319, 0.95, 0.94) == []
    out = gates.accuracy_floors("dcp8", 1200, 1319, 0.95, 0.94)
    assert "accuracy 90.98% (1200/1319) below the floor 95.00%" in out[0] and "Wilson lower bound" in out[1]


def test_accuracy_table_seed_shape():
    from harness.records.schema import FilterScore, Gsm8kRecord
    from harness.report.tables import accuracy_table, to_markdown

    def rec(arm, correct, em):
        return Gsm8kRecord(run_id="r", arm=arm, suite="gsm8k", workload="gsm8k_full", task="gsm8k", data_files=None,
                           lm_eval_version="0.4.13", task_hash="h", num_fewshot=5, limit=None, n=1319,
                           scores={"strict-match": FilterScore(exact_match=em, stderr=0.0053, correct=correct),
                                   "flexible-extract": FilterScore(exact_match=em, stderr=0.005, correct=correct)},
                           request_errors=0, invalid=3, status="complete", wall_s=1.0, num_concurrent=32,
                           samples_path="s")

    md = to_markdown(accuracy_table([rec("dcp8", 1279, 0.9697), rec("tp8", 1269, 0.9621)], ["tp8", "dcp8"]))
    lines = md.splitlines()
    assert lines[0].startswith("| Arm   | exact_match   | stderr   | Correct/N   |   Request errors |")
    assert "| tp8   | 96.21%        | ±0.53    | 1269/1319   |                0 |" in lines[2]
    assert "| dcp8  | 96.97%" in lines[3] and "1279/1319" in lines[3]
