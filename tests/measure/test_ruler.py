"""RULER through lm-eval: workload validation, the tokenizer's source, sample generation by lm-eval's own task code
(deterministic, the same for every arm), and scoring from the per-sample log."""

from __future__ import annotations

import json

import pytest
import yaml

from harness.config.arms import load_arm
from harness.config.errors import ConfigError
from harness.config.paths import gsm8k_dir
from harness.config.workloads import RulerWorkload, load_workload
from harness.measure.gsm8k import REQUEST_ERROR
from harness.measure.ruler import (
    LOCAL_SUFFIX,
    aggregate_scores,
    kept_samples,
    prepare_data,
    score,
    slim,
    tokenizer_dir,
)


def workload(**kw) -> RulerWorkload:
    return RulerWorkload(**{"name": "w", "max_seq_lengths": [1024], "limit": 2, **kw})


def test_workload_refuses_tasks_that_download_and_repeats():
    with pytest.raises(ValueError, match=r"tasks \['niah_single_2'\] download their data"):
        workload(tasks=["niah_single_1", "niah_single_2"])
    with pytest.raises(ValueError, match=r"tasks \['gsm8k'\] are no RULER task"):
        workload(tasks=["gsm8k"])
    with pytest.raises(ValueError, match="must not repeat"):
        workload(max_seq_lengths=[1024, 1024])
    assert workload().tasks == ["niah_single_1", "niah_multikey_2", "niah_multikey_3", "ruler_vt", "ruler_cwe",
                                "ruler_fwe"]


def test_shipped_workloads_fit_their_arms():
    for name, max_model_len in (("ruler_cpu", 4096), ("ruler_gpu_smoke", 40960), ("ruler_kimi", 262144)):
        w = load_workload(name, kind=RulerWorkload)
        assert w.max_len <= max_model_len, name


def test_tokenizer_comes_from_the_workload_or_the_arms_model_files(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match=rf"workload w: tokenizer {empty}: no tokenizer files in {empty}"):
        tokenizer_dir(load_arm("tp8", geometry=False), workload(tokenizer=str(empty)))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # nothing cached: the hub model's tokenizer is absent
    with pytest.raises(ConfigError, match=r"arm 'tp8': model moonshotai/Kimi-K3 is not in the local Hugging Face "
                                          r"cache: RULER needs its tokenizer"):
        tokenizer_dir(load_arm("tp8", geometry=False), workload())


def test_kept_samples_are_the_first_of_each_length():
    docs = [{"max_length": n, "index": i} for n in (1024, 2048) for i in range(5)]
    kept = kept_samples(docs, [1024, 2048, 4096], 2)
    assert kept == {1024: docs[:2], 2048: docs[5:7], 4096: []}


def logged(task: str, length: int, doc_id: int, value: float, resp: str = "42") -> dict:
    return {"doc_id": doc_id, "doc": {"max_length": length, "outputs": ["42"], "input": "x" * 100},
            "arguments": [["x" * 100]], "resps": [[resp]], "filtered_resps": [resp], "4096": -1.0,
            str(length): value}


def test_score_counts_per_task_and_length_from_the_samples():
    rows = {"niah_single_1": [logged("niah_single_1", 1024, 0, 1.0), logged("niah_single_1", 1024, 1, 0.0),
                              logged("niah_single_1", 4032, 0, 0.0, REQUEST_ERROR)],
            "ruler_cwe": [logged("ruler_cwe", 1024, 0, 0.5), logged("ruler_cwe", 1024, 1, 1.0)]}
    s = score(rows, [1024, 4032])
    cells = {(c.task, c.length): c for c in s.cells}
    assert (cells["niah_single_1", 1024].correct, cells["niah_single_1", 1024].n) == (1, 2)
    assert cells["niah_single_1", 4032].request_errors == 1 and cells["niah_single_1", 4032].correct == 0
    assert cells["ruler_cwe", 1024].score == 0.75 and cells["ruler_cwe", 1024].correct == 1  # 0.5: half the words
    assert cells["ruler_cwe", 4032].n == 0 and cells["ruler_cwe", 4032].score is None
    assert s.request_errors == 1
    assert s.per_sample == {"niah_single_1@1024#0": True, "niah_single_1@1024#1": False,
                            "niah_single_1@4032#0": False, "ruler_cwe@1024#0": False, "ruler_cwe@1024#1": True}


