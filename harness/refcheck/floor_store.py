"""Known-good drift floors, kept beside the reference store: a passing run's teacher-forced comparisons for one
(candidate config, reference outputs, vLLM version), against which later runs' drift is judged with a paired test
(harness/judge/drift_floor.py). A floor is never written by a run itself: `harness accept-floor RUN` marks a run
known-good, so a faulty build cannot become its own floor.

Layout: <reference dir>/floors/<candidate>-<key>/teacher_forcing.jsonl + source.json; the key hashes the
candidate's config, the reference key (model, prompts, sampling, reference config, its vLLM) and the candidate's
vLLM version, so any change to one of them starts without a floor rather than against a stale one.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from harness.config.arms import Arm
from harness.records.jsonl import read_jsonl
from harness.records.schema import TeacherForcedComparison
from harness.refcheck.store import arm_config_sha

FLOOR_FILE = "teacher_forcing.jsonl"


def floor_key(candidate: Arm, reference_key: str, vllm_version: str) -> str:
    blob = json.dumps({"candidate_config_sha": arm_config_sha(candidate), "reference_key": reference_key,
                       "vllm_version": vllm_version}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def floor_dir(directory: Path, candidate: str, key: str) -> Path:
    return directory / "floors" / f"{candidate}-{key}"


@dataclass(frozen=True)
class Floor:
    comparisons: list[TeacherForcedComparison]
    source: dict  # run id, reference, accepted when
    path: Path

    @property
    def name(self) -> str:
        return f"the accepted run {self.source.get('run', '?')} (same candidate config, reference and vLLM)"


def load_floor(path: Path) -> Floor | None:
    """The floor stored at `path`, or None when none was accepted for this key (or its file is unreadable)."""
    comparisons_path, source_path = path / FLOOR_FILE, path / "source.json"
    if not comparisons_path.is_file():
        return None
    rows, _ = read_jsonl(comparisons_path)
    comparisons = []
    for row in rows:
        try:
            comparisons.append(TeacherForcedComparison.model_validate(row))
        except ValueError:
            continue  # a line a newer schema wrote: the rest still pairs
    try:
        source = json.loads(source_path.read_text())
    except (OSError, ValueError):
        source = {}
    return Floor(comparisons, source, path) if comparisons else None


def save_floor(path: Path, comparisons_file: Path, source: dict) -> Path:
    """Copy a run's teacher-forced comparisons under the floor key (replacing an older floor atomically)."""
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copy(comparisons_file, tmp / FLOOR_FILE)
    (tmp / "source.json").write_text(json.dumps({**source, "accepted": time.strftime("%Y-%m-%dT%H:%M:%S%z")}) + "\n")
    shutil.rmtree(path, ignore_errors=True)
    tmp.replace(path)
    return path
