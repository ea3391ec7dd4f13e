"""Calibration from clean repeats: the spread, the derived limits (stated with their derivation), the mean floor,
and the false-positive statement (deterministic, or held-out rates with exact intervals); a planted shift inside the
clean max fails against the calibrated floor, a fresh clean repeat passes. The ceilings and the move check
(configs/gates.yaml `calibration`) are in tests/judge/test_calibration_bounds.py."""

import pytest
from drift_lines import repeat

from harness.judge.calibration import (
    derive_limits,
    false_positives,
    mean_floor,
    prediction_bound,
    spread,
    tail_level,
)
from harness.judge.drift_floor import judge_against_floor
from harness.judge.error_budget import Family, part_alpha
from harness.refcheck.judging.compare import failure_line


def would_fail(c, limits) -> bool:
    return failure_line(c, limits.drift_limit, limits.tie_gap) is not None


def test_the_limits_come_from_the_clean_spread_with_their_derivation():
    clean = [repeat(1, flips={3: 0.125}), repeat(2, flips={7: 0.5}), repeat(3)]
    s = spread(clean)
    assert s.repeats == 3 and s.requests == 40 and s.divergences == 2 and s.flip_gaps == [0.125, 0.5]
    assert abs(s.exact_rate - 118 / 120) < 1e-9
    family = Family(5, "the checks calibrated for the arm")
    limits = derive_limits(s, least_limit=0.01, least_tie_gap=0.0, family=family)
    # 40 requests x 3 repeats: the prediction bound sits above the clean max x 1.25; two flips: no fit, the largest.
    # Derived at the drift limit's part of the check's share of the run's 1 % (a sixth of 0.01 / 5), not 1 % per check
    bound = prediction_bound(s.request_drifts, part_alpha(family, "drift limit"))
    assert part_alpha(family, "drift limit") == pytest.approx(0.01 / 5 / 6)
    assert bound > prediction_bound(s.request_drifts, 0.01) > s.max_drift * 1.25
    assert abs(limits.drift_limit - bound) < 1e-12
    assert "alpha 0.00033: alpha 0.01/5 per check, 1 % per run (m = 5: the checks calibrated for the arm)" in \
        limits.derivation
    assert limits.tie_gap == 0.5 and tail_level(s.flip_gaps, 3) is None
    assert "prediction bound" in limits.derivation and "K = 3" in limits.derivation
    assert "no margin: a held-out clean repeat exceeds the others' prediction bound 2 times in 1,000" in \
        limits.derivation


def test_a_check_that_repeats_bit_identically_is_limited_by_its_own_max_plus_one_rounding_unit():
    # the H200's teacher forcing: three repeats identical to the last digit; the next legitimate build may round
    # otherwise (issue 55: split-KV 1 read 0.866 against a clean max of 0.865388), so the limit is never the max alone
    same = [repeat(1)] * 3
    s = spread(same)
    assert abs(prediction_bound(s.request_drifts) - s.max_drift) < 1e-12
    limits = derive_limits(s, 0.01, 0.0)
    assert abs(limits.drift_limit - (s.max_drift + s.drift_p50)) < 1e-12  # the repeats moved nothing: u = p50
    assert "rounding unit" in limits.derivation and "clean median |delta|" in limits.derivation


def test_the_tail_estimate_covers_the_next_runs_max_where_the_max_of_three_does_not():
    # 40 clean repeats of the heavy-tailed drift: how often a repeat's max exceeds the limit the 3 before it derive
    runs = [repeat(seed) for seed in range(40)]
    over_max = over_tail = 0
    for k in range(3, 40):
        s = spread(runs[k - 3:k])
        mine = max(c.max_drift for c in runs[k])
        over_max += mine > s.max_drift * 1.25
        over_tail += mine > derive_limits(s, 0.01, 0.0).drift_limit
    assert over_max >= 4 and over_tail <= 1, (over_max, over_tail)


def test_a_bit_exact_pair_keeps_the_seeds_limit_and_a_configured_tie_gap_stays_in_force():
    exact = [repeat(s, n=5).copy() for s in (1, 2)]
    exact = [[c.model_copy(update={"deltas": [0.0] * 24, "max_drift": 0.0}) for c in r] for r in exact]
    limits = derive_limits(spread(exact), least_limit=0.01, least_tie_gap=0.006)
    assert limits.drift_limit == 0.01 and limits.tie_gap == 0.006


