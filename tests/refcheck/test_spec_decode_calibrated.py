"""spec_decode's output check is calibrated like long_prefix_outputs (issue 45 item 9): a GPU spec arm (require_floor)
without a calibration FAILs "not calibrated" even with identical outputs, and with a calibration its outputs are
paired with the floor; without limits (gates.yaml alone, the CPU e2e's direct call) it is judged as before. The
check's compare_arms (refcheck/judging/spec_decode_equality.py) on two arms' samples files."""

from __future__ import annotations

from pathlib import Path

from harness.config.suites import BY_NAME, calibrated_suites
from harness.config.thresholds import Gates
from harness.measure.spec_decode_metrics import SpecSample
from harness.records.schema import ReferenceCheckFields, SpecDecodeRecord, Summary
from harness.refcheck.judging.check import CheckLimits, ReferenceCheck
from harness.refcheck.judging.spec_decode_equality import compare_arms
from harness.refcheck.store.floor_store import save_floor


def samples(run_dir: Path, arm: str, lp: float) -> SpecDecodeRecord:
    path = run_dir / arm / "spec_decode_samples.jsonl"
    path.parent.mkdir(parents=True)
    rows = [SpecSample(f"q{i}", "gsm8k", [5, 6, 7], [lp] * 3, [{t: lp, t + 1: lp - 3.0} for t in (5, 6, 7)], "a b c")
            for i in range(12)]
    path.write_text("".join(s.to_json() + "\n" for s in rows))
    return SpecDecodeRecord(run_id="r", arm=arm, suite="spec_decode", workload="w", prompts_sha="p",
                            status="complete", requests=12, failed=0, ttft=Summary.of([0.1]), tpot=Summary.of([0.01]),
                            samples_path=str(path))


def limits(tmp_path: Path, require_floor: bool) -> ReferenceCheck:
    return ReferenceCheck(CheckLimits("spec_decode", "gpu-mtp", 0.25, 0.0, require_floor,
                                      tmp_path / "floors" / "gpu-mtp-k", None))


def check_of(out) -> ReferenceCheckFields:
    return out.check


def test_spec_decode_is_a_calibrated_suite():
    assert BY_NAME["spec_decode"].calibrated and "spec_decode" in calibrated_suites()


def test_a_gpu_spec_arm_without_a_calibration_fails_not_calibrated(tmp_path):
    records = [samples(tmp_path, "gpu-mtp", -0.1), samples(tmp_path, "gpu-mtp-ref", -0.1)]
    required = check_of(compare_arms(records, "gpu-mtp", "gpu-mtp-ref", tmp_path, Gates(), limits(tmp_path, True)))
    assert required.exact_matches == required.requests == 12 and not required.passed
    assert required.floor.startswith("FAIL (no data: not calibrated") and "accept-floor" not in required.floor
    # gates.yaml alone (no limits): judged by the fixed limit only, as before
    alone = check_of(compare_arms(records, "gpu-mtp", "gpu-mtp-ref", tmp_path, Gates()))
    assert alone.passed and alone.floor is None


def test_a_calibrated_spec_arm_is_paired_with_its_floor(tmp_path):
    clean = [samples(tmp_path / "clean", "gpu-mtp", -0.1), samples(tmp_path / "clean", "gpu-mtp-ref", -0.1)]
    floor_run = check_of(compare_arms(clean, "gpu-mtp", "gpu-mtp-ref", tmp_path / "clean", Gates()))
    at = limits(tmp_path, True)
    save_floor(at.limits.floor_path, "spec_decode", Path(floor_run.comparisons_path), {"run": "clean"})
    same = check_of(compare_arms(clean, "gpu-mtp", "gpu-mtp-ref", tmp_path / "clean", Gates(), at))
    assert same.passed and same.floor.startswith("PASS"), same.floor
    # every output still token-identical, every logprob moved by 0.05 (under the 0.25 limit): the floor sees it
    shifted = [samples(tmp_path / "shifted", "gpu-mtp", -0.15), samples(tmp_path / "shifted", "gpu-mtp-ref", -0.1)]
    moved = check_of(compare_arms(shifted, "gpu-mtp", "gpu-mtp-ref", tmp_path / "shifted", Gates(), at))
    assert moved.exact_matches == 12 and moved.max_drift < 0.25 and not moved.passed and "FAIL" in moved.floor
