"""The first calibration's float32 anchor on real H100 runs (tests/fixtures/h100_anchor_2026_12_07c.json.gz, built by
docs/evidence/h100-2026-12-07c/make_fixture.py; docs/evidence/h100-2026-12-07c.md): gpu-mla's five clean repeats
(as configured, eager, batch-invariant) pass; a build whose decode ignores keys past 8,000 tokens (7 of 95 requests
reach past it) passes the pooled mean over 6,080 positions and is refused by the per-request test, naming a long
request; a 5 % attention precision loss past 8,000 tokens is below the anchor's power (the standing calibration's
drift limit catches it in qualify: the evidence page)."""

import gzip
import json
from pathlib import Path

import pytest

from harness.calibrate.anchor import judge_fp32
from harness.judge.fp32_anchor import fp32_distance
from harness.records.schema import TeacherForcedComparison

STORED = json.loads(gzip.decompress(
    (Path(__file__).parents[1] / "fixtures" / "h100_anchor_2026_12_07c.json.gz").read_bytes()))
CLEAN = [f"cal2-gpu-mla-r{k}" for k in range(1, 6)]


def comparisons(run: str) -> list[TeacherForcedComparison]:
    out = []
    for request, row in STORED["runs"][run].items():
        deltas = [abs(c - r) for c, r in zip(row["logprobs"], STORED["reference"][request], strict=True)]
        out.append(TeacherForcedComparison(
            request=request, prompt_tokens=row["prompt_tokens"], exact=True, first_divergence=None,
            max_drift=max(deltas), reference_tokens=len(deltas), candidate_tokens=len(deltas), finite=True,
            deltas=deltas, candidate_logprobs=row["logprobs"]))
    return out


def judged(runs: list[str]):
    return judge_fp32([fp32_distance(k, comparisons(r), STORED["reference"], STORED["fp32"])
                       for k, r in enumerate(runs, 1)])


def test_the_clean_h100_repeats_stand_by_the_anchor():
    v = judged(CLEAN)
    assert v.measured and v.passed, v.sentence
    assert "per request, the farthest" in v.sentence


def test_keys_ignored_past_8000_tokens_is_refused_per_request_where_the_pooled_mean_passes_it():
    v = judged(["fault-keys_past_L_ignored-8000"] * 5)  # five repeats of a deterministic faulty build
    assert v.measured and not v.passed, v.sentence
    assert v.sentence.startswith("float32 teacher forcing in repeats 1, 2, 3, 4, 5: per request: "), v.sentence
    assert "(16,819 prompt tokens" in v.sentence  # a request past L, named with its length


def test_the_pooled_mean_alone_misses_it():
    distance = fp32_distance(1, comparisons("fault-keys_past_L_ignored-8000"), STORED["reference"], STORED["fp32"])
    pooled_only = judge_fp32([type(distance)(**{**distance.__dict__, "requests": ()})])
    assert pooled_only.passed, pooled_only.sentence


@pytest.mark.parametrize("run", ["fault-precision_loss_past_L-8000-0.05"])
def test_a_5_percent_precision_loss_past_8000_is_below_the_anchors_power(run):
    assert judged([run] * 5).passed  # stated, not hidden: qualify's drift limit fails it (evidence page)