def test_a_clean_repeat_passes_the_calibration_and_a_shift_inside_the_clean_max_fails_its_floor():
    clean = [repeat(seed) for seed in (1, 2, 3)]
    s = spread(clean)
    floor = mean_floor(clean)
    assert len(floor) == 40 and all(len(c.deltas) == 24 for c in floor)
    limits = derive_limits(s, 0.01, 0.0)
    fresh = repeat(4)
    assert not any(would_fail(c, limits) for c in fresh)
    assert judge_against_floor(fresh, floor, "calibration").passed
    shifted = repeat(5, shift=0.01)  # a third of the clean sd: inside the clean max, under the fixed limit
    assert max(c.max_drift for c in shifted) < limits.drift_limit
    assert not any(would_fail(c, limits) for c in shifted)
    verdict = judge_against_floor(shifted, floor, "calibration")
    assert not verdict.passed, verdict.sentence


def test_bit_identical_repeats_claim_no_rate():
    # the H200's sequential checks: every repeat equal to the last digit; holding one out can only pass
    fp = false_positives([repeat(1)] * 5, 0.01, 0.0, would_fail)
    assert fp.deterministic and fp.repeat_interval is None and fp.failures == []
    assert fp.sentence == "deterministic over 5 repeats (bit-identical: no false-positive rate measurable)"
    # one digit moved in one request of one repeat: no longer deterministic, a rate is stated
    moved = repeat(1)
    moved[0] = moved[0].model_copy(update={"deltas": [moved[0].deltas[0] + 1e-7, *moved[0].deltas[1:]]})
    assert not false_positives([repeat(1)] * 4 + [moved], 0.01, 0.0, would_fail).deterministic


def test_noisy_clean_repeats_state_their_held_out_rate_with_an_exact_interval():
    clean = [repeat(seed) for seed in (1, 2, 3, 4, 5)]
    fp = false_positives(clean, 0.01, 0.0, would_fail)
    assert (fp.deterministic, fp.failed_repeats, fp.repeats, fp.requests_over, fp.requests) == (False, 0, 5, 0, 200)
    # Clopper-Pearson at 0 hits: the upper end is 1 - 0.025^(1/n)
    assert abs(fp.repeat_interval[1] - (1 - 0.025 ** (1 / 5))) < 1e-9 and fp.repeat_interval[0] == 0.0
    assert abs(fp.request_interval[1] - (1 - 0.025 ** (1 / 200))) < 1e-9
    # the requests are the same prompts every repeat, judged by one shared limit: counted, never given an interval
    assert fp.sentence == ("held out: 0/5 repeats fail the others' limits or floor (95 % CI 0-52 %; 0 of 200 requests "
                           "over them)")


def test_a_repeat_that_diverges_where_the_reference_was_confident_is_a_false_positive_stated_with_its_interval():
    clean = [repeat(seed) for seed in (1, 2, 3, 4)]
    odd = [*clean, repeat(5, flips={2: 3.0})]  # a fault the others never showed
    fp = false_positives(odd, 0.01, 0.0, would_fail)
    assert (fp.failed_repeats, fp.requests_over) == (1, 1)
    assert fp.failures[0].startswith("repeat 5: 1 request(s) over the limits (r2)")
    low, high = fp.repeat_interval  # 1 of 5: (0.025^(1/5) ... ) from the beta quantiles
    assert abs(low - 0.005050763) < 1e-6 and abs(high - 0.7164179) < 1e-6
    assert fp.short.startswith("held out: 1/5 repeats fail the others' limits or floor (95 % CI 0.51-72 %; 1 of 200")
    assert fp.sentence == fp.short + "; " + "; ".join(fp.failures)


def test_a_planted_shift_in_one_repeat_is_a_false_positive_the_calibration_reports():
    clean = [repeat(1), repeat(2), repeat(3, shift=0.02)]
    fp = false_positives(clean, 0.01, 0.0, would_fail)
    assert fp.failed_repeats > 0 and any(f.startswith("repeat 3:") for f in fp.failures), fp.sentence
