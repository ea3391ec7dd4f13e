"""What a calibration may derive (configs/gates.yaml `calibration`, harness/judge/calibration.py): the issue-45
reproduction -- three repeats of a deterministic +0.3-nat fault with 5 confident flips -- fails against a clean
calibration, would pass against its own, and is refused as a calibration by the ceilings and by the move check; clean
calibrations pass every ceiling for every seed, and the recorded H200 one stays under them; the numbers written beside
the margin (none) and max_move_factor in the code and gates.yaml are reproduced here."""

import json
import random
from dataclasses import fields
from pathlib import Path

import pytest
from drift_lines import repeat

from harness.config.arms import ARMS_DIR
from harness.config.errors import ConfigError
from harness.config.thresholds import CalibrationGates, load_gates
from harness.judge.calibration import (
    MARGIN_MEASURED,
    Limits,
    Spread,
    ceiling_violations,
    derive_limits,
    limit_moves,
    mean_floor,
    prediction_bound,
    spread,
)
from harness.judge.drift_floor import judge_against_floor
from harness.judge.error_budget import Family
from harness.refcheck.judging.compare import failure_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[2]
GPU = load_gates("gpu-mla").calibration
CPU = load_gates("cpu-smoke").calibration
WHERE = "configs/gates.yaml, arm gpu-mla"
MLA = Family(11, "the checks calibrated for gpu-mla")  # a run's family (refcheck/judging/check.py family_at)
CATALOGUE = Family(16, "every calibratable check")


def over(c, limits) -> bool:
    return failure_line(c, limits.drift_limit, limits.tie_gap) is not None


def faulty(seed: int) -> list:
    """The issue's reproduction: every position +0.3 nats, 5 requests diverging where the reference's top-2 gap is 3."""
    return repeat(seed, shift=0.3, flips={i: 3.0 for i in range(5)})


def clean_calibration(seeds, flips_seed: int | None = None) -> list[list]:
    """Clean repeats; with flips_seed, each repeat flips 0-2 requests at H200-like clean gaps (<= 2 bf16 steps)."""
    rng = random.Random(flips_seed)
    return [repeat(s, flips=None if flips_seed is None else
                   {rng.randrange(40): rng.choice([0.0078125, 0.015625, 0.0625, 0.25]) for _ in range(rng.randrange(3))})
            for s in seeds]


def test_the_fault_fails_against_a_clean_calibration_and_passes_against_its_own():
    fault = [faulty(k) for k in (1, 2, 3)]
    own = derive_limits(spread(fault), 0.01, 0.0, MLA)
    # at the per-run budget of gpu-mla's 11 checks; the issue's 0.886 at 1 % per check (3.75 with the old margin)
    assert abs(own.drift_limit - 1.1546) < 1e-4 and own.tie_gap == 3.0
    later = faulty(4)
    # calibrated on itself, the fault is noise: nothing over its limits, its floor test passes
    assert sum(over(c, own) for c in later) == 0
    assert judge_against_floor(later, mean_floor(fault), "its own calibration").passed
    # a clean calibration of the same pair sees it: the confident flips are over the limits and the floor test fails
    clean = clean_calibration(range(11, 16))
    limits = derive_limits(spread(clean), 0.01, 0.0, MLA)
    assert sum(over(c, limits) for c in later) >= 5
    assert not judge_against_floor(later, mean_floor(clean), "the clean calibration").passed


def test_the_fault_is_refused_as_a_calibration_by_the_ceilings():
    fault = [faulty(k) for k in (1, 2, 3)]
    s = spread(fault)
    limits = derive_limits(s, 0.01, 0.0, MLA)
    # A GSM8K-text check (its ceiling 2.0 is above the H200's clean 1.96): the tie gap and the median refuse it
    refused = ceiling_violations("teacher_forcing", limits, s, GPU, WHERE)
    assert [r.split(" ", 2)[1:2] for r in refused] == [["tie"], ["median"]], refused
    assert refused[0].startswith("teacher_forcing: tie gap 3 (24 logit steps of 0.125) is above its ceiling 1 "
                                 "(calibration.max_tie_gap in configs/gates.yaml, arm gpu-mla)")
    assert "median position drift 0.321" in refused[1] and "calibration.max_drift_p50" in refused[1]
    # A long-prompt check: the drift limit's own ceiling (0.25) refuses it too
    long = ceiling_violations("long_context", limits, s, GPU, WHERE)
    assert long[0].startswith("long_context: drift limit 1.15") and "calibration.max_drift_limit in" in long[0]
    assert len(long) == 3
    # the issue's own numbers (derived with the old margin) are refused alike
    issue = Limits(0.886, 3.75, "issue 45")
    assert any("tie gap 3.75" in r for r in ceiling_violations("teacher_forcing", issue, s, GPU, WHERE))
    assert any("drift limit 0.886" in r for r in ceiling_violations("long_prefix_outputs", issue, s, GPU, WHERE))


