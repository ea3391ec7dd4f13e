"""The judge-and-render step, also `harness report`: a stored run's tables, report.html and annotation.md, its exit
code the run's verdict (harness.judge.verdict). qualify runs it in a fresh interpreter."""

from __future__ import annotations

import os
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


def render_run(run_dir: Path, baseline: str | None = None, exit_code: int | None = None) -> Rendered:
    # Imported here: the report stack (pandas, scipy, matplotlib) takes seconds to import, and a refused command
    # should answer at once.
    from harness.report.render import render_run as render

    return render(run_dir, baseline, exit_code)


def write_annotation(run_dir: Path, manifest: RunManifest | None, rendered: Rendered) -> Path:
    from harness.report.render import annotation

    path = run_dir / "annotation.md"
    pairs = [(p.candidate, p.reference) for p in (manifest.pairs if manifest else [])] or [("unknown arm", None)]
    path.write_text(annotation(pairs, rendered.exit_code, rendered.markdown, rendered.regressions, rendered.html_path))
    return path


def record_verdict(run_dir: Path, pytest_code: int, verdict: int | None,
                   baseline: str | None) -> RunManifest | None:
    """run.json's exit code becomes the run's verdict where the gates or a baseline regression changed pytest's
    (kept as pytest_exit_code). The end was recorded before rendering (the report shows it); the verdict is known
    only once the report has recomputed the gates."""
    manifest, _ = load_manifest(run_dir)
    if verdict != pytest_code:
        manifest = finish_run_info(run_dir, verdict, baseline, pytest_exit_code=pytest_code)
    return manifest


def report(run: str, baseline: str | None, exit_code: int | None, screenshot: bool = False) -> int:
    """Render a stored run. A Ctrl-C while it renders is noted, the report finished, and the exit code is 130.
    `exit_code` is qualify's own rendering (in a fresh process): pytest's code, and the run's verdict is the exit
    code; otherwise 1 on a baseline regression."""
    with interrupts_noted() as noted:
        run_dir = find_run_dir(run)
        if baseline:
            check_baseline(baseline)
        # a missing or broken run.json is listed among the report's problems
        rendered = render_run(run_dir, baseline, exit_code)
        code = 1 if rendered.regressions else 0
        if exit_code is not None:
            code = rendered.exit_code
            manifest = record_verdict(run_dir, exit_code, code, baseline)
        else:
            manifest, _ = load_manifest(run_dir)
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
