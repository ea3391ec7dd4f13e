"""Which runs make one series (issue 47 item 3): one arm config, reference, model and machine class, nightly runs
only (never a calibration's repeats), in UTC start order; a vLLM version change is kept on the series. Real records
(a stored H200 run) copied as nights, each night's run.json changed where the case needs it."""

from __future__ import annotations

import json
from pathlib import Path

from nights import make_nights

from harness.history import store
from harness.history.command import append_run
from harness.history.trends import host_class, series

REAL_RUN = Path(__file__).parents[1] / "fixtures" / "stored_runs" / "h200-2026-12-02c-control"
ARM = "gpu-mla-120k"
TPOT = "long_prefix.c1.tpot_p50_ms"


def edit(night: Path, change) -> None:
    manifest = json.loads((night / "run.json").read_text())
    change(manifest)
    (night / "run.json").write_text(json.dumps(manifest))


def nights_with(tmp_path: Path, changes: dict[int, object]) -> Path:
    db = tmp_path / "h.sqlite"
    for i, night in enumerate(make_nights(REAL_RUN, tmp_path / "runs", 8, sigma=0.03, seed=7)):
        if i in changes:
            edit(night, changes[i])
        append_run(night, db)
    return db


def ids(db: Path, upto: str | None = None) -> tuple[list[str], int]:
    with store.connect(db) as conn:
        key = store.run_key(conn, upto) if upto else None
        s = series(conn, ARM, TPOT, upto=key)
    return s.runs, s.left_out


def test_a_run_of_another_arm_config_host_or_calibration_stays_out_of_the_series(tmp_path):
    def other_config(m):
        m["arms"][ARM]["server"] = {**m["arms"][ARM].get("server", {}), "max_num_seqs": 7}

    def other_host(m):
        m["device"] = {"kind": "gpu", "gpus": ["NVIDIA H100 80GB HBM3"], "driver": "x"}

    def repeat(m):
        m["calibration"] = {"id": "cal", "repeat": 1, "of": 5}

    db = nights_with(tmp_path, {2: other_config, 4: other_host, 6: repeat})
    runs, left_out = ids(db)
    assert runs == ["night-00", "night-01", "night-03", "night-05", "night-07"]
    assert left_out == 2  # the other config and host; a calibration repeat is no night at all
    # a series ending at the odd run is that run's own series: the runs that belong with it
    assert ids(db, "night-04") == (["night-04"], 4)


def test_runs_are_ordered_by_their_utc_start_not_by_the_local_time_string(tmp_path):
    def tokyo_earlier(m):  # 2026-11-03T10:00+0900 is 01:00 UTC: before night-02 (Nov 3 02:00 UTC), after night-01
        m["started"] = "2026-11-03T10:00:00+0900"

    db = nights_with(tmp_path, {5: tokyo_earlier})
    runs, _ = ids(db)
    assert runs[:4] == ["night-00", "night-01", "night-05", "night-02"], runs


def test_the_vllm_version_of_each_run_is_kept_on_the_series(tmp_path):
    db = tmp_path / "h.sqlite"
    for i, night in enumerate(make_nights(REAL_RUN, tmp_path / "runs", 6, sigma=0.03, seed=7)):
        if i >= 4:
            records = [json.loads(line) for line in (night / "results.jsonl").read_text().splitlines() if line]
            for r in records:
                if r.get("kind") == "server" and r.get("arm") == ARM:
                    r["vllm_version"] = "0.26.0"
            (night / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        append_run(night, db)
    with store.connect(db) as conn:
        s = series(conn, ARM, TPOT)
    assert s.versions[-2:] == ["0.26.0", "0.26.0"] and s.versions[0] != "0.26.0"


def test_host_class_is_the_machine_kind_not_the_hostname():
    assert host_class(json.dumps({"device": {"kind": "gpu", "gpus": ["NVIDIA H200", "NVIDIA H200"]}})) \
        == "gpu: NVIDIA H200 x 2"
    assert host_class(json.dumps({"device": {"kind": "cpu", "cpu": "AMD EPYC x 2"}})) == "cpu: AMD EPYC x 2"
    assert host_class("") == "unknown" and host_class("not json") == "unknown"


def test_paths_names_and_waits_do_not_split_a_series_but_the_reference_config_does(tmp_path):
    def other_checkout(m):  # another agent's checkout path and timeouts: the same arm
        m["arms"][ARM]["source_files"] = ["/var/lib/buildkite-agent/builds/agent-7/configs/arms/x.yaml"]
        m["arms"][ARM]["timeouts"] = {"startup_s": 1}

    def other_reference(m):  # the reference arm's server changed: its outputs, so the drifts, are another series
        ref = m["arms"][ARM].get("reference") or "gpu-mla-120k-ref"
        m["arms"][ref]["server"] = {**m["arms"][ref].get("server", {}), "max_num_seqs": 3}

    db = nights_with(tmp_path, {1: other_checkout, 3: other_reference})
    runs, left_out = ids(db)
    assert "night-01" in runs and "night-03" not in runs and left_out == 1, (runs, left_out)


def test_a_gated_series_not_measured_tonight_fails_as_no_data(tmp_path):
    import sqlite3

    from harness.history.trends import nightly

    db = nights_with(tmp_path, {})
    conn = sqlite3.connect(db)
    key = conn.execute("SELECT run_key FROM runs WHERE run_id = 'night-07'").fetchone()[0]
    conn.execute("DELETE FROM metrics WHERE run_key = ? AND metric LIKE 'check.long_context.%'", (key,))
    conn.commit()
    conn.close()
    with store.connect(db) as c:
        tonight = nightly(c, "night-07")
    assert any("check.long_context.max_drift: not measured tonight (last measured by run night-06)" in f
               for f in tonight.failures), tonight.failures
    assert not tonight.passed