def test_the_fault_is_refused_by_the_move_check_against_a_previous_clean_calibration():
    previous = derive_limits(spread(clean_calibration(range(11, 16), flips_seed=11)), 0.01, 0.0)
    fault = derive_limits(spread([faulty(k) for k in (1, 2, 3)]), 0.01, 0.0)
    moves = limit_moves("teacher_forcing", fault, previous, GPU.max_move_factor, GPU.logit_step)
    # the clean calibration flipped at 0.25 at most; its drift limit is within 2x of the fault's 0.886 (bf16-like
    # noise drawn anew every run moves that much), so the tie gap is what moved
    assert previous.tie_gap == 0.25 and fault.drift_limit / previous.drift_limit < GPU.max_move_factor
    assert moves == ['teacher_forcing: tie gap 0.25 -> 3 rose 12x, more than calibration.max_move_factor 2.25 allows '
                     'from the previous calibration; store it only with --trust "reason"']
    # from a calibration that never flipped, the move is counted from one logit step: 0.125 -> 3
    unflipped = derive_limits(spread(clean_calibration(range(11, 16))), 0.01, 0.0)
    assert "tie gap 0 -> 3 rose 24x" in limit_moves("teacher_forcing", fault, unflipped, 2.0, 0.125)[0]
    # a first calibration has nothing to move from; a calibration against itself moves nothing
    assert limit_moves("teacher_forcing", fault, None, 2.0, 0.125) == []
    assert limit_moves("teacher_forcing", previous, previous, 2.0, 0.125) == []


@pytest.mark.parametrize("seed", range(25))
def test_a_clean_calibration_passes_every_ceiling_and_moves_less_than_the_factor(seed):
    # K = 5 clean repeats (new noise each, a few flips at clean H200 gaps): a statistical claim, so every seed
    runs = clean_calibration(range(100 * seed, 100 * seed + 5), flips_seed=seed)
    s = spread(runs)
    limits = derive_limits(s, 0.01, 0.0)
    for check in ("teacher_forcing", "graph_replay", "prefix_reuse"):
        assert ceiling_violations(check, limits, s, GPU, WHERE) == [], (seed, limits.derivation)
    after = clean_calibration(range(100 * seed + 50, 100 * seed + 55), flips_seed=seed + 1000)
    assert limit_moves("graph_replay", derive_limits(spread(after), 0.01, 0.0), limits, GPU.max_move_factor,
                       GPU.logit_step) == []


def test_the_recorded_h200_calibration_stays_under_every_ceiling():
    recorded = json.loads((FIXTURES / "h200_calibration_gpu_mla_2026_12_04.json").read_text())
    names = {f.name for f in fields(Spread)}
    for c in recorded["checks"]:  # derived with the old margin: what the current derivation gives is at most these
        s = Spread(**{k: v for k, v in c["spread"].items() if k in names}, request_drifts={})
        after = Limits(c["after"]["drift_limit"], c["after"]["tie_gap"], c["derivation"])
        assert ceiling_violations(c["check"], after, s, GPU, WHERE) == [], c["check"]
        assert max(s.flip_gaps) <= 2 * GPU.logit_step  # every clean flip within 2 bf16 steps: why the tie ceiling is 8
    # the planted fault: the H200's clean graph_replay spread with a systematic +0.3 on every position is refused
    c = recorded["checks"][0]
    s = Spread(**{k: v for k, v in c["spread"].items() if k in names} | {"drift_p50": c["spread"]["drift_p50"] + 0.3},
               request_drifts={})
    refused = ceiling_violations("graph_replay", Limits(1.43, 0.638, ""), s, GPU, WHERE)
    assert len(refused) == 1 and refused[0].startswith("graph_replay: median position drift 0.301"), refused


