"""A reference check's record fields plus its paired test against the pair's accepted known-good floor (the suites
prefix_reuse, graph_replay, teacher_forcing and long_context against the reference store; long_prefix's timed
outputs against the reference arm of the same run): the floor's failure -- or, under `require_floor`, its absence --
fails the check and is listed with the divergences."""

from __future__ import annotations

from harness.config.arms import Arm
from harness.judge.drift_floor import judge_against_floor
from harness.records.schema import RequestComparison
from harness.refcheck.batches import BatchRun
from harness.refcheck.floor_store import floor_dir, floor_key, load_floor
from harness.refcheck.store import StoredOutputs, reference_dir


def with_floor(fields: dict, arm: Arm, stored: StoredOutputs, vllm_version: str | None, run: BatchRun,
               require_floor: bool) -> dict:
    """Against outputs from the reference store: the floor is keyed by the stored outputs' key."""
    return with_floor_of(fields, arm, stored.arm, stored.key, vllm_version, run.comparisons,
                         bool(run.aborted), require_floor)


def with_floor_of(fields: dict, arm: Arm, reference: str, reference_key: str, vllm_version: str | None,
                  comparisons: list[RequestComparison], aborted: bool, require_floor: bool) -> dict:
    """`reference_key` names the reference's outputs so that a floor is found again only for the same ones (model,
    prompts, sampling, the reference's config and vLLM)."""
    check = fields["check"]
    path = floor_dir(reference_dir(), arm.name, floor_key(arm, reference_key, vllm_version or "unknown"))
    out = {**fields, "floor_path": str(path)}
    floor = load_floor(path, check)
    if floor is None:
        missing = (f"no accepted floor for {check} of {arm.name} vs {reference} at {path}: accept a known-good "
                   "run with `python -m harness accept-floor --run RUN`")
        out["detectable"] = "no shift below the fixed drift limit (no floor to pair with)"
        out["floor"] = f"FAIL (no data: {missing})" if require_floor else missing
        failure = out["floor"] if require_floor else None
    elif aborted:
        out["floor"] = failure = "FAIL (no data: the check was aborted; the paired test needs every request)"
    else:
        judged = judge_against_floor(comparisons, floor.comparisons, floor.name)
        out.update(floor=judged.sentence, detectable=judged.detectable)
        failure = None if judged.passed else judged.sentence
    if failure:
        out.update(passed=False, diverged=[*out["diverged"], failure])
    return out
