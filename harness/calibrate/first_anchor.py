"""Gathering the anchor of an arm's first calibration (I/O): the reference's stored outputs, their float32 scores
(computed once, kept in the reference store), the reference's own equivalence noise where stored, and the repeats'
comparisons, handed to the pure judgement in harness/calibrate/anchor.py.
"""

from __future__ import annotations

from pathlib import Path

from harness.calibrate.anchor import AnchorVerdict, FirstCalibrationAnchor, judge_fp32, judge_spread
from harness.calibrate.repeats import CheckRepeat
from harness.config.arms import Arm
from harness.config.errors import ConfigError
from harness.config.paths import server_python
from harness.judge.fp32_anchor import ANCHORED_CHECK, AnchorLevel, Distance, fp32_distance, level_of
from harness.records.manifest import RunManifest
from harness.refcheck.store.fp32_scores import (
    fp32_scores,
    generated_model,
    read_outputs,
    reference_file,
    run_check_prompts,
)
from harness.refcheck.store.reference_store import reference_dir
from harness.refcheck.store.self_noise import load_self_noise


def first_calibration_anchor(candidate: Arm, run_dir: Path, manifest: RunManifest,
                             measured: list[dict[str, CheckRepeat]]) -> FirstCalibrationAnchor:
    """The anchors that can be measured for this first calibration, judged; why not, where none can. `run_dir` and
    `manifest`: a repeat's, whose run.json recorded the prompts (every repeat sends the same)."""
    build = (manifest.builds or {}).get(candidate.name)
    return FirstCalibrationAnchor((fp32_anchor(candidate, run_dir, manifest, measured),
                                   *spread_anchors(measured, build.build_hash if build else None)))


def fp32_anchor(candidate: Arm, run_dir: Path, manifest: RunManifest,
                measured: list[dict[str, CheckRepeat]]) -> AnchorVerdict:
    """Each repeat's teacher-forced logprobs against the reference's, both against float32 (a generated model only)."""
    distances = fp32_distances(candidate, run_dir, manifest, measured)
    if isinstance(distances, str):
        return _unmeasured("float32 teacher forcing", distances)
    return judge_fp32(distances)


def fp32_distances(candidate: Arm, run_dir: Path, manifest: RunManifest,
                   measured: list[dict[str, CheckRepeat]]) -> list[Distance | str] | str:
    """Each repeat's distances to float32 (judge/fp32_anchor.py), or why none can be measured: not a generated model,
    no teacher_forcing among the checks, no reference outputs here, no prompts recorded, the scorer failed."""
    model_dir = candidate.model.local_dir() if candidate.model.source == "local" else None
    if not generated_model(model_dir):
        return (f"{candidate.model.path} is no model the harness generated (no tiny_model.json): its float32 pass is "
                "not run here")
    if any(ANCHORED_CHECK not in m for m in measured):
        return f"{ANCHORED_CHECK} is not among the calibrated checks: calibrate with it to anchor the first calibration"
    record = measured[0][ANCHORED_CHECK].record
    outputs_file = reference_file(reference_dir(), record.reference, record.reference_key)
    if not outputs_file.is_file():
        return f"the reference outputs {outputs_file} are not in this machine's store"
    try:
        prompts = run_check_prompts(candidate, run_dir, manifest)
        fp32 = fp32_scores(outputs_file, record.reference_key, prompts, Path(model_dir),
                           candidate.launcher.python or server_python())
    except ConfigError as exc:  # no prompts recorded, outputs of other prompts, the scorer failed: stated, not a pass
        return str(exc)
    reference = {i: [float(x) for x in e["logprobs"]] for i, e in read_outputs(outputs_file).items()}
    return [fp32_distance(k, m[ANCHORED_CHECK].comparisons, reference, fp32) for k, m in enumerate(measured, 1)]


def anchor_level(candidate: Arm, run_dir: Path, manifest: RunManifest,
                 measured: list[dict[str, CheckRepeat]]) -> AnchorLevel | None:
    """What a calibration stores for every later run's float32 anchor (judge/fp32_anchor.py): its repeats' excesses;
    None where they cannot be measured (the calibration then judges its runs by the floor test alone)."""
    distances = fp32_distances(candidate, run_dir, manifest, measured)
    if isinstance(distances, str) or any(isinstance(d, str) for d in distances):
        return None
    return level_of(distances)


def spread_anchors(measured: list[dict[str, CheckRepeat]], build: str | None) -> list[AnchorVerdict]:
    """Each check against the reference's own equivalence noise where the store holds it (harness/refcheck/
    self_noise.py) from another build than `build` (the one under test: its own noise vouches for nothing); one 'not
    measured' verdict where there is none for any check."""
    out = []
    for check, first in measured[0].items():
        noise = [n.comparisons for n in load_self_noise(reference_dir(), first.record.reference,
                                                          first.record.reference_key, check)
                 if n.build_hash is not None and n.build_hash != build]
        if noise:
            out.append(judge_spread(check, [m[check].comparisons for m in measured if check in m], noise))
    if out:
        return out
    ref = next(iter(measured[0].values())).record if measured and measured[0] else None
    where = f" for {ref.reference}'s outputs {ref.reference_key}" if ref else ""
    return [_unmeasured("the reference's own equivalence noise", f"none stored{where} from another build than the one "
                        "under test: measure it with `python -m harness.refcheck.store.self_noise RUN` on a run of the "
                        "reference's build under perturbations")]


def _unmeasured(name: str, why: str) -> AnchorVerdict:
    return AnchorVerdict(name, False, False, f"{name}: not measured ({why})")
