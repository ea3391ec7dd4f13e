"""Calibration repeats written to disk as qualify leaves them (run.json and results.jsonl), and the store the
calibrate tests write into: shared by tests/calibrate/."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

from harness.config.arms import load_arm
from harness.records.manifest import ArmBuild, CalibrationRepeat, RunManifest, RunPair, write_manifest
from harness.records.schema import ReferenceCheckRecord, ServerRecord, TeacherForcedComparison
from harness.refcheck.store.floor_store import floor_dir, floor_key

ARM = "cpu-smoke"
NOISE = "noisekey"  # the reference outputs' noise key (refcheck.store.ReferenceKey.noise_key)

# tests/drift_lines.py draws bf16-like drift (|delta| ~0.03), which the CPU pair's measured ceilings (0.0104) refuse:
# these tests calibrate cpu-smoke under the GPU arms' bf16 ceilings (gates.yaml defaults, the drift limit of the
# GSM8K-text checks for every check), from a gates.yaml of their own.
BF16_CEILINGS = {"min_repeats": 2, "logit_step": 0.125, "max_drift_limit": 2.0, "max_tie_gap": 1.0,
                 "max_drift_p50": 0.0625, "max_drift_limits": {c: 2.0 for c in ("teacher_forcing", "graph_replay",
                                                                                   "graph_replay_eager", "prefix_reuse")}}


@pytest.fixture
def store(tmp_path, monkeypatch) -> Path:
    """This test's reference store and reports/, with calibrate reading a gates.yaml that holds cpu-smoke to the bf16
    ceilings; the key's directory of cpu-smoke against reference outputs of noise key NOISE."""
    monkeypatch.setenv("HARNESS_REFERENCE_DIR", str(tmp_path / "refs"))
    import harness.calibrate.command as command
    import harness.qualify.calibrating as calibrating
    import harness.refcheck.judging.check as check
    from harness.config import thresholds

    gates = yaml.safe_load(thresholds.GATES_FILE.read_text())
    gates["arms"].setdefault(ARM, {})["calibration"] = BF16_CEILINGS
    (tmp_path / "gates.yaml").write_text(yaml.safe_dump(gates))
    gates_here = functools.partial(thresholds.load_gates, path=tmp_path / "gates.yaml")
    for module in (command, calibrating):  # the repeats' K and directories, and the calibration's
        monkeypatch.setattr(module, "REPORTS_DIR", tmp_path / "reports")
        monkeypatch.setattr(module, "load_gates", gates_here)
    monkeypatch.setattr(check, "load_gates", gates_here)  # the ceilings a calibration is judged under (standing.py)
    return floor_dir(tmp_path / "refs", ARM, floor_key(load_arm(ARM), NOISE))


def write_repeat(run_dir: Path, floor: Path, comparisons: list[TeacherForcedComparison], status: str = "complete",
                 check: str = "teacher_forcing", passed: bool = True, exit_code: int | None = 0,
                 finished: str | None = "2026-12-05T08:00:00", build: str = "build-a",
                 calibration: CalibrationRepeat | None = None, commit: str = "c0ffee",
                 package: str | None = None) -> Path:
    """A repeat as qualify leaves it: run.json (its end, verdict, build and commit) and results.jsonl. `package`: the
    vllm files' own hash (default: the build's name, as a build of other vllm files)."""
    run_dir.mkdir(parents=True)
    sink = run_dir / ARM / f"{check}_vs_cpu-ref_comparisons.jsonl"
    sink.parent.mkdir()
    sink.write_text("".join(c.model_dump_json() + "\n" for c in comparisons))
    rec = ReferenceCheckRecord(run_id=run_dir.name, arm=ARM, suite=check, check=check, reference="cpu-ref",
                               reference_key="refkey", passed=passed, detail="d", requests=len(comparisons),
                               exact_matches=len(comparisons), first_divergence_min=None, max_drift=0.1, nonfinite=0,
                               drift_limit=0.01, status=status, comparisons_path=str(sink), floor_path=str(floor))
    server = ServerRecord(run_id=run_dir.name, arm=ARM, suite="launch", status="up", vllm_version="0.32.0")
    (run_dir / "results.jsonl").write_text(server.model_dump_json() + "\n" + rec.model_dump_json() + "\n")
    write_manifest(run_dir, RunManifest(run_id=run_dir.name, started="2026-12-05T07:00:00", finished=finished,
                                        exit_code=exit_code, git_commit=commit, calibration=calibration,
                                        pairs=[RunPair(candidate=ARM, reference="cpu-ref")],
                                        builds={ARM: ArmBuild(vllm_version="0.32.0", build_hash=build,
                                                                     package_hash=package or build)}))
    return run_dir


def marker(request) -> CalibrationRepeat:
    """The repeat marker calibrate put in the repeat's QualifyRequest, as qualify records it."""
    from harness.admission.record import calibration_repeat

    return calibration_repeat(request.calibration_repeat)


def asked(repeats: int | None = None, suites: list[str] | None = None, ident: str | None = None, arm: str = ARM,
          **more):
    """`calibrate --arm ARM` as the CLI hands it over."""
    from harness.qualify.calibrating import CalibrateRequest

    return CalibrateRequest(arm, repeats, tuple(suites) if suites is not None else None, ident, **more)
