"""The drift noise-floor test: identical distributions pass, a planted shift fails, small samples fail."""

import math
import random

import pytest

from harness.judge.drift_floor import (
    _wilcoxon_pratt_normal,
    minimum_detectable_shift,
    paired_drift_test,
    paired_sd,
    sign_test_greater,
    smallest_detectable_offset,
    wilcoxon_greater,
)

FLOOR = "last good run h200x2-control (gpu-dcp2 vs gpu-tp2, same prompt set)"


def good_run(seed: int = 0, n: int = 82) -> dict[str, float]:
    """Per-request max drift like gpu-dcp2 vs gpu-tp2 on the old model: p50 ~0.05, max ~0.15."""
    rng = random.Random(seed)
    return {f"r{i}": min(0.19, rng.lognormvariate(math.log(0.05), 0.5)) for i in range(n)}


def test_identical_distributions_pass():
    base = good_run()
    v = paired_drift_test(base, dict(base), FLOOR)
    assert v.passed and v.p_value == 1.0 and v.pairs == 82
    assert v.sentence.startswith("PASS: Wilcoxon signed-rank on per-request max |delta logprob| vs last good run")


def test_a_repeat_with_bf16_level_noise_passes():
    base, rng = good_run(), random.Random(7)
    repeat = {k: max(0.0, v + rng.gauss(0, 0.01)) for k, v in base.items()}
    assert paired_drift_test(repeat, base, FLOOR).passed


def test_the_plus_0_1_lse_fault_shift_fails_although_every_value_is_under_the_limit():
    base, rng = good_run(), random.Random(11)
    # +0.012 on average per request (what the +0.1 LSE fault did to per-request max drift), with repeat noise
    shifted = {k: max(0.0, v + 0.012 + rng.gauss(0, 0.01)) for k, v in base.items()}
    assert max(shifted.values()) < 0.25  # the fixed limit passes it
    v = paired_drift_test(shifted, base, FLOOR)
    assert not v.passed and v.p_value < 1e-6
    assert 0.008 < v.mean_shift < 0.016
    for part in ("FAIL", "Wilcoxon signed-rank", "p = ", "median shift +0.01", FLOOR):
        assert part in v.sentence


def test_sign_test_on_positions_sees_a_shift_and_passes_identity():
    base = {f"r{i}/{p}": 0.02 * ((i * 7 + p) % 5) for i in range(10) for p in range(8)}
    assert paired_drift_test(base, base, FLOOR, method="sign", measure="per-position |delta|").passed
    up = {k: v + 0.001 for k, v in base.items()}
    v = paired_drift_test(up, base, FLOOR, method="sign", measure="per-position |delta|")
    assert not v.passed and v.sentence.startswith("FAIL: sign test on per-position |delta|")


@pytest.mark.parametrize("n", [0, 3, 9])
def test_small_samples_say_not_enough_data_and_fail(n):
    base = good_run(n=n)
    v = paired_drift_test(base, dict(base), FLOOR)
    assert not v.passed and v.p_value is None
    assert v.sentence.startswith("FAIL: not enough data") and f"{n} paired value(s)" in v.sentence


def test_only_keys_measured_on_both_sides_pair_up():
    base = good_run(n=12)
    cand = {**base, "extra": 5.0, "r0": None, "r1": math.inf}
    assert paired_drift_test(cand, base, FLOOR).pairs == 10


def test_minimum_detectable_shift_matches_the_normal_formula_and_shrinks_with_n():
    # z_0.99 + z_0.9 = 2.326 + 1.282 = 3.608; sd 0.01, n 82 -> t-test 0.00398; signed-rank / sqrt(3/pi)
    assert minimum_detectable_shift(0.01, 82, method="t") == pytest.approx(3.608 * 0.01 / math.sqrt(82), rel=1e-3)
    assert minimum_detectable_shift(0.01, 82) == pytest.approx(3.608 * 0.01 / math.sqrt(82) / math.sqrt(3 / math.pi), rel=1e-3)
    assert minimum_detectable_shift(0.01, 328) < minimum_detectable_shift(0.01, 82)
    assert minimum_detectable_shift(0.0, 82, resolution=1e-6) == 1e-6
    assert minimum_detectable_shift(0.01, 1) is None


def test_the_shift_the_planted_fault_produced_is_above_the_detectable_shift_of_such_a_floor():
    base, rng = good_run(), random.Random(3)
    repeat = {k: v + rng.gauss(0, 0.01) for k, v in base.items()}
    sd, n = paired_sd(repeat, base)
    assert 0.007 < sd < 0.013 and n == 82
    assert minimum_detectable_shift(sd, n) < 0.012


def test_smallest_detectable_offset_interpolates_the_mutation_calibration():
    calibration = [(1e-3, 0.0001), (1e-2, 0.0012), (1e-1, 0.012)]
    assert smallest_detectable_offset(0.0012, calibration) == pytest.approx(1e-2)
    mid = smallest_detectable_offset(0.0066, calibration)
    assert 1e-2 < mid < 1e-1
    assert smallest_detectable_offset(0.00005, calibration) == 1e-3
    assert smallest_detectable_offset(0.5, calibration) is None
    assert smallest_detectable_offset(0.01, []) is None


def test_the_scipy_free_fallbacks_agree_with_scipy():
    """The device image may lack scipy: the fallbacks are the same tests (cross-checked here where scipy exists)."""
    from scipy import stats

    rng = random.Random(5)
    for shift in (0.0, 0.003, 0.012):
        diffs = [round(rng.gauss(shift, 0.01), 3) for _ in range(82)] + [0.0] * 5
        ours = _wilcoxon_pratt_normal(diffs)
        theirs = stats.wilcoxon(diffs, zero_method="pratt", alternative="greater", method="approx").pvalue
        assert ours == pytest.approx(theirs, rel=0.02, abs=1e-4)
    with_scipy = sign_test_greater(27, 40)
    import sys
    saved = sys.modules.get("scipy")
    sys.modules["scipy"] = None  # `from scipy import stats` now raises ImportError: the fallback path
    try:
        assert sign_test_greater(27, 40) == pytest.approx(with_scipy)
        assert wilcoxon_greater(diffs) == pytest.approx(_wilcoxon_pratt_normal(diffs))
    finally:
        sys.modules["scipy"] = saved
