"""A synthetic finished run directory (records + the raw files they reference) for the report tests."""

from __future__ import annotations

import json
from pathlib import Path

from harness.records.results import ResultsWriter
from harness.records.schema import (
    ColdStartRecord,
    DegenerationRecord,
    FilterScore,
    Gsm8kRecord,
    KvCapacityRecord,
    LongPrefixRecord,
    OutcomeRecord,
    ReferenceCheckRecord,
    ServerRecord,
    SpecDecodeRecord,
    Summary,
    Usage,
)

ARMS = ("cpu-smoke", "cpu-ref")
SUITES = ["gsm8k", "kv_capacity", "long_prefix"]


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def long_prefix(w: ResultsWriter, run: Path, arm: str, conc: int, tpot_ms: list[float], in_record: bool = True) -> None:
    samples = write_jsonl(run / arm / f"long_prefix_c{conc}.jsonl",
                          [{"level": conc, "index": i, "tpot_s": t / 1e3, "ttft_s": 0.5, "error": None}
                           for i, t in enumerate(tpot_ms)])
    series = write_jsonl(run / arm / f"telemetry_c{conc}.jsonl",
                         [{"t_s": i * 0.1, "source": "metrics", "values": {"kv_usage": 0.01 * (i % 5)}}
                          for i in range(20)])
    tpot = Summary.of([t / 1e3 for t in tpot_ms])
    w.append(LongPrefixRecord(run_id=run.name, arm=arm, suite="long_prefix", workload="long_prefix_cpu",
                              prompts_sha="bb9f60a854a80b9d", concurrency=conc, status="complete",
                              requests=len(tpot_ms), failed=0, ttft=Summary.of([0.5]), tpot=tpot, itl=tpot,
                              e2e=Summary.of([0.8]), kv_usage=Usage(mean=0.02, peak=0.04, n=20), gpu_memory_mib=None,
                              samples_path=samples, telemetry_path=series, timed_to_tokens=3544,
                              tpot_samples_s=[t / 1e3 for t in tpot_ms] if in_record else None))


def outputs_check(run_id: str, passed: bool = True, **fields) -> ReferenceCheckRecord:
    """The candidate's timed long-prefix outputs against the reference's (what the TPOT gate counts on)."""
    return ReferenceCheckRecord(**{**dict(
        run_id=run_id, arm=ARMS[0], suite="long_prefix", check="long_prefix_outputs", reference=ARMS[1],
        reference_key="long_prefix samples of cpu-ref", passed=passed,
        detail="long_prefix_outputs: 8/8 exact, max drift 0 (limit 0.01)" if passed
        else "long_prefix_outputs: 0/8 exact; 8 request(s) failed", requests=8, exact_matches=8 if passed else 0,
        first_divergence_min=None if passed else 1, max_drift=0.0, nonfinite=0, drift_limit=1e-2,
        diverged=[] if passed else ["request c1 #0 [c1]: generated token 1 differs from the reference (32 vs 32 "
                                    "tokens, where the reference's top-2 gap is 2.5)"],
        checked_to_tokens=3544), **fields})


def gsm8k(w: ResultsWriter, run: Path, arm: str, right: list[bool]) -> None:
    samples = write_jsonl(run / arm / "gsm8k" / "samples_gsm8k_local.jsonl",
                          [{"doc_id": i, "filter": f, "exact_match": float(ok)}
                           for i, ok in enumerate(right) for f in ("strict-match", "flexible-extract")])
    k = sum(right)
    score = FilterScore(exact_match=k / len(right), stderr=0.01, correct=k)
    w.append(Gsm8kRecord(run_id=run.name, arm=arm, suite="gsm8k", workload="gsm8k_cpu", task="gsm8k_local",
                         data_files={"test.jsonl": "sha256:abc123"}, lm_eval_version="0.4.9", task_hash="t",
                         num_fewshot=5, limit=len(right), n=len(right),
                         scores={"strict-match": score, "flexible-extract": score}, request_errors=0, invalid=0,
                         status="complete", wall_s=1.0, num_concurrent=1, samples_path=samples,
                         per_question={f: dict(enumerate(right)) for f in ("strict-match", "flexible-extract")}))


