"""The anchor of a first calibration (harness/calibrate/anchor.py), judged on seeded simulations with realistic noise:
per-position rounding errors heavy-tailed (Student t3) and skewed in size across requests (a lognormal factor shared by
every position of a request: long prompts round more), both arms of one dtype. A clean candidate passes on every seed
tested; a planted shift (a logit scale fault moving 20 % of the positions, or every position) fails on every seed.
The simulation and its rates over more seeds: benchmarks/anchor_power.py."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from harness.calibrate.anchor import (
    FP32_BOUND,
    SPREAD_BOUND,
    FirstCalibrationAnchor,
    fp32_distance,
    judge_fp32,
    judge_spread,
)
from harness.config.paths import REPO_ROOT
from harness.records.schema import RequestComparison

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))  # the benchmark imports its siblings as a script does

from benchmarks.anchor_power import POSITIONS, arm_errors, request_factors, simulated, verdict  # noqa: E402

SEEDS = range(200)


# float32 rounding (the CPU pair); bf16 (~0.01 nats, the GPU arms); bf16 with the candidate rounding 6 % more than the
# reference (measured: bf16 eager vs sdpa attention on the tiny Llama, docs/gates.md)
@pytest.mark.parametrize(("scale", "coarser"), [(1e-6, 1.0), (0.01, 1.0), (0.01, 1.06)])
def test_a_clean_candidate_of_the_reference_dtype_passes_on_every_seed(scale, coarser):
    failed = [s for s in SEEDS if not verdict(s, scale, coarser=coarser).passed]
    assert not failed, f"clean candidates refused at seeds {failed[:5]} ({len(failed)}/{len(SEEDS)})"


@pytest.mark.parametrize(("scale", "shift", "shifted"), [
    (1e-6, 1e-3, 0.2),   # float32 pair, a 0.1 % logit scale (measured +1.1e-4 mean) at 20 % of the positions
    (1e-6, 1e-4, 1.0),   # ... at every position
    (0.01, 0.05, 0.2),   # bf16 pair: a shift of 5 roundings at 20 % of the positions (a fault past a length)
    (0.01, 0.02, 1.0),   # ... of 2 roundings everywhere
])
def test_a_planted_shift_fails_on_every_seed_naming_repeats_distance_and_bound(scale, shift, shifted):
    for s in SEEDS:
        v = verdict(s, scale, shift, shifted)
        assert v.measured and not v.passed, (s, v.sentence)
        assert v.failing, v.sentence
        assert v.sentence.startswith("float32 teacher forcing in repeat"), v.sentence
        assert "the candidate's mean |logprob - float32|" in v.sentence
        assert "bound" in v.sentence and "excess" in v.sentence


def test_the_bound_is_stated_and_a_candidate_nearer_float32_than_the_reference_passes():
    assert FP32_BOUND.ratio == pytest.approx(0.12) and FP32_BOUND.floor == pytest.approx(2e-5)
    fp32, reference, comparisons = simulated(1, 0.01)
    better = [c.model_copy(update={"candidate_logprobs": fp32[c.request]}) for c in comparisons]  # exact float32
    assert judge_fp32([fp32_distance(1, better, reference, fp32)]).passed


def test_missing_input_is_not_measured_never_a_pass():
    fp32, reference, comparisons = simulated(2, 0.01)
    old = [c.model_copy(update={"candidate_logprobs": []}) for c in comparisons]  # a run of an older harness
    v = judge_fp32([fp32_distance(1, old, reference, fp32)])
    assert not v.measured and not v.passed and "carry no candidate logprobs" in v.sentence
    v = judge_fp32([fp32_distance(1, comparisons, reference, {})])
    assert not v.measured and not v.passed and "no float32 score" in v.sentence
    anchor = FirstCalibrationAnchor((v,))
    assert not anchor.measured and not anchor.passed
    assert anchor.sentence.startswith("no independent anchor could be measured (float32 teacher forcing: not "
                                      "measured (request r0 of repeat 1 has no float32 score")
    assert anchor.sentence.endswith("judged by gates.yaml's limits, and a failure there takes --trust")


def noise_runs(seed: int, scale: float, count: int, factor: float = 1.0) -> list[list[RequestComparison]]:
    """`count` executions' comparisons against the reference's stored outputs: |delta| of two roundings."""
    rng = np.random.default_rng(seed)
    factors = request_factors(np.random.default_rng(0))  # the same prompts in every run
    out = []
    for _ in range(count):
        a, b = arm_errors(rng, scale, factors), arm_errors(rng, scale, factors)
        out.append([RequestComparison(request=i, prompt_tokens=100, exact=True, first_divergence=None,
                                      candidate_tokens=POSITIONS, reference_tokens=POSITIONS, finite=True,
                                      max_drift=None, deltas=[factor * abs(x - y) for x, y in zip(a[i], b[i],
                                                                                                 strict=True)])
                    for i in a])
    return out


def test_the_spread_anchor_passes_clean_repeats_and_refuses_a_spread_beyond_its_factor():
    """Clean: the candidate rounds like the reference (up to 2x its noise, half the factor): passes every seed. A
    candidate drifting 8x the reference's own equivalence noise (beyond the factor of 4) fails every seed."""
    assert SPREAD_BOUND.factor == 4.0
    for s in SEEDS:
        noise = noise_runs(s, 0.01, 2)
        assert judge_spread("graph_replay", noise_runs(s + 1000, 0.01, 2, factor=2.0), noise).passed, s
        v = judge_spread("graph_replay", noise_runs(s + 2000, 0.01, 2, factor=8.0), noise)
        assert v.measured and not v.passed and v.failing == (1, 2), (s, v.sentence)
    v = judge_spread("graph_replay", noise_runs(0, 0.01, 2), [])
    assert not v.measured and not v.passed and "no self-noise of the reference stored" in v.sentence


def test_a_fault_on_three_requests_is_refused_per_request_on_every_seed():
    """A fault past a length touches only the long requests: 3 of 40 moved by 0.05 nats (5 bf16 roundings) at every
    position is diluted in the pooled mean and refused by the per-request test (Student t on the request's positions,
    half the budget over every request of every repeat)."""
    pooled_only = 0
    for s in SEEDS:
        distances = []
        for k in (1, 2):
            fp32, reference, comparisons = simulated(s * 10 + k, 0.01)
            moved = [c.model_copy(update={"candidate_logprobs": [x + 0.05 for x in c.candidate_logprobs]})
                     if c.request in ("r0", "r1", "r2") else c for c in comparisons]
            distances.append(fp32_distance(k, moved, reference, fp32))
        v = judge_fp32(distances)
        assert v.measured and not v.passed, (s, v.sentence)
        pooled_only += ": per request: " in v.sentence
    assert pooled_only == len(SEEDS)  # every seed: the pooled mean alone would have passed it
