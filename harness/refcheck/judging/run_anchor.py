"""The float32 anchor of one run (I/O at the edge): the reference's stored logprobs and their float32 scores, read
from the reference store, handed with the run's teacher-forced comparisons to harness/judge/fp32_anchor.py."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from harness.config.errors import ConfigError
from harness.judge.error_budget import ANCHOR_PART, RunBudget
from harness.judge.fp32_anchor import AnchorLevel, RunAnchor, fp32_distance, judge_run_anchor
from harness.records.schema import RequestComparison
from harness.refcheck.store.fp32_scores import FP32_FORMAT, read_outputs, reference_file, scores_file, tokens_sha

Scores = tuple[dict[str, list[float]], dict[str, list[float]]]


def anchor_inputs(store: Path, reference: str, key: str, arm: str) -> Scores | str:
    """(reference logprobs, float32 logprobs) per prompt id of the stored outputs, or why they cannot be read, naming
    the file and what to do."""
    outputs_file = reference_file(store, reference, key)
    scores = scores_file(outputs_file)
    again = (f"the calibration of {arm} anchors teacher_forcing to float32: restore {scores} beside the outputs, or "
             f"calibrate again (`python -m harness calibrate --arm {arm}` scores them once and keeps them)")
    try:
        outputs = read_outputs(outputs_file)
        doc = json.loads(scores.read_text())
    except ConfigError as exc:
        return f"{exc}; {again}"
    except (OSError, ValueError) as exc:
        return f"{scores} cannot be read ({exc.__class__.__name__}): {again}"
    if not isinstance(doc, dict) or doc.get("format") != FP32_FORMAT or doc.get("key") != key:
        return f"{scores} is not of format {FP32_FORMAT} for key {key}: {again}"
    scored = doc.get("requests", {})
    ref, fp32 = {}, {}
    for i, entry in outputs.items():
        got = scored.get(i)
        if got is None or got.get("tokens_sha") != tokens_sha(list(entry["token_ids"])):
            return f"{scores}: prompt {i} was scored on other tokens than the stored outputs: {again}"
        ref[i], fp32[i] = [float(x) for x in entry["logprobs"]], got["logprobs"]
    return ref, fp32


def run_anchor(store: Path, reference: str, key: str, arm: str, comparisons: Sequence[RequestComparison],
               level: AnchorLevel, budget: RunBudget) -> RunAnchor:
    """The run's float32 anchor at its part of the check's share of the run's budget."""
    inputs = anchor_inputs(store, reference, key, arm)
    distance = inputs if isinstance(inputs, str) else fp32_distance(1, comparisons, *inputs)
    return judge_run_anchor(distance, level, budget.part(ANCHOR_PART), budget.text)
