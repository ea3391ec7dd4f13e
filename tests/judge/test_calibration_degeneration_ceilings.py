"""The degeneration detector's calibrated values are bounded like the limits (configs/gates.yaml `calibration`:
max_tie_flip_rate(s), max_span_fraction_delta, max_distinct_2_delta): the recorded clean calibrations (H200 gpu-mla,
the CPU noisy build) pass; a planted high tie-flip rate or collapse after a flip is refused, naming value and ceiling."""

import json
from dataclasses import fields, replace
from pathlib import Path

from harness.config.thresholds import load_gates
from harness.judge.calibration import Limits, Spread, ceiling_violations

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[2]
GPU = load_gates("gpu-mla").calibration
CPU = load_gates("cpu-smoke").calibration
NAMES = {f.name for f in fields(Spread)}


def as_spread(stored: dict) -> Spread:
    return Spread(**{k: v for k, v in stored.items() if k in NAMES}, request_drifts={})


def h200() -> dict:
    rows = json.loads((FIXTURES / "h200_calibration_gpu_mla_2026_12_04.json").read_text())["checks"]
    return {c["check"]: c for c in rows}


def deltas(stored: dict) -> tuple:
    return stored["span_fraction_delta_max"], stored["distinct_2_delta_max"]


def test_the_recorded_clean_calibrations_pass_the_degeneration_ceilings():
    for check, c in h200().items():
        after = Limits(c["after"]["drift_limit"], c["after"]["tie_gap"], "")
        assert ceiling_violations(check, after, as_spread(c["spread"]), GPU, "gpu", deltas(c["spread"])) == [], check
    assert deltas(h200()["graph_replay"]["spread"]) == (0.3125, 0.1746031746031746)  # the measured clean maxima
    for check in ("teacher_forcing", "graph_replay"):
        c = json.loads((REPO / "docs/evidence/cpu-calibrated-power-2026-12-04" / f"{check}.calibration.json")
                       .read_text())
        assert ceiling_violations(check, Limits(c["drift_limit"], c["tie_gap"], ""), as_spread(c["spread"]), CPU,
                                  "cpu", deltas(c["spread"])) == []


def test_a_planted_high_tie_flip_rate_is_refused_naming_value_and_ceiling():
    c = h200()["long_context"]
    limits = Limits(c["after"]["drift_limit"], c["after"]["tie_gap"], "")
    planted = replace(as_spread(c["spread"]), repeats=3, requests=100, divergences=270)  # 90 of 100 a repeat
    refused = ceiling_violations("long_context", limits, planted, GPU, "configs/gates.yaml, arm gpu-mla")
    assert refused == ["long_context: clean tie-flip rate (90 of 100 outputs a repeat) 0.9 is above its ceiling 0.5 "
                       "(calibration.max_tie_flip_rate in configs/gates.yaml, arm gpu-mla); a clean build of this arm "
                       "does not measure that, and the degeneration detector would judge by it: a fault in the "
                       "calibrated build, or a ceiling to measure again"]
    # long_prefix_outputs' own ceiling: its measured 9 of 14 passes, 12 of 14 is refused
    lp = h200()["long_prefix_outputs"]
    lp_limits = Limits(lp["after"]["drift_limit"], lp["after"]["tie_gap"], "")
    assert ceiling_violations("long_prefix_outputs", lp_limits, as_spread(lp["spread"]), GPU, "gpu") == []
    high = replace(as_spread(lp["spread"]), divergences=36)
    assert "calibration.max_tie_flip_rates.long_prefix_outputs" in ceiling_violations(
        "long_prefix_outputs", lp_limits, high, GPU, "gpu")[0]
    # the CPU pair measured no clean flip: 4 of 32 a repeat is refused there
    cpu = replace(as_spread(c["spread"]), repeats=2, requests=32, divergences=8, drift_p50=0.0001)
    assert any("clean tie-flip rate (4 of 32 outputs a repeat) 0.125 is above its ceiling 0.1" in r
               for r in ceiling_violations("graph_replay", Limits(0.01, 0.006, ""), cpu, CPU, "cpu"))


def test_a_planted_collapse_after_a_flip_is_refused_naming_value_and_ceiling():
    c = h200()["graph_replay"]
    limits, s = Limits(c["after"]["drift_limit"], c["after"]["tie_gap"], ""), as_spread(c["spread"])
    refused = ceiling_violations("graph_replay", limits, s, GPU, "gpu", (0.8, 0.4))
    assert [r.split(" is above")[0] for r in refused] == [
        "graph_replay: largest clean span-fraction rise after a flip 0.8",
        "graph_replay: largest clean distinct-2 drop after a flip 0.4"]
    assert "ceiling 0.5 (calibration.max_span_fraction_delta in gpu)" in refused[0]
    assert "ceiling 0.35 (calibration.max_distinct_2_delta in gpu)" in refused[1]
