"""The run-level floor test (harness/judge/drift_floor.py judge_run_level): where noise has a component shared by every
request of a run, the per-request paired tests fail clean runs against a calibration's mean floor; the run-level test
keeps its stated false-alarm rate and still fails a planted shift. Every figure below is over many seeded cases."""

import random

from harness.config.thresholds import DRIFT_CHECKS
from harness.judge.calibration import held_out_shifts, mean_floor
from harness.judge.drift_floor import judge_against_floor, judge_floor_pairing, judge_run_level
from harness.records.schema import TeacherForcedComparison

REQUESTS, POSITIONS, K = 40, 24, 5
RUN_SD = 0.03  # each run scales every |delta| by 1 + N(0, RUN_SD): a jitter realization, a graph capture


def base(seed: int = 0) -> list[list[float]]:
    """The prompts' own |delta| structure, the same in every run (the same prompts are sent every run)."""
    rng = random.Random(seed)
    return [[abs(rng.gauss(0, 0.03)) for _ in range(POSITIONS)] for _ in range(REQUESTS)]


def run(structure: list[list[float]], rng: random.Random, shift: float = 0.0) -> list[TeacherForcedComparison]:
    factor = 1 + rng.gauss(0, RUN_SD)
    out = []
    for i, row in enumerate(structure):
        deltas = [max(0.0, d * factor + rng.gauss(0, 0.002)) + shift for d in row]
        out.append(TeacherForcedComparison(request=f"r{i}", prompt_tokens=64, exact=True, first_divergence=None,
                                           max_drift=max(deltas), reference_tokens=POSITIONS,
                                           candidate_tokens=POSITIONS, finite=True, deltas=deltas,
                                           mean_drift=sum(deltas) / POSITIONS))
    return out


def case(seed: int, shift: float = 0.0):
    """A K-repeat calibration and one more run of the same build (plus `shift`: a planted fault)."""
    rng = random.Random(seed)
    structure = base(seed % 7)
    repeats = [run(structure, rng) for _ in range(K)]
    return repeats, run(structure, rng, shift)


def test_run_level_noise_fails_clean_runs_of_the_paired_tests_but_not_the_run_level_test():
    """400 seeded clean cases: the per-request paired tests against the mean floor fail a large share of clean runs
    (requests are not independent when the run moves them together); the run-level test fails about its alpha."""
    paired = run_level = 0
    cases = 400
    for seed in range(cases):
        repeats, clean = case(seed)
        floor = mean_floor(repeats)
        paired += not judge_against_floor(clean, floor, "cal").passed
        run_level += not judge_floor_pairing(clean, floor, "cal", held_out_shifts(repeats)).passed
    assert paired / cases > 0.3, paired  # measured 155 of 400: the paired tests under run-level noise
    # measured 0 of 400 at alpha 0.01/15 per check (was 5 of 400 at 0.01 per check); 400 cases put a rate of 1 %
    # below 0.03 with 99 % probability
    assert run_level / cases <= 0.03, run_level


def power(shift: float, cases: int = 200) -> float:
    failed = 0
    for seed in range(cases):
        repeats, faulty = case(seed, shift=shift)
        verdict = judge_floor_pairing(faulty, mean_floor(repeats), "cal", held_out_shifts(repeats))
        failed += not verdict.passed
    return failed / cases


def test_the_run_level_tests_power_on_planted_shifts():
    """Measured over 200 seeded cases each, at the budget of a caller that names no family (the catalogue's every
    check, the floor test half of each one's share: alpha 0.01/16/2) and a bound safe for lognormal run-level noise
    (x 56.7 the run-to-run sd at K = 5; the old per-check Student-t bound was x 3.75 and caught +0.003 117 times in
    200): +0.03 at every position is caught 50 times, +0.06 177, +0.08 198. The cost of 1 % per run over every part of
    every check under skewed noise, docs/gates.md "One error budget per run"."""
    assert 0.15 < power(0.03) < 0.4
    assert power(0.06) >= 0.8
    assert power(0.08) >= 0.97


def test_a_planted_shift_fails_with_the_run_level_sentence():
    repeats, faulty = case(11, shift=0.09)
    verdict = judge_floor_pairing(faulty, mean_floor(repeats), "cal", held_out_shifts(repeats))
    assert not verdict.passed and verdict.sentence.startswith("FAIL: run-level shift of the mean |delta| vs cal: ")


def test_the_held_out_shifts_sum_to_zero_and_the_bound_is_exact_t():
    repeats, clean = case(3)
    shifts = held_out_shifts(repeats)
    assert len(shifts) == K and abs(sum(shifts)) < 1e-9
    verdict = judge_run_level(clean, mean_floor(repeats), "the calibration c", shifts)
    assert verdict.passed and "(lognormal-safe, K = 5)" in verdict.sentence and "rounding unit" in verdict.sentence
    assert verdict.detectable.startswith("smallest mean shift caught at 80 %: ")
    share = f"per check at alpha 0.01/{len(DRIFT_CHECKS)} (1 % per run; its floor test at "
    assert share in verdict.detectable and "; the run's mean |delta| above the clean mean" in verdict.detectable


def test_fewer_than_three_shifts_keep_the_paired_tests_and_no_pairing_is_no_data():
    repeats, clean = case(5)
    floor = mean_floor(repeats[:2])
    two = judge_floor_pairing(clean, floor, "cal", held_out_shifts(repeats[:2]))
    assert "Wilcoxon signed-rank" in two.sentence
    nothing = judge_run_level([c.model_copy(update={"request": "other"}) for c in clean], floor, "cal", [0.1, -0.1, 0.0])
    assert not nothing.passed and nothing.sentence.startswith("FAIL: not enough data")
