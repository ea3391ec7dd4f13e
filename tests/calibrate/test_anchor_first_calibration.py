"""`calibrate`'s first calibration judged by its float32 anchor, through the CLI (harness/calibrate/trust.py
judge_first_calibration -> first_anchor.py -> anchor.py), from repeats on disk that failed gates.yaml's seed limits as
every clean bf16 repeat does: a clean build stands with no --trust; a build shifted away from float32 is refused naming
the anchor, the repeats, its distance and the bound, and nothing is written. The float32 scores are in the store
beside the reference outputs (so no scorer runs here: tests/refcheck/test_fp32_scores.py runs it)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from written_repeats import write_repeat

from harness.calibrate import first_anchor
from harness.records.schema import TeacherForcedComparison
from harness.refcheck.prompts.check_prompts import CheckPrompt, prompt_sha
from harness.refcheck.store.fp32_scores import FP32_FORMAT, tokens_sha

PROMPTS = [CheckPrompt(f"p{i}", [10 + i, 20 + i, 30 + i], "g") for i in range(20)]
TOKENS = [5, 6, 7, 8, 9, 11, 12, 13]


@pytest.fixture
def anchored(store, tmp_path, monkeypatch):
    """The reference's outputs (key refkey) and their float32 scores in the store; the repeats' prompts as run.json
    would give them. Returns (float32 logprobs, reference logprobs) per prompt."""
    refs = tmp_path / "refs"
    refs.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    fp32 = {p.id: (-np.abs(rng.normal(0.5, 0.5, len(TOKENS)))).tolist() for p in PROMPTS}
    ref = {i: (np.array(v) + 0.01 * rng.standard_t(3, len(TOKENS))).tolist() for i, v in fp32.items()}  # bf16-like
    (refs / "cpu-ref-refkey.json").write_text(json.dumps({"outputs": {
        p.id: {"prompt_sha": prompt_sha(p.tokens), "token_ids": TOKENS, "logprobs": ref[p.id], "top": []}
        for p in PROMPTS}}))
    (refs / "cpu-ref-refkey.fp32.json").write_text(json.dumps({"format": FP32_FORMAT, "key": "refkey", "requests": {
        p.id: {"prompt_sha": prompt_sha(p.tokens), "tokens_sha": tokens_sha(TOKENS), "logprobs": fp32[p.id]}
        for p in PROMPTS}}))
    monkeypatch.setattr(first_anchor, "run_check_prompts", lambda candidate, run_dir, manifest: PROMPTS)
    return fp32, ref


def repeats(tmp_path, store, ident: str, fp32: dict, ref: dict, shift: float) -> list:
    """Two repeats whose candidate rounds like the reference (its own bf16-like error), moved by `shift` nats at every
    position; each failed gates.yaml's seed limits (passed False, exit code 1), as clean bf16 repeats do."""
    out = []
    for k in (1, 2):
        rng = np.random.default_rng(100 + k)
        comparisons = []
        for p in PROMPTS:
            cand = (np.array(fp32[p.id]) + 0.01 * rng.standard_t(3, len(TOKENS)) + shift).tolist()
            deltas = [abs(a - b) for a, b in zip(cand, ref[p.id], strict=True)]
            comparisons.append(TeacherForcedComparison(
                request=p.id, prompt_tokens=3, exact=True, first_divergence=None, candidate_tokens=len(TOKENS),
                reference_tokens=len(TOKENS), finite=True, max_drift=max(deltas), deltas=deltas,
                candidate_logprobs=cand))
        out.append(write_repeat(tmp_path / "reports" / f"{ident}-r{k}", store, comparisons, passed=False,
                                exit_code=1))
    return out


def cli(*argv: str) -> int:
    from harness.cli import main

    return main(["calibrate", "--arm", "cpu-smoke", *argv])


def test_a_clean_first_calibration_stands_by_its_anchor_with_no_trust(store, tmp_path, anchored, capsys):
    dirs = repeats(tmp_path, store, "cal-a", *anchored, shift=0.0)
    assert cli("--from-runs", *map(str, dirs), "--id", "cal-a") == 0, capsys.readouterr().err[-2000:]
    out = capsys.readouterr().out
    assert ("calibrate cpu-smoke: the first calibration stands by its independent anchor: float32 teacher forcing: the "
            "candidate's mean |logprob - float32|") in out
    stored = json.loads((tmp_path / "reports" / "cal-a" / "calibration.json").read_text())
    assert stored["trusted"] is None and (store / "teacher_forcing.calibration.json").is_file()


def test_a_first_calibration_shifted_from_float32_is_refused_naming_the_anchor(store, tmp_path, anchored, capsys):
    dirs = repeats(tmp_path, store, "cal-b", *anchored, shift=0.02)  # two bf16 roundings' worth, every position
    assert cli("--from-runs", *map(str, dirs), "--id", "cal-b") == 2
    err = capsys.readouterr().err
    assert ("refused: its repeats failed as the arm's first calibration: float32 teacher forcing in repeats 1, 2: the "
            "candidate's mean |logprob - float32|") in err, err[-2000:]
    assert "bound" in err and "(the first calibration's independent anchor)" in err
    assert not (tmp_path / "reports" / "cal-b").exists() and not (store / "teacher_forcing.calibration.json").exists()


def test_an_anchor_that_cannot_be_measured_falls_back_to_gates_yaml_and_trust_saying_why(store, tmp_path, anchored,
                                                                                          capsys, monkeypatch):
    """The float32 pass failed (here: the run recorded no prompts): not a pass; the repeats that failed gates.yaml's
    seed limits are refused as before, the refusal saying why no anchor was measured, and --trust stores them."""
    def no_prompts(candidate, run_dir, manifest):
        raise first_anchor.ConfigError("run.json: no reference_checks workload recorded")

    monkeypatch.setattr(first_anchor, "run_check_prompts", no_prompts)
    dirs = repeats(tmp_path, store, "cal-c", *anchored, shift=0.0)
    assert cli("--from-runs", *map(str, dirs), "--id", "cal-c") == 2
    err = capsys.readouterr().err
    assert ("teacher_forcing in repeats 1, 2 (judged by gates.yaml's limits: d); no independent anchor could be "
            "measured (float32 teacher forcing: not measured (run.json: no reference_checks workload recorded)") in err
    assert cli("--from-runs", *map(str, dirs), "--id", "cal-c", "--trust", "no float32 pass: checked by hand") == 0
