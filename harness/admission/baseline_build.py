"""The baseline build's stored outputs checked against the candidate arm before a build-vs-build run starts: the arm's
build pin exists, and the outputs are of this arm's model and configuration (harness/refcheck/build_outputs.py)."""

from __future__ import annotations

import os
from pathlib import Path

from harness.config.arms import Arm, defining_file
from harness.refcheck import build_outputs as bo
from harness.refcheck.store import model_identity

SUITE = bo.CHECK  # the suite that stores and compares the outputs


def has_outputs(run_dir: Path, arm: str) -> bool:
    return bo.outputs_path(run_dir, arm).is_file()


def pin_problems(arm: Arm) -> list[str]:
    """The arm's build pin points at something that exists: launcher.python a file, every server.env PYTHONPATH entry
    a directory."""
    out = []
    if arm.launcher.python and not Path(arm.launcher.python).is_file():
        out.append(f"{defining_file(arm, 'launcher')}: field launcher.python: {arm.launcher.python} is no file")
    for entry in filter(None, arm.server.env.get(bo.PIN_ENV, "").split(os.pathsep)):
        if not Path(entry).is_dir():
            out.append(f"{defining_file(arm, 'server')}: field server.env.{bo.PIN_ENV}: {entry} is no directory")
    return out


def outputs_problem(run_dir: Path, arm: Arm) -> str | None:
    """Why the run's stored outputs cannot be the arm's baseline (unreadable, another arm, model or configuration),
    naming the file; None when they can."""
    path = bo.outputs_path(run_dir, arm.name)
    mismatch = bo.meta_mismatch(bo.read_doc(path)["meta"], arm, model_identity(arm))
    return f"{path}: no baseline for arm {arm.name}: {mismatch}" if mismatch else None
