"""RULER end to end on the CPU pair through the real CLI: lm-eval's synthetic tasks against both real servers (the
suite runs when named: it rides the shared full-pair run, `qualify --arm cpu-smoke --suites <defaults>,ruler`),
RulerRecords and the paired gate; the report recomputes the gate from results.jsonl and reads FAIL (no data) once the
reference's record is gone or failed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config.paths import REPO_ROOT
from harness.config.workloads import RulerWorkload, load_workload
from harness.measure.ruler import score

pytestmark = pytest.mark.e2e
W = load_workload("ruler_cpu", kind=RulerWorkload)
SAMPLES = len(W.tasks) * len(W.max_seq_lengths) * W.limit  # 6 x 2 x 2 = 24 per arm


def harness(*args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def ruler_run(full_pair_run):
    """(run dir, exit code, output) of the shared full-pair run, which names ruler."""
    return full_pair_run


def test_ruler_runs_lm_eval_against_both_servers_and_the_gate_passes(ruler_run):
    run, code, out = ruler_run
    assert code == 0, out[-4000:]
    recs = {r["arm"]: r for r in rows(run) if r["kind"] == "ruler"}
    assert set(recs) == {"cpu-smoke", "cpu-ref"}
    for arm, r in recs.items():
        assert (r["status"], r["n"], r["request_errors"]) == ("complete", SAMPLES, 0), arm
        assert {(c["task"], c["length"]) for c in r["cells"]} == {(t, n) for t in W.tasks for n in W.max_seq_lengths}
        for c in r["cells"]:
            assert c["n"] == W.limit
            assert c["score"] == pytest.approx(c["lm_eval_score"]), f"{arm} {c}: ours differs from lm-eval's"
        logged = [json.loads(line) for line in Path(r["samples_path"]).read_text().splitlines()]
        assert len(logged) == SAMPLES and not any("arguments" in s or "input" in s["doc"] for s in logged)
        by_task: dict[str, list[dict]] = {}
        for s in logged:
            by_task.setdefault(s.pop("task"), []).append(s)
        assert score(by_task, W.max_seq_lengths).per_sample == r["per_sample"]  # the record is the log's count
    assert recs["cpu-smoke"]["data_sha"] == recs["cpu-ref"]["data_sha"], "the arms were sent different samples"
    (gate,) = [r for r in rows(run) if r["kind"] == "gate" and r["gate"] == "ruler_paired_accuracy"]
    assert gate["passed"] and gate["detail"].startswith(f"{SAMPLES} paired RULER samples over 2 length(s)")
    # the tiny Llama may find no needle on either arm: then the gate says no drop was detectable (the CPU pair's
    # gates.yaml lets that pass, strict or not: it qualifies the pipeline)
    assert "smallest detectable drop" in gate["detail"] or "no accuracy drop is detectable" in gate["detail"]
    table = (run / "tables" / "ruler.md").read_text()
    assert "niah_multikey_3" in table and "cpu-smoke" in table and "cpu-ref" in table
    gates = {g["Gate"]: g for g in json.loads((run / "tables" / "gates.json").read_text())}
    assert gates["ruler_paired_accuracy"]["Verdict"] == "PASS"


@pytest.mark.parametrize("fault, needle", [
    ("drop", "no data: no ruler record for cpu-ref"),
    ("errors", f"no data: cpu-ref: 3/{SAMPLES} RULER request(s) failed (at most 0)"),
    ("other-samples", "no data: the two arms were sent different RULER samples"),
])
def test_report_of_the_run_without_the_references_data_reads_fail_no_data(ruler_run, tmp_path, fault, needle):
    run, code, out = ruler_run
    assert code == 0, out[-4000:]
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    kept = []
    for r in rows(run):
        if r["kind"] == "gate":
            continue  # the report recomputes the gate from the records alone
        if r["kind"] == "ruler" and r["arm"] == "cpu-ref":
            if fault == "drop":
                continue
            r = {**r, "request_errors": 3} if fault == "errors" else {**r, "data_sha": "sha256:other"}
        kept.append(r)
    (copy / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    # rendered as qualify renders its run (--exit-code: pytest's), so the verdict is the records' alone
    out = harness("report", "--run", str(copy), "--exit-code", "0", timeout=300)
    assert out.returncode == 1, out.stdout[-3000:]
    assert (copy / "annotation.md").read_text().startswith("## DCP qualification FAILED: cpu-smoke vs cpu-ref")
    gates = {g["Gate"]: g for g in json.loads((copy / "tables" / "gates.json").read_text())}
    assert gates["ruler_paired_accuracy"]["Verdict"] == "FAIL"
    assert needle in gates["ruler_paired_accuracy"]["Detail"]
