"""The history store on real records (a stored H200 run): what a run becomes, appends that replace, concurrent
appends that both land, a store of a newer version or not SQLite refused with a message, pruning."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from pathlib import Path

import pytest
from nights import make_nights

from harness.history import store
from harness.history.command import append_run, run_dirs_under
from harness.history.extract import run_rows

REAL_RUN = Path(__file__).parents[1] / "fixtures" / "stored_runs" / "h200-2026-12-02c-control"


def test_a_real_run_becomes_its_metrics_verdicts_arms_and_coverage():
    rows = run_rows(REAL_RUN)
    records = [json.loads(x) for x in (REAL_RUN / "results.jsonl").read_text().splitlines() if x.strip()]
    lp = next(r for r in records if r["kind"] == "long_prefix" and r["arm"] == "gpu-mla-120k")
    metrics = {(m.arm, m.metric): m.value for m in rows.metrics}
    assert metrics[("gpu-mla-120k", "long_prefix.c1.tpot_p50_ms")] == pytest.approx(lp["tpot"]["p50"] * 1e3)
    assert ("gpu-mla-120k", "check.long_context.max_drift") in metrics
    assert rows.run.status == "finished" and rows.run.candidates == "gpu-mla-120k"
    assert {a.arm: a.role for a in rows.arms} == {"gpu-mla-120k": "candidate", "gpu-mla-120k-ref": "reference"}
    assert {a.vllm_version for a in rows.arms} == {"0.25.0"}
    assert any(v.kind == "gate" for v in rows.verdicts) and any(c.check == "long_context" for c in rows.coverage)


def test_a_run_without_an_end_is_stored_as_interrupted(tmp_path):
    run = tmp_path / "cut"
    run.mkdir()
    manifest = json.loads((REAL_RUN / "run.json").read_text())
    manifest.pop("finished", None)
    (run / "run.json").write_text(json.dumps(manifest))
    (run / "results.jsonl").write_text((REAL_RUN / "results.jsonl").read_text())
    assert run_rows(run).run.status == "interrupted"


def test_appending_again_replaces_the_runs_rows(tmp_path):
    db_path = tmp_path / "h.sqlite"
    append_run(REAL_RUN, db_path)
    append_run(REAL_RUN, db_path)
    with store.connect(db_path) as db:
        assert [r.run_id for r in store.runs(db)] == ["h200-2026-12-02c-control"]
        n = db.execute("SELECT COUNT(*) FROM metrics").fetchone()[0]
    assert n == len(run_rows(REAL_RUN).metrics)


def append_in_process(args: tuple[str, str]) -> str:
    append_run(Path(args[0]), Path(args[1]))
    return args[0]


def test_runs_appended_at_once_from_several_processes_all_land(tmp_path):
    db_path = tmp_path / "h.sqlite"
    nights = make_nights(REAL_RUN, tmp_path / "runs", 8)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(append_in_process, [(str(n), str(db_path)) for n in nights])
    with store.connect(db_path) as db:
        assert sorted(r.run_id for r in store.runs(db)) == [n.name for n in nights]
        per_run = db.execute("SELECT run_key, COUNT(*) FROM metrics GROUP BY run_key").fetchall()
    assert len({count for _, count in per_run}) == 1  # every run whole


def test_a_store_of_a_newer_schema_is_refused_naming_the_file(tmp_path):
    db_path = tmp_path / "h.sqlite"
    with sqlite3.connect(db_path) as db:
        db.execute(f"PRAGMA user_version = {store.SCHEMA_VERSION + 1}")
    with pytest.raises(store.HistoryError, match=rf"h\.sqlite: history schema version {store.SCHEMA_VERSION + 1}, newer"):
        with store.connect(db_path):
            pass


def test_a_file_that_is_not_sqlite_is_refused_with_what_to_do(tmp_path):
    db_path = tmp_path / "h.sqlite"
    db_path.write_text("not a database, but long enough to be read as one's header page ...\n" * 20)
    with pytest.raises(store.HistoryError, match="backfill"):
        with store.connect(db_path):
            pass


def test_prune_keeps_the_newest_runs_and_backfill_finds_run_directories(tmp_path):
    db_path = tmp_path / "h.sqlite"
    nights = make_nights(REAL_RUN, tmp_path / "runs", 5)
    assert run_dirs_under(tmp_path / "runs") == nights
    for n in nights:
        append_run(n, db_path)
    with store.connect(db_path) as db:
        assert store.prune(db, 2) == 3
        assert [r.run_id for r in store.runs(db)] == ["night-03", "night-04"]
        assert db.execute("SELECT COUNT(DISTINCT run_key) FROM metrics").fetchone()[0] == 2  # cascaded


def test_two_runs_of_one_name_are_two_runs_and_the_newest_answers_to_it(tmp_path):
    """`--run-dir /tmp/x/run` twice: both named "run" (their directory), started at other times; both kept, the
    later one is the one `history check --run run` and the report's trend mean."""
    db_path = tmp_path / "h.sqlite"
    first, second = make_nights(REAL_RUN, tmp_path / "a", 2)
    for night in (first, second):
        manifest = json.loads((night / "run.json").read_text())
        (night / "run.json").write_text(json.dumps({**manifest, "run_id": "run"}))
        append_run(night, db_path)
    append_run(first, db_path)  # appended again (a resumed run): replaces itself, not the other
    with store.connect(db_path) as db:
        rows = store.runs(db)
        assert [r.run_id for r in rows] == ["run", "run"] and len({r.run_key for r in rows}) == 2
        assert store.run_key(db, "run") == rows[-1].run_key and rows[-1].run_dir == str(second.resolve())


