import json

from harness.records.results import ResultsWriter, read_results
from harness.records.schema import SCHEMA_VERSION, KvCapacityRecord, OutcomeRecord, ServerRecord


def write_two(path):
    w = ResultsWriter(path)
    w.append(ServerRecord(run_id="r", arm="a", suite="server", status="up"))
    w.append(KvCapacityRecord(run_id="r", arm="a", suite="kv_capacity", device="CPU", tokens=5, gib_per_worker=None,
                              tp=1, dcp=1, source_line="x"))


def test_roundtrip(tmp_path):
    path = tmp_path / "results.jsonl"
    write_two(path)
    records, problems = read_results(path)
    assert problems == [] and [r.kind for r in records] == ["server", "kv_capacity"]
    assert all(json.loads(line)["schema_version"] == SCHEMA_VERSION for line in path.read_text().splitlines())


def test_truncated_last_line_is_reported_and_rest_kept(tmp_path):
    path = tmp_path / "results.jsonl"
    write_two(path)
    with path.open("a") as f:
        f.write('{"schema_version": 1, "kind": "outc')
    records, problems = read_results(path)
    assert len(records) == 2
    assert problems == [f"{path}:3: truncated last line (the run was interrupted); skipped"]


def test_other_schema_version_and_unknown_kind(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"schema_version": 99, "kind": "server"}) + "\n"
                    + json.dumps({"schema_version": SCHEMA_VERSION, "kind": "mystery"}) + "\n"
                    + OutcomeRecord(run_id="r", arm="a", suite="s", test="t", outcome="passed").model_dump_json() + "\n")
    records, problems = read_results(path)
    assert [r.kind for r in records] == ["outcome"]
    assert "schema_version 99: this harness reads results.jsonl record version 1" in problems[0]
    assert "unknown record kind 'mystery'" in problems[1]


def test_missing_file_is_a_problem_not_a_crash(tmp_path):
    records, problems = read_results(tmp_path / "none.jsonl")
    assert records == [] and "no results file" in problems[0]


def test_concurrent_appends_from_processes_never_interleave(tmp_path):
    """Parallel workers share one results file: 4 processes x 50 records of ~200 KB each, every line whole."""
    import subprocess
    import sys
    import textwrap

    from harness.config.paths import REPO_ROOT
    from harness.records.jsonl import read_jsonl

    path = tmp_path / "results.jsonl"
    code = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from harness.records.jsonl import append_line
        for i in range(50):
            append_line(Path({str(path)!r}), json.dumps({{"w": sys.argv[1], "i": i, "pad": sys.argv[1] * 200_000}}))
        """)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(w)], cwd=REPO_ROOT) for w in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 4
    rows, problems = read_jsonl(path)
    assert problems == [] and len(rows) == 200
    assert all(r["pad"] == r["w"] * 200_000 for r in rows)
