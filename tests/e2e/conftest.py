"""The full CPU-pair qualification, run once and shared: the end-to-end test checks it, and the resume test compares
a killed-then-resumed run's tables with it (the uninterrupted run)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.config.paths import REPO_ROOT


@pytest.fixture(scope="session")
def full_pair_run(tmp_path_factory):
    """(run dir, exit code, output) of `qualify --arm cpu-smoke` with every suite and a fresh reference store."""
    work = tmp_path_factory.mktemp("full-pair")
    run = work / "run"
    proc = subprocess.run([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run), "--arm", "cpu-smoke"],
                          cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800,
                          env={**os.environ, "HARNESS_REFERENCE_DIR": str(work / "references")})
    return run, proc.returncode, proc.stdout
