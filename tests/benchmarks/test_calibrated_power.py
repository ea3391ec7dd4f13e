"""benchmarks/calibrated_power.py's power line: the smallest graded fault the calibrated check failed, the largest it
passed below that (pure)."""

import sys

from harness.config.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))  # the benchmark imports its siblings as a script does

from benchmarks.calibrated_power import power_text  # noqa: E402


def runs(*verdicts: tuple[float, str]) -> list[dict]:
    return [{"scale": 0.0, "checks": {"tf": {"after": "PASS"}}},
            *({"scale": s, "checks": {"tf": {"after": v}}} for s, v in verdicts)]


def test_the_smallest_caught_and_the_largest_missed_below_it():
    line = power_text("tf", runs((1e-4, "PASS"), (3e-4, "PASS"), (1e-3, "FAIL"), (3e-3, "FAIL")))
    assert line.startswith("logit scale 0.001 (missed 0.0003; benchmarks/calibrated_power.py, ")


def test_nothing_caught_says_how_far_it_was_tried_and_a_fault_missed_above_a_caught_one_is_not_the_miss():
    assert power_text("tf", runs((1e-4, "PASS"), (1e-3, "PASS"))).startswith("no logit scale up to 0.001 (")
    line = power_text("tf", runs((1e-4, "FAIL"), (1e-3, "PASS")))  # a noisy verdict above the smallest caught
    assert line.startswith("logit scale 0.0001 (benchmarks/calibrated_power.py")
