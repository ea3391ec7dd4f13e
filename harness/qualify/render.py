"""qualify's end, also `harness report`: a stored run read once (run.json, results.jsonl) and handed through named
steps, each taking the previous step's value: judge (its gates, baseline diff and verdict, harness.judge.verdict) ->
record the end (when qualify passes pytest's exit code: run.json's end written once with that verdict, labelled
calibrations confirmed or told why not) -> append to the history -> render (tables, report.html) -> annotate
(annotation.md). qualify runs it in a fresh interpreter."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.admission.rundir import locate_run_dir
from harness.config.errors import ConfigError
from harness.config.paths import REPO_ROOT
from harness.qualify.interrupts import SIGNAL_NAMES, interrupts_noted
from harness.records.manifest import ManifestProblem, NotAManifest, RunManifest, read_manifest
from harness.records.results import read_results
from harness.records.runinfo import finish_run_info

if TYPE_CHECKING:
    from harness.report.judging import Judgement
    from harness.report.render import Rendered
    from harness.report.rundata import RunData


def refuse_unreadable(arg: str, results: Path, records: list, problems: list[str] | tuple[str, ...],
                      command: str = "report") -> None:
    """A results file none of whose lines could be read is no run to report on: refused, naming the first problem."""
    if results.is_file() and not records and problems:
        raise ConfigError(f"{command} --run {arg!r}: {results} has no readable record; first problem: {problems[0]}")


def find_run_dir(arg: str, command: str = "report") -> Path:
    """locate_run_dir, and a results file with no readable record refused (for commands that read the run later)."""
    path = locate_run_dir(arg, command)
    if (path / "results.jsonl").is_file():
        refuse_unreadable(arg, path / "results.jsonl", *read_results(path / "results.jsonl"), command)
    return path


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


def render(judged: JudgedRun) -> Rendered:
    from harness.report.render import render_judged

    return render_judged(judged.stored.run, judged.judgement)


def annotate(judged: JudgedRun, rendered: Rendered) -> Path:
    """annotation.md: the verdict line naming every candidate, then the tables (buildkite-agent annotate)."""
    from harness.report.render import annotation

    manifest = judged.stored.run.manifest
    path = judged.stored.run_dir / "annotation.md"
    pairs = [(p.candidate, p.reference) for p in (manifest.pairs if manifest else [])] or [("unknown arm", None)]
    path.write_text(annotation(pairs, rendered.exit_code, rendered.markdown, rendered.regressions, rendered.html_path,
                               manifest.calibration if manifest else None, rendered.basis))
    return path


def report(run: str, baseline: str | None, exit_code: int | None, screenshot: bool = False) -> int:
    """Render a stored run. A Ctrl-C while it renders is noted, the report finished, and the exit code is 130.
    `exit_code` is qualify's own finishing step (in a fresh process): pytest's code; the run is judged, its end
    recorded in run.json, and the run's verdict is the exit code. Otherwise run.json is only read, and the exit code
    is 1 on a baseline regression."""
    with interrupts_noted() as noted:
        if exit_code is not None:
            judged = finish(run, baseline, exit_code)
        else:
            judged = judge(load(run), baseline, None)  # a missing or broken run.json: among the report's problems
        rendered = render(judged)
        code = rendered.exit_code if exit_code is not None else (1 if rendered.regressions else 0)
        note = annotate(judged, rendered)
        print(("\n" if exit_code is not None else "") + rendered.markdown)
        print(f"report: {rendered.html_path}\nbuildkite annotation: {note}")
    if noted:
        print(f"interrupted ({SIGNAL_NAMES[noted[0]]}) while the report was written; it was finished",
              file=sys.stderr)
        return 128 + noted[0]
    if screenshot:
        from harness.report.screenshot import screenshot_lines

        print("\n".join(screenshot_lines(rendered.html_path, judged.stored.run_dir / "report.png")))
    return code


def render_in_fresh_process(run_dir: Path, baseline: str | None, code: int) -> int:
    """`report(run_dir, baseline, code)` in a new interpreter (`python -m harness.qualify`): the suites' process may
    hold modules an interrupt cut short mid-import. It runs in a session of its own, so a terminal's Ctrl-C reaches
    only this process (which notes it); its exit code is the run's verdict."""
    argv = [sys.executable, "-m", "harness.qualify", "--run", str(run_dir.resolve()), "--exit-code", str(code)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    sys.stdout.flush()
    sys.stderr.flush()
    return subprocess.run([*argv, *(["--baseline", baseline] if baseline else [])], env=env,
                          start_new_session=True).returncode
