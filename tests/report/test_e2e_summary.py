"""The per-run sensitivity summary: the control stores the floor, a repeat passes and gives the noise, a shifted
run fails the paired tests even under the fixed limit."""

import json
import random

from harness.records.schema import RequestComparison, TeacherForcedComparison
from harness.report.e2e_summary import summarize


def write_run(root, name, shift=0.0, seed=0, noise=0.002):
    rng = random.Random(seed)
    base = random.Random(99)  # the same underlying per-request drift for every run
    arm = root / name / "gpu-dcp2"
    arm.mkdir(parents=True)
    with (arm / "graph_replay_vs_gpu-tp2_comparisons.jsonl").open("w") as f:
        for i in range(40):
            d = base.uniform(0.02, 0.1) + shift + rng.gauss(0, noise)
            steps = [max(0.0, base.uniform(0, 0.05) + shift + rng.gauss(0, noise)) for _ in range(8)]
            f.write(RequestComparison(request=f"r{i}", prompt_tokens=10, exact=True, first_divergence=None,
                                      candidate_tokens=8, reference_tokens=8, finite=True, max_drift=d,
                                      deltas=steps).model_dump_json() + "\n")
    with (arm / "teacher_forcing_vs_gpu-tp2_comparisons.jsonl").open("w") as f:
        for i in range(40):
            deltas = [max(0.0, base.uniform(0, 0.05) + shift + rng.gauss(0, noise)) for _ in range(8)]
            f.write(TeacherForcedComparison(request=f"r{i}", prompt_tokens=10, exact=True, first_divergence=None,
                                            candidate_tokens=8, reference_tokens=8, finite=True, max_drift=max(deltas),
                                            deltas=deltas, mean_drift=sum(deltas) / 8,
                                            decode_path_positions=8).model_dump_json() + "\n")
    (root / name / "results.jsonl").write_text(json.dumps(
        {"kind": "reference_check", "arm": "gpu-dcp2", "check": "graph_replay", "passed": True, "requests": 40,
         "exact_matches": 40, "max_drift": 0.1}) + "\n" + json.dumps(
        {"kind": "server", "arm": "gpu-dcp2", "status": "up", "startup_s": 55.0}) + "\n")
    return root / name


def test_control_stores_the_floor_repeat_passes_and_a_shift_fails(tmp_path):
    floor = tmp_path / "floor"
    first = summarize(write_run(tmp_path, "c1", seed=1), "gpu-dcp2", floor, "control", [], 0)
    assert "stored from this run" in first["floor"] and (floor / "teacher_forcing_vs_gpu-tp2_comparisons.jsonl").exists()
    assert not first["reference_captured_this_run"] and first["teacher_forcing_positions"]["dcp_decode_path"] == 320

    repeat = summarize(write_run(tmp_path, "c2", seed=2), "gpu-dcp2", floor, "control-repeat", [], 0)
    assert repeat["paired_verdict"] == "PASS", repeat["paired"]
    assert (floor / "noise.json").exists()

    calib = [(1e-3, 0.0002), (1e-2, 0.002), (1e-1, 0.02)]
    fault = summarize(write_run(tmp_path, "f1", shift=0.01, seed=3), "gpu-dcp2", floor, "lse+0.1", calib, 0)
    assert fault["paired_verdict"] == "FAIL"
    assert not fault["paired"]["tf_mean_drift"]["passed"] and "Wilcoxon" in fault["paired"]["tf_mean_drift"]["sentence"]
    decode = fault["paired"]["generation_positions"]  # the decode steps of graph_replay, paired position by position
    assert not decode["passed"] and decode["pairs"] == 320 and "sign test" in decode["sentence"]
    assert repeat["paired"]["generation_positions"]["passed"]
    det = fault["detectable"]["tf_mean_drift"]
    assert det["noise_from"] == "repeat of the control" and 0 < det["shift"] < 0.01
    assert det["smallest_lse_offset"] is not None and "LSE offset" in det["sentence"]


def test_a_fault_run_without_a_floor_is_not_a_pass(tmp_path):
    s = summarize(write_run(tmp_path, "f", shift=0.01), "gpu-dcp2", tmp_path / "none", "lse+0.1", [], 1)
    assert s["paired"]["verdict"].startswith("FAIL: not enough data")


def test_a_run_whose_candidate_produced_nothing_fails_the_paired_verdict(tmp_path):
    """The device's kv_len_short_last_rank run: the server died on the first request, so no comparison exists."""
    floor = tmp_path / "floor"
    summarize(write_run(tmp_path, "c1", seed=1), "gpu-dcp2", floor, "control", [], 0)
    dead = tmp_path / "dead"
    (dead / "gpu-dcp2").mkdir(parents=True)
    (dead / "results.jsonl").write_text(json.dumps(
        {"kind": "server", "arm": "gpu-dcp2", "status": "failed", "startup_s": None}) + "\n")
    s = summarize(dead, "gpu-dcp2", floor, "kv_len_short_last_rank", [], 1)
    assert s["paired_verdict"] == "FAIL"
    assert all(p["pairs"] == 0 and not p["passed"] for p in s["paired"].values())
    assert all("not enough data" in p["sentence"] for p in s["paired"].values())
