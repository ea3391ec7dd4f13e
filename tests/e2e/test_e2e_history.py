"""The history end to end, on the session's real CPU-pair run (no server of its own): qualify appended it to the
session's store; two appends at once both land; nights built from its records with a planted slowdown are flagged at
the night it entered by `harness history`, the same nights without it are not; the trend page renders."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from nights import make_nights

from harness.config.paths import REPO_ROOT
from harness.history import store

pytestmark = pytest.mark.e2e
TPOT = "long_prefix.c1.tpot_p50_ms"


def harness(*argv: str, db=None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"HARNESS_HISTORY": str(db)} if db else {})}
    return subprocess.run([sys.executable, "-m", "harness", *argv], cwd=REPO_ROOT, capture_output=True, text=True,
                          env=env, timeout=300)


def test_qualify_appends_the_run_and_concurrent_appends_land(full_pair_run, tmp_path):
    run, code, out = full_pair_run
    run_id = json.loads((run / "run.json").read_text())["run_id"]
    assert f"history: run {run_id} appended to {store.history_path()}" in out, out[-3000:]
    with store.connect() as db:
        # by its directory: other runs of this session are named "run" too (their --run-dir), each its own entry
        [row] = [r for r in store.runs(db) if r.run_dir == str(run.resolve())]
        tpot = store.metric_values(db, "cpu-smoke", TPOT)[row.run_key]
    assert row.run_id == run_id and row.status == "finished" and row.exit_code == code
    records = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines() if x.strip()]
    record = next(r for r in records if r["kind"] == "long_prefix" and r["arm"] == "cpu-smoke"
                  and r["concurrency"] == 1)
    assert tpot == pytest.approx(record["tpot"]["p50"] * 1e3)

    copies = make_nights(run, tmp_path / "copies", 2, prefix="copy")
    procs = [subprocess.Popen([sys.executable, "-m", "harness", "history", "append", "--run", str(c)], cwd=REPO_ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for c in copies]
    assert [p.wait(timeout=300) for p in procs] == [0, 0], [p.stdout.read() for p in procs]
    with store.connect() as db:
        assert {"copy-00", "copy-01", run_id} <= {r.run_id for r in store.runs(db)}


def test_planted_slowdown_in_real_records_is_flagged_at_its_night(full_pair_run, tmp_path):
    run, _, _ = full_pair_run
    slowed, clean = tmp_path / "slowed.sqlite", tmp_path / "clean.sqlite"
    for db, slow_from in ((slowed, 8), (clean, None)):
        make_nights(run, tmp_path / db.stem, 12, slow_from=slow_from, sigma=0.03, seed=2)
        assert harness("history", "backfill", str(tmp_path / db.stem), db=db).returncode == 0
    verdicts = {db: {n: harness("history", "check", "--run", f"night-{n:02d}", db=db) for n in range(4, 12)}
                for db in (slowed, clean)}
    failing = [n for n, c in verdicts[slowed].items() if c.returncode == 1]
    assert failing and failing[0] > 8, {n: c.stdout for n, c in verdicts[slowed].items()}  # once the level shows
    first = verdicts[slowed][failing[0]].stdout
    assert "cpu-smoke long_prefix.c1.tpot_p50_ms: regression" in first and "from run night-08 .. " in first, first
    assert all(c.returncode == 0 for c in verdicts[clean].values()), [c.stdout for c in verdicts[clean].values()]
    report = harness("report", "--run", str(tmp_path / "slowed" / "night-11"), db=slowed)
    html = (tmp_path / "slowed" / "night-11" / "report.html").read_text()
    assert report.returncode in (0, 1) and "data:image/png" in html.split('id="trend"')[1].split("<h2>")[0]
    assert "night-08" in html.split('id="trend"')[1]
