"""pytest run by hand on a suites directory, in a fresh interpreter, as a user runs it (admitted as qualify admits).

Not pytester's runpytest_subprocess: it puts each test's own directory on PYTHONPATH, and the server environment's
answers (vLLM's parser, its VLLM_* variables) are keyed by PYTHONPATH and kept under HOME, which pytester points at
that directory too (harness/plan/server_env.py), so every by-hand test asked vLLM again (~30 s a question on 2 busy
cores). Here the inner session keeps the caller's PYTHONPATH and the user's answer cache: the first by-hand session's
answers serve the later ones (two at once on two xdist workers both ask; a lock would idle one worker as long). What
they check is admission and recording, which the answers' source does not change (vLLM's own answer, kept by the
same vLLM's fingerprint).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from harness.config.paths import cache_dir

ANSWERS = cache_dir()  # read at import, before pytester points HOME at a test's directory


def runpytest_by_hand(pytester: pytest.Pytester, *args: str, timeout: float = 600) -> pytest.RunResult:
    """`python -m pytest ARGS` in pytester's directory, as pytester.runpytest_subprocess returns it."""
    basetemp = pytester.path / f"runpytest-{len(list(pytester.path.glob('runpytest-*')))}"
    env = {**os.environ, "HARNESS_CACHE_DIR": str(ANSWERS)}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", f"--basetemp={basetemp}", *args], cwd=pytester.path,
                          env=env, capture_output=True, text=True, timeout=timeout)
    return pytest.RunResult(proc.returncode, proc.stdout.splitlines(), proc.stderr.splitlines(),
                            time.monotonic() - started)
