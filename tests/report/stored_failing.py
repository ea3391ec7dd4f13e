"""A failing CPU run for the report tests: the stored full-pair run (tests/fixtures/cpu_full_pair, a real
`make qualify`) with two reference checks turned to FAIL, as a planted fault in the build would leave them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

STORED = Path(__file__).resolve().parents[1] / "fixtures" / "cpu_full_pair" / "20261205-165342"
FAILED = ("prefix_reuse", "teacher_forcing")


def failing_copy(into: Path, failed: tuple[str, ...] = FAILED) -> Path:
    """A copy of the stored run (without its rendered tables) whose `failed` checks and their tests failed."""
    run = into / "failing"
    shutil.copytree(STORED, run, ignore=shutil.ignore_patterns("tables"))
    lines = []
    for row in map(json.loads, (run / "results.jsonl").read_text().splitlines()):
        if row["kind"] == "reference_check" and row["check"] in failed:
            row.update(passed=False, exact_matches=row["exact_matches"] - 3, detail="planted: 3 outputs diverged")
        if row["kind"] == "outcome" and any(f"test_{c}" in row["test"] for c in failed):
            row.update(outcome="failed", message="planted: 3 outputs diverged")
        lines.append(json.dumps(row))
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    manifest = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**manifest, "exit_code": 1, "pytest_exit_code": 1}))
    return run