def make_run(root: Path, run_id: str = "r1", tpot_scale: float = 1.0, kv_tokens: int = 100_000,
             right: dict[str, list[bool]] | None = None, suites: list[str] | None = None,
             exit_code: int | None = 0, candidate_tpot_scale: float = 1.0, outputs_valid: bool | None = True) -> Path:
    """cpu-smoke vs cpu-ref with every suite recorded, unless `suites` leaves some out; `outputs_valid`: the
    candidate's timed outputs matched the reference's (False: they did not; None: no such check)."""
    run = root / run_id
    w = ResultsWriter(run / "results.jsonl")
    suites = SUITES if suites is None else suites
    right = right or {a: [True] * 30 + [False] * 10 for a in ARMS}
    for arm in ARMS:
        w.append(ServerRecord(run_id=run_id, arm=arm, suite="server", status="up", vllm_version="0.32.0",
                              argv=["python", "-m", "vllm.entrypoints.openai.api_server", "--api-key", "s3cret"],
                              env={"VLLM_API_KEY": "s3cret", "OMP_NUM_THREADS": "2"}))
        if "kv_capacity" in suites:
            w.append(KvCapacityRecord(run_id=run_id, arm=arm, suite="kv_capacity", device="CPU", tokens=kv_tokens,
                                      gib_per_worker=1.5, tp=1, dcp=1, source_line="x"))
        if "long_prefix" in suites:
            for conc in (1, 2):
                scale = tpot_scale * (candidate_tpot_scale if arm == ARMS[0] else 1.0)
                long_prefix(w, run, arm, conc, [scale * (5.0 + 0.1 * i) * conc for i in range(8)])
            w.append(ColdStartRecord(run_id=run_id, arm=arm, suite="long_prefix", workload="long_prefix_cpu",
                                     ttft_s=0.9, tpot_s=0.006, steady_tpot_p50_s=0.0054, factor_limit=5.0,
                                     flagged=False))
            if arm == ARMS[0] and outputs_valid is not None:
                w.append(outputs_check(run_id, outputs_valid))
        if "gsm8k" in suites:
            gsm8k(w, run, arm, right[arm])
        for suite in suites:
            w.append(OutcomeRecord(run_id=run_id, arm=arm, suite=suite, test=f"suites/test_{suite}.py::test_{suite}"
                                   f"[{arm}]", outcome="passed"))
    w.append(ReferenceCheckRecord(run_id=run_id, arm="cpu-smoke", suite="prefix_reuse", check="prefix_reuse",
                                  reference="cpu-ref", reference_key="k", passed=True, detail="ok", requests=8,
                                  exact_matches=8, first_divergence_min=None, max_drift=3.1e-3, nonfinite=0,
                                  drift_limit=1e-2, cached_tokens_proven=256))
    info = {"harness_version": "0.1.0", "git_commit": "abc", "host": "h", "started": "2026-01-01T00:00:00",
            "argv": ["qualify", "--arm", "cpu-smoke"], "suites": SUITES, "arms": {a: {} for a in ARMS},
            "workloads": {"long_prefix": {"concurrency": [1, 2], "seed": 0}}}
    if exit_code is not None:
        info.update(finished="2026-01-01T00:05:00", exit_code=exit_code,
                    device={"kind": "cpu", "cpu": "Test CPU x 2"})
    (run / "run.json").write_text(json.dumps(info))
    return run


# spec_decode records of a healthy n-gram run (tests/judge/test_spec_decode_gates.py, tests/report/test_tables.py)
SPEC_CAND, SPEC_REF = "cpu-spec", "cpu-ref"
CAND, REF = SPEC_CAND, SPEC_REF


def spec(arm: str, **fields) -> SpecDecodeRecord:
    base = dict(run_id="r", arm=arm, suite="spec_decode", workload="spec_decode_cpu", prompts_sha="p",
                status="complete", requests=10, failed=0, ttft=Summary.of([0.01]), tpot=Summary.of([0.004]),
                tokens_per_s=250.0, mean_span_fraction=0.1)
    if arm == CAND:
        base.update(method="ngram", num_speculative_tokens=3, drafts=100.0, draft_tokens=300.0, accepted=150.0,
                    accepted_per_pos=[70.0, 50.0, 30.0], acceptance_length=2.5, position_rates=[0.7, 0.5, 0.3],
                    tpot=Summary.of([0.002]), replay_drafts=100, replay_accepted=[148, 152])
    return SpecDecodeRecord(**{**base, **fields})


def check(passed: bool = True, **fields) -> ReferenceCheckRecord:
    return ReferenceCheckRecord(**{**dict(run_id="r", arm=CAND, suite="spec_decode", check="spec_decode",
                                          reference=REF, reference_key="k", passed=passed,
                                          detail="spec_decode: 10/10 exact" if passed else "spec_decode: 7/10 exact",
                                          requests=10, exact_matches=10 if passed else 7, first_divergence_min=None,
                                          max_drift=1e-6, nonfinite=0, drift_limit=1e-2,
                                          diverged=[] if passed else ["request gsm8k-3: generated token 5 differs"]),
                                   **fields})


def degeneration(passed: bool = True) -> DegenerationRecord:
    return DegenerationRecord(run_id="r", arm=CAND, suite="spec_decode", reference=REF, passed=passed,
                              detail="no output clearly more repetitive" if passed else "1/10 output(s) clearly more",
                              requests=10, flagged=[] if passed else ["request long-1: ... repeated: 'so so so'"])


def healthy() -> list:
    return [spec(CAND), spec(REF), check(), degeneration()]
