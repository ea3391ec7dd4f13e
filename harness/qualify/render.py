"""`harness report`, also qualify's last step: a run judged (harness/qualify/finish.py: when qualify passes pytest's
exit code, finished first: its end recorded, calibrations confirmed, history appended) -> render (tables,
report.html) -> annotate (annotation.md). qualify runs it in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.config.paths import REPO_ROOT
from harness.qualify.finish import JudgedRun, finish, judge, load
from harness.qualify.interrupts import SIGNAL_NAMES, interrupts_noted

if TYPE_CHECKING:
    from harness.report.render import Rendered


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