def test_slim_drops_the_prompt_text_and_keeps_the_rest():
    row = slim(logged("ruler_vt", 1024, 3, 1.0))
    assert "arguments" not in row and "input" not in row["doc"]
    assert row["doc"]["outputs"] == ["42"] and row["1024"] == 1.0 and row["resps"] == [["42"]]


def test_aggregate_scores_reads_lm_evals_own_numbers():
    results = {"results": {"ruler_vt" + LOCAL_SUFFIX: {"1024,none": 0.5, "4096,none": -1}}}
    assert aggregate_scores(results, ["ruler_vt"], [1024, 4096]) == {("ruler_vt", 1024): 0.5}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """A byte-level BPE trained here as `make model` trains the tiny Llama's (no model needed)."""
    from harness.tinymodel.generate import train_tokenizer

    path = gsm8k_dir() / "train.jsonl"
    if not path.is_file():
        pytest.skip(f"no GSM8K text at {path} to train a tokenizer on")
    texts = [f"Question: {r['question']}\nAnswer: {r['answer']}\n\n"
             for r in map(json.loads, path.read_text().splitlines()[:2000])]
    out = tmp_path_factory.mktemp("tok")
    train_tokenizer(texts).save_pretrained(out)
    return out


def test_samples_are_lm_evals_own_and_the_same_every_time(tmp_path, tokenizer):
    # ruler_cwe keeps a module-level RNG: a second generation in the same process is the proof of determinism
    w = workload(tasks=["ruler_vt", "ruler_cwe", "ruler_fwe"], max_seq_lengths=[1024, 2048], limit=2)
    first = prepare_data(tmp_path / "a", w, tokenizer)
    again = prepare_data(tmp_path / "b", w, tokenizer)
    assert first.sha == again.sha and first.counts == {t: {1024: 2, 2048: 2} for t in w.tasks}
    docs = [json.loads(line) for line in first.files["ruler_cwe"].read_text().splitlines()]
    assert [d["max_length"] for d in docs] == [1024, 1024, 2048, 2048]
    assert all(d["length"] <= d["max_length"] and len(d["outputs"]) == 10 for d in docs)  # the 10 common words
    cfg = yaml.safe_load((tmp_path / "a" / f"ruler_cwe{LOCAL_SUFFIX}.yaml").read_text())
    assert cfg["include"].endswith("lm_eval/tasks/ruler/cwe.yaml") and cfg["custom_dataset"] is None
    assert cfg["dataset_kwargs"]["data_files"]["test"] == str(first.files["ruler_cwe"])
    # read back, not regenerated: a second arm of the run gets the same files
    mtime = first.files["ruler_vt"].stat().st_mtime_ns
    assert prepare_data(tmp_path / "a", w, tokenizer).sha == first.sha
    assert first.files["ruler_vt"].stat().st_mtime_ns == mtime
    # another limit is other data, regenerated in place
    assert prepare_data(tmp_path / "a", workload(tasks=["ruler_vt"], max_seq_lengths=[1024], limit=1),
                        tokenizer).counts == {"ruler_vt": {1024: 1}}


def test_a_draw_that_trips_lm_evals_vt_bug_is_drawn_again_from_the_next_seed(tmp_path, tokenizer, monkeypatch):
    # Planted: the first draw raises as vt_utils.generate_chains does when two variable names collide.
    from lm_eval.tasks import TaskManager

    load, calls = TaskManager.load, []

    def flaky(self, tasks):
        calls.append(tasks)
        if len(calls) == 1:
            raise IndexError("list index out of range")
        return load(self, tasks)

    monkeypatch.setattr(TaskManager, "load", flaky)
    w = workload(tasks=["ruler_vt"], limit=1)
    data = prepare_data(tmp_path / "d", w, tokenizer)
    assert json.loads((tmp_path / "d" / "manifest.json").read_text())["seeds"] == {"ruler_vt": 1}
    assert data.counts == {"ruler_vt": {1024: 1}} and len(calls) == 2

    calls.clear()
    monkeypatch.setattr(TaskManager, "load", lambda self, tasks: (calls.append(tasks), [][0]))
    with pytest.raises(IndexError):
        prepare_data(tmp_path / "e", w, tokenizer)
    assert len(calls) == 3  # SEED_TRIES draws, then the error stands
