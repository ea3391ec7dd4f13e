"""Run the op-level DCP conformance runner (harness/opcheck/runner.py) in the server environment; no server needed.

The runner imports torch and the installed vLLM, so it is a subprocess of the server interpreter (PYTHONPATH = the
repository); this side only reads the JSON it writes."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.config.paths import REPO_ROOT
from harness.config.thresholds import DcpOpsGates

RUNNER_CODES = {0: "every case PASS or SKIP", 1: "a case FAILed or ERRORed", 2: "the run broke"}


@dataclass
class OpCaseResults:
    """What the op runner left: its per-case JSON, how the subprocess ended and the log of its output."""
    result: dict | None  # the runner's JSON; None when it wrote none (or none that parses)
    exit_code: int | None  # None: killed after the timeout
    problem: str  # why there is no result, or what the exit code says beyond the JSON; "" when all is well
    log_path: Path


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_op_suite(python: str, world: int, device: str, out: Path, limits: DcpOpsGates,
                 timeout_s: float = 600.0) -> OpCaseResults:
    """`python -m harness.opcheck.runner --world N --device D --out <out>`; its output goes to <out>.log."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    log = out.with_suffix(".log")
    argv = [python, "-m", "harness.opcheck.runner", "--world", str(world), "--device", device, "--out", str(out),
            "--timeout", str(timeout_s), "--k-out", str(limits.k_out), "--k-lse", str(limits.k_lse)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)}
    try:
        proc = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s + 120)
        code, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        code = None
        text = "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                       for x in (exc.stdout, exc.stderr))
    except OSError as exc:
        log.write_text(f"{' '.join(argv)}\n{exc}\n")
        return OpCaseResults(None, None, f"cannot start the server interpreter {python}: {exc}", log)
    log.write_text(f"$ {' '.join(argv)}\n{text}")
    why = (f"killed after {timeout_s + 120:.0f} s" if code is None
           else f"exit code {code} ({RUNNER_CODES.get(code, 'the runner crashed')})")
    try:
        result = json.loads(out.read_text())
    except FileNotFoundError:
        return OpCaseResults(None, code, f"the runner wrote no {out.name} ({why}); last output:\n{tail(text)}", log)
    except json.JSONDecodeError as exc:
        return OpCaseResults(None, code, f"{out} is not JSON ({exc}; {why})", log)
    return OpCaseResults(result, code, "" if code in RUNNER_CODES else f"{why}; last output:\n{tail(text)}", log)
