"""qualify's end of a run, also read by `harness report`: a stored run read once (run.json, results.jsonl) and handed
through named steps, each taking the previous step's value: judge (its gates, baseline diff and verdict,
harness.judge.verdict) -> record the end (when qualify passes pytest's exit code: run.json's end written once with that
verdict, labelled calibrations confirmed or told why not) -> append to the history. Rendering the judged run is
harness/qualify/render.py."""

from __future__ import annotations

import sqlite3
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.admission.rundir import locate_run_dir, refuse_unreadable
from harness.config.errors import ConfigError
from harness.records.manifest import ManifestProblem, NotAManifest, RunManifest, read_manifest
from harness.records.results import read_results
from harness.records.runinfo import finish_run_info

if TYPE_CHECKING:
    from harness.report.judging import Judgement
    from harness.report.rundata import RunData


@dataclass(frozen=True)
class StoredRun:
    """A run directory read once: the run as the report reads it, with what reading run.json and results.jsonl met.
    Every finishing step takes this (or the step value holding it); none reads either file again."""

    run: RunData
    read: RunManifest | ManifestProblem  # run.json as read: a problem's kind says whether the end may replace it
    results_problems: tuple[str, ...]  # the results reader's (the history lists them)

    @property
    def run_dir(self) -> Path:
        return self.run.run_dir


@dataclass(frozen=True)
class JudgedRun:
    stored: StoredRun
    judgement: Judgement


def read_run(run_dir: Path) -> StoredRun:
    """run.json and results.jsonl, each read once; whatever cannot be read is a problem the report lists."""
    from harness.report.rundata import run_data  # the report stack: seconds to import (see judge)

    try:
        read: RunManifest | ManifestProblem = read_manifest(run_dir)
    except ManifestProblem as exc:
        read = exc
    records, problems = read_results(run_dir / "results.jsonl")
    manifest = read if isinstance(read, RunManifest) else None
    return StoredRun(run_data(run_dir, manifest, records, [*([] if manifest else [str(read)]), *problems]), read,
                     tuple(problems))


def load(arg: str) -> StoredRun:
    """The run `--run` names, read once; a results file with no readable record is refused."""
    stored = read_run(locate_run_dir(arg))
    usable(stored, arg)
    return stored


def usable(stored: StoredRun, arg: str) -> StoredRun:
    refuse_unreadable(arg, stored.run_dir / "results.jsonl", stored.run.records, stored.results_problems)
    return stored


def judge(stored: StoredRun, baseline: str | None, exit_code: int | None) -> JudgedRun:
    """The run's gates, its diff against `baseline` (read once; one with no readable record is refused) and its
    verdict. The report stack is imported here: pandas, scipy and matplotlib take seconds, and a refused command
    should answer at once."""
    from harness.report.judging import judge as judge_records
    from harness.report.judging import load_baseline

    base = load_baseline(baseline) if baseline else None
    if base is not None and not base.run.records:
        why = base.run.problems[0].removeprefix("baseline ") if base.run.problems else f"{base.path} is empty"
        raise ConfigError(f"--baseline {baseline}: no readable record in {base.path} ({why}); pass an earlier run's "
                          "directory or its results.jsonl")
    return JudgedRun(stored, judge_records(stored.run, base, exit_code))


@dataclass(frozen=True)
class RunEnd:
    """What run.json's end records: the run's verdict, the baseline it was diffed against, pytest's own code."""

    exit_code: int
    baseline: str | None
    pytest_exit_code: int


def record_end(stored: StoredRun, end: RunEnd) -> StoredRun:
    """run.json's end (time, device, verdict, pytest's code) written once; the run goes on holding it, as a fresh
    read would (a run.json this harness cannot read is left as it is, and stays a problem)."""
    written = finish_run_info(stored.run_dir, end.exit_code, end.baseline, end.pytest_exit_code, read=stored.read)
    if isinstance(stored.read, NotAManifest):
        return stored
    problems = stored.run.problems
    if isinstance(stored.read, ManifestProblem):  # a missing or broken run.json: written now, no longer a problem
        problems = [p for p in problems if p != str(stored.read)]
    return replace(stored, run=replace(stored.run, manifest=written, problems=problems), read=written)


def confirm_calibrations(stored: StoredRun) -> StoredRun:
    """Whether this run confirms the calibrations still labelled ("first calibration", "trusted by hand", inherited)
    that judged it, one printed sentence each, why or why not (harness/calibrate/trust.py): a passing run of other
    vllm package files that judged every calibrated check of the key clears the labels. Only here, after the verdict:
    a run never vouches for a calibration it failed."""
    from harness.calibrate.trust import confirm_calibrations as confirmed_by

    run = stored.run
    for line in confirmed_by(run.manifest, run.records) if run.manifest else []:
        print(line)
    return stored


def append_to_history(stored: StoredRun) -> StoredRun:
    """The finished (or interrupted) run into the history store. A store that cannot take it is named on stderr and
    the run's verdict stands: the run directory keeps everything, and `harness history append` adds it later."""
    from harness.history.command import append_rows
    from harness.history.extract import rows_of
    from harness.history.store import HistoryError, history_path

    run_dir, manifest = stored.run_dir, stored.run.manifest
    rows = rows_of(run_dir, manifest, stored.run.records)
    rows.problems = [*([] if manifest else [str(stored.read)]), *stored.results_problems]
    try:
        append_rows(rows)
    except (HistoryError, OSError, sqlite3.Error) as exc:
        print(f"warning: run {run_dir.name} not appended to the history ({exc}); append it later with "
              f"`python -m harness history append --run {run_dir}`", file=sys.stderr)
        return stored
    print(f"history: run {rows.run.run_id} appended to {history_path()}" +
          (f" ({len(rows.problems)} unreadable parts, see the report's problems)" if rows.problems else ""))
    return stored


def finish(arg: str, baseline: str | None, pytest_code: int) -> JudgedRun:
    """qualify's end of a run, up to rendering: read once -> judged (gates, baseline diff: the verdict may differ
    from pytest's code) -> run.json's end written once, before anything is rendered -> labelled calibrations confirmed
    -> appended to the history. Should judging fail, the end is written all the same, with pytest's code, the run
    appended, and the error goes on."""
    stored = read_run(locate_run_dir(arg))
    try:
        judged = judge(usable(stored, arg), baseline, pytest_code)
    except Exception:
        append_to_history(record_end(stored, RunEnd(pytest_code, baseline, pytest_code)))
        raise
    stored = record_end(judged.stored, RunEnd(judged.judgement.exit_code, baseline, pytest_code))
    return replace(judged, stored=append_to_history(confirm_calibrations(stored)))
