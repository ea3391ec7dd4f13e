"""Harness side: run one probe of harness/probes/answer.py in a server interpreter and hand back the finished process
(each caller reads its stdout and handles failures as it always has)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

# The directory holding this `harness` package (the repository root, or the wheel's --target directory on the GPU
# device). The server interpreter has no harness installed (.venv-server on CPU), so the probe runs with cwd=ROOT:
# `python -m` puts the working directory first on sys.path, so it imports this very harness whatever directory the
# harness runs from and whatever PYTHONPATH the caller passes (no PYTHONPATH is added: the vllm a probe finds is found
# through the interpreter's own site-packages and the caller's PYTHONPATH, as the server's is).
ROOT = Path(__file__).resolve().parents[2]
ANSWERS = Path(__file__).with_name("answer.py")


def probe_argv(python: str, probe: str, *args: str) -> list[str]:
    # A relative interpreter path is made absolute here: the child's cwd is ROOT, not ours.
    return [os.path.abspath(python) if os.sep in python else python, "-m", "harness.probes", probe, *args]


def run_probe(python: str, probe: str, *args: str, stdin: str | None = None, timeout: float | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """I/O edge: `python -m harness.probes <probe> [args]`, stdout and stderr captured as text, any exit code. Raises
    what subprocess.run raises (OSError: no such interpreter; TimeoutExpired)."""
    return subprocess.run(probe_argv(python, probe, *args), cwd=ROOT, input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def answers_digest() -> str:
    """The probes' source, for keys of stored answers: an edited probe is asked again."""
    return hashlib.sha256(ANSWERS.read_bytes()).hexdigest()
