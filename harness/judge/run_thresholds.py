"""The thresholds a suite judges its candidate with at the end of a run: the ones run.json recorded at the start
(resolved for a strict run then), so the suite's gate and the report's agree."""

from __future__ import annotations

from pathlib import Path

from harness.admission import strict_run
from harness.config.thresholds import Gates, for_run, load_gates
from harness.records.runinfo import pairs_of, read_run_info


def run_thresholds(run_dir: Path, cand: str) -> Gates:
    """run.json's thresholds for `cand`; without a run.json (pytest run by hand) the arm's gates.yaml sections,
    resolved the same way."""
    info, _ = read_run_info(run_dir)
    recorded = next((p["gates"] for p in pairs_of(info) if p["candidate"] == cand and p.get("gates")), None)
    return Gates.model_validate(recorded) if recorded else for_run(load_gates(cand), strict_run())
