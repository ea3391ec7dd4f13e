"""The judge-record-render step, also `harness report`: a stored run judged (its gates, baseline diff and verdict,
harness.judge.verdict), then -- when qualify passes pytest's exit code -- run.json's end written once with that
verdict, then its tables, report.html and annotation.md rendered. qualify runs it in a fresh interpreter."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.admission.rundir import check_baseline
from harness.config.errors import ConfigError
from harness.config.paths import REPO_ROOT, REPORTS_DIR
from harness.qualify.interrupts import SIGNAL_NAMES, interrupts_noted
from harness.records.manifest import RunManifest, load_manifest
from harness.records.results import read_results
from harness.records.runinfo import finish_run_info

if TYPE_CHECKING:
    from harness.report.judging import Judgement
    from harness.report.render import Rendered


def find_run_dir(arg: str, command: str = "report") -> Path:
    """`<command> --run`: a run directory, or a run id under reports/, that holds a run (results or run.json)."""
    for path in (Path(arg), REPORTS_DIR / arg):
        if path.is_dir():
            break
    else:
        raise ConfigError(f"{command} --run {arg!r}: no run directory there (looked in . and {REPORTS_DIR})")
    results = path / "results.jsonl"
    if not results.is_file() and not (path / "run.json").is_file():
        raise ConfigError(f"{command} --run {arg!r}: {path} holds no run (no results.jsonl, no run.json)")
    if results.is_file():
        records, problems = read_results(results)
        if not records and problems:
            raise ConfigError(f"{command} --run {arg!r}: {results} has no readable record; "
                              f"first problem: {problems[0]}")
    return path


def judge_run(run_dir: Path, baseline: str | None, exit_code: int | None) -> Judgement:
    # Imported here: the report stack (pandas, scipy, matplotlib) takes seconds to import, and a refused command
    # should answer at once.
    from harness.report.judging import judge_run as judge

    return judge(run_dir, baseline, exit_code)


def render_run(run_dir: Path, judged: Judgement) -> Rendered:
    from harness.report.render import render_run as render

    return render(run_dir, judged=judged)


def write_annotation(run_dir: Path, manifest: RunManifest | None, rendered: Rendered) -> Path:
    from harness.report.render import annotation

    path = run_dir / "annotation.md"
    pairs = [(p.candidate, p.reference) for p in (manifest.pairs if manifest else [])] or [("unknown arm", None)]
    path.write_text(annotation(pairs, rendered.exit_code, rendered.markdown, rendered.regressions, rendered.html_path,
                               manifest.calibration if manifest else None))
    return path


def locate_and_judge(run: str, baseline: str | None, exit_code: int | None) -> tuple[Path, Judgement]:
    run_dir = find_run_dir(run)
    if baseline:
        check_baseline(baseline)
    return run_dir, judge_run(run_dir, baseline, exit_code)


def judge_and_record(run: str, baseline: str | None, pytest_code: int) -> tuple[Path, Judgement, RunManifest]:
    """qualify's end of a run: judged first (gates, baseline diff: the verdict may differ from pytest's code), then
    run.json's end (time, device, verdict, pytest's code) written once, before anything is rendered. Should judging
    fail, the end is written all the same, with pytest's code, and the error goes on. Returns run.json as written."""
    run_dir = Path(run)  # qualify passes its run directory
    try:
        run_dir, judged = locate_and_judge(run, baseline, pytest_code)
    except Exception:
        if run_dir.is_dir():
            finish_run_info(run_dir, pytest_code, baseline)
            append_to_history(run_dir)
        raise
    manifest = finish_run_info(run_dir, judged.exit_code, baseline, pytest_exit_code=pytest_code)
    confirm_calibrations(run_dir, manifest)
    append_to_history(run_dir)
    return run_dir, judged, manifest


def confirm_calibrations(run_dir: Path, manifest: RunManifest) -> None:
    """A passing run of another build confirms the arm's first calibration that judged it (harness/calibrate/
    trust.py): its lines stop saying "first calibration". Only here, after the verdict: a run never vouches for a
    calibration it failed."""
    from harness.calibrate.trust import confirm_first_calibrations
    from harness.records.attempts import current_records

    for line in confirm_first_calibrations(manifest, current_records(read_results(run_dir / "results.jsonl")[0])):
        print(line)


def append_to_history(run_dir: Path) -> None:
    """The finished (or interrupted) run into the history store. A store that cannot take it is named on stderr and
    the run's verdict stands: the run directory keeps everything, and `harness history append` adds it later."""
    from harness.history.command import append_run
    from harness.history.store import HistoryError, history_path

    try:
        rows = append_run(run_dir)
    except (HistoryError, OSError, sqlite3.Error) as exc:
        print(f"warning: run {run_dir.name} not appended to the history ({exc}); append it later with "
              f"`python -m harness history append --run {run_dir}`", file=sys.stderr)
        return
    print(f"history: run {rows.run.run_id} appended to {history_path()}" +
          (f" ({len(rows.problems)} unreadable parts, see the report's problems)" if rows.problems else ""))


def report(run: str, baseline: str | None, exit_code: int | None, screenshot: bool = False) -> int:
    """Render a stored run. A Ctrl-C while it renders is noted, the report finished, and the exit code is 130.
    `exit_code` is qualify's own finishing step (in a fresh process): pytest's code; the run is judged, its end
    recorded in run.json, and the run's verdict is the exit code. Otherwise run.json is only read, and the exit code
    is 1 on a baseline regression."""
    with interrupts_noted() as noted:
        if exit_code is not None:
            run_dir, judged, manifest = judge_and_record(run, baseline, exit_code)
        else:
            run_dir, judged = locate_and_judge(run, baseline, None)
            manifest, _ = load_manifest(run_dir)  # a missing or broken one is listed among the report's problems
        rendered = render_run(run_dir, judged)
        code = rendered.exit_code if exit_code is not None else (1 if rendered.regressions else 0)
        note = write_annotation(run_dir, manifest, rendered)
        print(("\n" if exit_code is not None else "") + rendered.markdown)
        print(f"report: {rendered.html_path}\nbuildkite annotation: {note}")
    if noted:
        print(f"interrupted ({SIGNAL_NAMES[noted[0]]}) while the report was written; it was finished",
              file=sys.stderr)
        return 128 + noted[0]
    if screenshot:
        from harness.report.screenshot import take_screenshot

        print(f"screenshot: {take_screenshot(rendered.html_path, run_dir / 'report.png')}")
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
