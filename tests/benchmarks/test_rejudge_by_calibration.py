"""benchmarks/rejudge_by_calibration.py on the H100 session's kept state (docs/evidence/h100-2026-12-07b): the
calibration of gpu-mla made there judges its clean runs PASS, and the same runs with a planted shift FAIL."""

import json
import tarfile
from pathlib import Path

import pytest

from benchmarks.rejudge_by_calibration import main, rejudge

EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "h100-2026-12-07b"


@pytest.fixture
def kept(tmp_path, monkeypatch):
    for archive in ("state.tgz", "runs.tar.gz"):
        with tarfile.open(EVIDENCE / archive) as tar:
            tar.extractall(tmp_path / ("state" if archive == "state.tgz" else "runs"), filter="data")
    monkeypatch.setenv("HARNESS_REFERENCE_DIR", str(tmp_path / "state" / "references"))
    return tmp_path


def test_the_clean_runs_and_the_batch_invariant_build_pass_by_the_calibration(kept):
    for run in ("gpu-mla-qualify-1", "gpu-mla-batch-invariant"):
        verdicts = dict(rejudge(kept / "runs" / run, "gpu-mla"))
        assert set(verdicts) == {"prefix_reuse", "graph_replay", "graph_replay_eager", "teacher_forcing"}
        assert set(verdicts.values()) == {"PASS"}, verdicts
    assert main(["--arm", "gpu-mla", str(kept / "runs" / "gpu-mla-qualify-1")]) == 0


def test_a_planted_shift_in_the_run_fails(kept):
    run = kept / "runs" / "gpu-mla-qualify-1"
    path = next((run / "gpu-mla").glob("teacher_forcing_vs_*_comparisons.jsonl"))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    # every scored position 0.1 nats further from the reference: under the drift limit (0.169), over the run-level
    # shift the floor test catches (its smallest at 80 %: 0.0627)
    for row in rows:
        row["deltas"] = [None if d is None else abs(d) + 0.1 for d in row["deltas"]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    verdicts = dict(rejudge(run, "gpu-mla"))
    assert verdicts["teacher_forcing"].startswith("FAIL"), verdicts
    assert verdicts["graph_replay"] == "PASS"
    assert main(["--arm", "gpu-mla", str(run)]) == 1


def test_a_run_with_nothing_to_judge_fails(kept, tmp_path, capsys):
    (tmp_path / "empty" / "gpu-mla").mkdir(parents=True)
    assert main(["--arm", "gpu-mla", str(tmp_path / "empty")]) == 1
    assert "FAIL (nothing to judge)" in capsys.readouterr().out
