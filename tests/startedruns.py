"""A StartedRun made as qualify makes one (harness/qualify/suites.py started_run), less admission's machine checks:
the arms loaded, run.json written by record_run_start. A GPU arm's run can so be handed to a session on a CPU
machine, as qualify hands its run to pytest."""

from __future__ import annotations

from pathlib import Path

from harness.admission.arms import load_run_arms
from harness.admission.record import record_run_start
from harness.config.arms import Arm
from harness.config.armset import ArmSet
from harness.records.started_run import StartedRun


def handed(run_dir: Path, arms: list[Arm], arm_set: ArmSet, suites: list[str] | None = None, **flags) -> StartedRun:
    """The run of `arms` (every arm of `arm_set`, eager variants after them) with its run.json; `flags`: parallel,
    resume, refresh_reference."""
    run_arms = [a for a in arms if a.name in arm_set.arms]
    manifest = record_run_start(run_dir, run_arms, ["pytest"], suites, arm_set)
    return StartedRun(run_dir, manifest, {a.name: a for a in arms}, arm_set, **flags)


def shipped(run_dir: Path, names: list[str], reference: str | None = None, overrides: tuple[str, ...] = (),
            **flags) -> StartedRun:
    """The run of configs/arms' `names` (each against its `reference:`, or `reference`)."""
    arms = load_run_arms(names, reference, list(overrides))
    return handed(run_dir, arms.all, arms.arm_set, **flags)