def test_the_cpu_noisy_builds_recorded_calibration_stays_under_the_cpu_pairs_ceilings_and_bf16_noise_does_not():
    for check in ("teacher_forcing", "graph_replay"):
        c = json.loads((REPO / "docs/evidence/cpu-calibrated-power-2026-12-04" / f"{check}.calibration.json")
                       .read_text())
        names = {f.name for f in fields(Spread)}
        s = Spread(**{k: v for k, v in c["spread"].items() if k in names}, request_drifts={})
        assert ceiling_violations(check, Limits(c["drift_limit"], c["tie_gap"], ""), s, CPU, "cpu") == []
    # noise the jitter cannot make (the bf16-like lines): refused on the CPU pair, naming the drift limit's ceiling
    s = spread(clean_calibration(range(1, 3)))
    refused = ceiling_violations("teacher_forcing", derive_limits(s, 0.01, 0.006), s, CPU, "cpu")
    assert refused and "calibration.max_drift_limits.teacher_forcing in cpu" in refused[0]


def test_no_margin_measured_held_out_repeats_exceed_the_others_bound_as_often_as_the_derivation_says():
    """MARGIN_MEASURED: 200 seeded simulated clean K = 5 calibrations, each repeat held out once (1,000): how often
    its max exceeds the other four's max, their max x 1.25 (the old margin) and their prediction bound."""
    over_max = over_margin = over_bound = 0
    for cal in range(200):
        runs = [repeat(5000 + cal * 5 + k) for k in range(5)]
        for k in range(5):
            s = spread([r for j, r in enumerate(runs) if j != k])
            mine = max(c.max_drift for c in runs[k])
            over_max += mine > s.max_drift
            over_margin += mine > s.max_drift * 1.25
            over_bound += mine > max(prediction_bound(s.request_drifts), s.max_drift)
    assert (over_bound, over_margin, over_max) == (2, 49, 200)
    assert MARGIN_MEASURED == ("no margin: a held-out clean repeat exceeds the others' prediction bound 2 times in "
                               "1,000 simulated (their max x 1.25: 49; their max: 200)")


def test_max_move_factor_covers_clean_calibrations_drawn_anew():
    """gates.yaml's max_move_factor: 40 simulated clean K = 5 calibrations derive drift limits, at the per-run budget of
    16 calibrated checks (the prediction bound at 0.01 / 16 / 6), 0.586-1.191, at most 2.03x apart (at 1 % per check:
    0.426-0.768, 1.80x); the factor (2.25) sits above that."""
    limits = [derive_limits(spread([repeat(1000 + s * 5 + k) for k in range(5)]), 0.01, 0.0, CATALOGUE).drift_limit
              for s in range(40)]
    assert (round(min(limits), 3), round(max(limits), 3), round(max(limits) / min(limits), 2)) == (0.586, 1.191, 2.03)
    assert GPU.max_move_factor > max(limits) / min(limits)


def test_gpu_and_kimi_arms_calibrate_with_five_repeats_the_cpu_pair_with_two():
    gpu = sorted(p.stem for p in ARMS_DIR.glob("gpu-*.yaml")) + ["dcp8", "dspark-dcp8", "tp16-dcp16"]
    assert len(gpu) > 10 and all(load_gates(arm).calibration.min_repeats >= 5 for arm in gpu)
    assert load_gates("cpu-smoke").calibration.min_repeats == 2
    assert GPU.max_tie_gap == 8 * GPU.logit_step and GPU.max_drift_limit == 2 * GPU.logit_step


def test_a_misspelt_check_in_the_ceilings_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown check"):
        CalibrationGates(max_drift_limits={"teacher_forcin": 2.0})
    gates = tmp_path / "gates.yaml"
    gates.write_text("defaults:\n  calibration:\n    max_move_factor: 0.5\n")
    with pytest.raises(ConfigError, match="calibration.max_move_factor"):
        load_gates("gpu-mla", gates)