def test_a_version_1_store_gains_the_build_and_judged_by_columns_and_keeps_its_rows(tmp_path):
    """Schema 2 adds arms.build_hash (which build ran) and verdicts.judged_by (what judged each check: "first
    calibration", "trusted by hand: REASON"); a store written before keeps its runs, with NULL there."""
    db_path = tmp_path / "h.sqlite"
    with sqlite3.connect(db_path) as db:
        db.executescript(store.SCHEMA_V1 + "PRAGMA user_version = 1;")
        db.execute("INSERT INTO runs (run_key, run_id, status, candidates, run_dir, manifest) VALUES "
                   "('old@1', 'old', 'finished', 'a', '/x', '')")
        db.execute("INSERT INTO verdicts VALUES ('old@1', 'a', 'check', 'teacher_forcing', 'r', 1, 'd')")
    with store.connect(db_path) as db:
        assert [(v.name, v.judged_by) for v in store.verdicts(db, "old@1")] == [("teacher_forcing", None)]
    run = tmp_path / "trusted"
    run.mkdir()
    manifest = json.loads((REAL_RUN / "run.json").read_text())
    manifest["builds"] = {"gpu-mla-120k": {"vllm_version": "0.25.0", "build_hash": "b0"}}
    (run / "run.json").write_text(json.dumps(manifest))
    lines = [json.loads(x) for x in (REAL_RUN / "results.jsonl").read_text().splitlines() if x.strip()]
    judged = "calibrated 2026-12-05 (K=5, deterministic over 5 repeats): limit 0.1, tie gap 0; trusted by hand: why"
    lines = [{**r, "judged_by": judged} if r["kind"] == "reference_check" else r for r in lines]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    append_run(run, db_path)
    with store.connect(db_path) as db:
        key = store.run_key(db, manifest.get("run_id", "trusted"))
        assert {a.arm: a.build_hash for a in store.arms(db, key)} == {"gpu-mla-120k": "b0", "gpu-mla-120k-ref": None}
        assert {v.judged_by for v in store.verdicts(db, key) if v.kind == "check" and v.name != "long_context"} == {
            judged}


def test_a_version_2_store_gains_the_generated_and_preemption_columns_of_coverage(tmp_path):
    """Schema 3 (issue 46): coverage rows say how many generated tokens they compared and how many requests a pressure
    check saw preempted; rows stored before keep NULL there, and new rows round-trip both."""
    from harness.history.extract import CoverageRow, RunRow, RunRows

    db_path = tmp_path / "h.sqlite"
    with sqlite3.connect(db_path) as db:
        db.executescript(store.SCHEMA_V1 + store.SCHEMA_V2 + "PRAGMA user_version = 2;")
        db.execute("INSERT INTO runs (run_key, run_id, status, candidates, run_dir, manifest) VALUES "
                   "('old@1', 'old', 'finished', 'a', '/x', '')")
        db.execute("INSERT INTO coverage VALUES ('old@1', 'a', 'long_context', 4024, 1)")
    with store.connect(db_path) as db:
        assert store.coverage(db, "a") == [("old@1", CoverageRow("a", "long_context", 4024, 1, None, None))]
    fields = {f: None for f in RunRow.__dataclass_fields__}
    row = RunRow(**{**fields, "run_key": "new@1", "run_id": "new", "status": "finished", "candidates": "a",
                    "run_dir": "/y", "manifest": ""})
    store.append(RunRows(row, coverage=[CoverageRow("a", "kv_pressure", 3120, 12, 64, 2)]), db_path)
    with store.connect(db_path) as db:
        assert ("new@1", CoverageRow("a", "kv_pressure", 3120, 12, 64, 2)) in store.coverage(db, "a")
