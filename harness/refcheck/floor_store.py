"""Known-good drift floors, kept beside the reference store: a passing run's comparisons for one (candidate config,
reference outputs, vLLM version), one file per reference check, against which later runs' drift is judged with a
paired test (harness/judge/drift_floor.py). A run never writes its own floor: `harness accept-floor RUN` marks a
run known-good, so a faulty build cannot become its own floor.

Layout: <reference dir>/floors/<candidate>-<key>/<check>.jsonl + <check>.source.json; the key hashes the candidate's
config, the reference key (model, prompts, sampling, reference config, its vLLM) and the candidate's vLLM version,
so any change to one of them starts without a floor rather than against a stale one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from harness.config.arms import Arm
from harness.records.jsonl import read_jsonl
from harness.records.schema import RequestComparison, TeacherForcedComparison
from harness.refcheck.store import arm_config_sha


def floor_key(candidate: Arm, reference_key: str, vllm_version: str) -> str:
    blob = json.dumps({"candidate_config_sha": arm_config_sha(candidate), "reference_key": reference_key,
                       "vllm_version": vllm_version}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def floor_dir(directory: Path, candidate: str, key: str) -> Path:
    return directory / "floors" / f"{candidate}-{key}"


@dataclass(frozen=True)
class Floor:
    comparisons: list[RequestComparison]
    source: dict  # run id, reference, accepted when

    @property
    def name(self) -> str:
        return f"the accepted run {self.source.get('run', '?')} (same candidate config, reference and vLLM)"


def load_floor(path: Path, check: str) -> Floor | None:
    """The floor of `check` stored at `path`, or None when none was accepted for this key."""
    comparisons_path = path / f"{check}.jsonl"
    if not comparisons_path.is_file():
        return None
    model = TeacherForcedComparison if check == "teacher_forcing" else RequestComparison
    rows, _ = read_jsonl(comparisons_path)
    comparisons = []
    for row in rows:
        try:
            comparisons.append(model.model_validate(row))
        except ValueError:
            continue  # a line another schema wrote: the rest still pairs
    try:
        source = json.loads((path / f"{check}.source.json").read_text())
    except (OSError, ValueError):
        source = {}
    return Floor(comparisons, source) if comparisons else None


def save_floor(path: Path, check: str, comparisons_file: Path, source: dict) -> Path:
    """Copy a run's comparisons of `check` under the floor key, replacing an older floor (each file atomically)."""
    path.mkdir(parents=True, exist_ok=True)
    target = path / f"{check}.jsonl"
    shutil.copy(comparisons_file, target.with_suffix(".tmp"))
    os.replace(target.with_suffix(".tmp"), target)
    meta = path / f"{check}.source.json"
    meta.with_suffix(".tmp").write_text(json.dumps({**source, "accepted": time.strftime("%Y-%m-%dT%H:%M:%S%z")}))
    os.replace(meta.with_suffix(".tmp"), meta)
    return target
