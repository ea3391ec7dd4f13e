"""Resume end to end: a run killed (SIGTERM) during its second arm, then `qualify --resume`, renders the same tables
as an uninterrupted run; only the unfinished tests run again and only the arm with work left gets a server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.config.paths import REPO_ROOT

pytestmark = pytest.mark.e2e
SUITES = "kv_capacity,long_prefix"
ARGS = ["--arm", "cpu-smoke", "--no-vllm-check"]


def harness(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ))


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def wait_for(check, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"condition not reached (exit {proc.poll()})")


def keyed(run: Path, table: str, keys: list[str], where=lambda row: True) -> list[tuple]:
    """The rows of a rendered table by their key and verdict columns (measured numbers differ run to run)."""
    rows = json.loads((run / "tables" / f"{table}.json").read_text())
    return sorted(tuple(row[k] for k in keys) for row in rows if where(row))


def test_killed_in_second_arm_then_resumed_equals_uninterrupted(tmp_path, full_pair_run):
    run = tmp_path / "run"
    proc = harness("qualify", "--run-dir", str(run), "--suites", SUITES, *ARGS)
    # The candidate (cpu-smoke) runs first; kill once the reference's long-prefix level has begun.
    wait_for(lambda: bool(lines(run / "cpu-ref" / "long_prefix_c1.jsonl")), 1500, proc)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, out
    before = lines(run / "results.jsonl")
    assert not any(r["kind"] == "long_prefix" and r["arm"] == "cpu-ref" and r["status"] == "complete"
                   and r["concurrency"] == 2 for r in before), "the kill came too late"

    resumed = harness("qualify", "--resume", str(run), *ARGS)
    out, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out
    records = lines(run / "results.jsonl")
    again = [r for r in records if r["attempt"] == 1]
    assert {r["arm"] for r in again if r["kind"] == "server"} == {"cpu-ref"}, "a server started for a finished arm"
    rerun = {r["test"] for r in again if r["kind"] == "outcome"}
    assert "suites/test_long_prefix.py::test_long_prefix[cpu-ref]" in rerun
    assert not any("cpu-smoke" in t for t in rerun), rerun  # the candidate's tests were done
    assert json.loads((run / "run.json").read_text())["resumed"][0]["exit_code_before"] == 143

    full, code, full_out = full_pair_run
    assert code == 0, full_out
    ours = {"Suite": ("kv_capacity", "long_prefix")}
    for table, keys, where in [
        ("kv_capacity", ["Arm", "TP/DCP"], lambda r: True),
        ("performance", ["Arm", "Conc", "Failed"], lambda r: True),
        ("cold_start", ["Arm"], lambda r: True),
        ("gates", ["Gate", "Arm vs reference", "Verdict"], lambda r: r["Gate"] == "long_prefix_tpot_p50"),
        ("checks", ["Suite", "Arm", "Test", "Outcome"], lambda r: r["Suite"] in ours["Suite"]),
    ]:
        assert keyed(run, table, keys, where) == keyed(full, table, keys, where), table
    servers = json.loads((run / "tables" / "servers.json").read_text())
    assert sorted(r["Arm"] for r in servers) == ["cpu-ref", "cpu-smoke"]  # one launch each, the killed one superseded
    assert "PASSED" in (run / "annotation.md").read_text().splitlines()[0]
