"""The reference's own equivalence noise (harness/refcheck/store/self_noise.py): only a variant that keeps the reference's
arithmetic is stored as its self-noise, under the reference outputs' key with the build it ran, and a first
calibration of that same build cannot lean on it (harness/calibrate/first_anchor.py)."""

from __future__ import annotations

import pytest
from written_repeats import ARM, write_repeat

from harness.calibrate.first_anchor import spread_anchors
from harness.calibrate.repeats import read_repeat
from harness.config.arms import load_arm
from harness.config.errors import ConfigError
from harness.records.schema import RequestComparison
from harness.refcheck.store.self_noise import load_self_noise, main, not_equivalent, store_run


def comparisons(delta: float, n: int = 8) -> list[RequestComparison]:
    return [RequestComparison(request=f"r{i}", prompt_tokens=10, exact=True, first_divergence=None, candidate_tokens=4,
                              reference_tokens=4, finite=True, max_drift=delta, deltas=[delta] * 4) for i in range(n)]


def test_the_cpu_pair_differs_only_where_arithmetic_agrees_and_anything_else_is_named():
    ref, smoke = load_arm("cpu-ref"), load_arm("cpu-smoke")
    assert not_equivalent(smoke, ref) == []  # compiled, prefix caching, chunk budget, KV blocks
    bf16 = smoke.model_copy(update={"model": smoke.model.model_copy(update={"dtype": "bfloat16"})})
    assert not_equivalent(bf16, ref) == ["model.dtype"]
    patched = smoke.model_copy(update={"server": smoke.server.model_copy(
        update={"env": {**smoke.server.env, "PYTHONPATH": "/tmp/scratch"}})})
    assert not_equivalent(patched, ref) == ["server.env.PYTHONPATH"]


@pytest.fixture
def refs(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_REFERENCE_DIR", str(tmp_path / "refs"))
    return tmp_path / "refs"


def test_a_self_variant_run_is_stored_with_its_build_and_judges_another_builds_first_calibration(tmp_path, refs):
    """A run of cpu-smoke against cpu-ref (a self variant by EQUIVALENT) stored as cpu-ref's self-noise; a first
    calibration of build-b drifting 8x it is refused naming the check and repeats, one drifting like it passes, and
    one of build-a (the build that measured the noise) finds no independent self-noise."""
    run = write_repeat(tmp_path / "noise-run", tmp_path / "floor", comparisons(1e-3), build="build-a")
    arms = {"cpu-smoke": load_arm("cpu-smoke"), "cpu-ref": load_arm("cpu-ref")}
    lines = store_run(run, arms)
    assert len(lines) == 1 and lines[0].startswith("teacher_forcing: self-noise of cpu-ref (8 requests, order seed 0)")
    stored = load_self_noise(refs, "cpu-ref", "refkey", "teacher_forcing")
    assert [(n.run, n.build_hash, len(n.comparisons)) for n in stored] == [("noise-run", "build-a", 8)]

    def first(name: str, delta: float, build: str):
        dirs = [write_repeat(tmp_path / f"{name}-r{k}", tmp_path / "floor", comparisons(delta), build=build)
                for k in (1, 2)]
        return spread_anchors([read_repeat(d, ARM) for d in dirs], build)

    [faulty] = first("faulty", 8e-3, "build-b")
    assert faulty.measured and not faulty.passed and faulty.failing == (1, 2)
    assert faulty.sentence.startswith("teacher_forcing against the reference's own equivalence noise in repeats 1, 2: "
                                      "mean drift 0.008 over 32 positions (repeat 1) against the reference's 0.001")
    [clean] = first("clean", 1.5e-3, "build-b")
    assert clean.measured and clean.passed, clean.sentence
    [own] = first("own", 8e-3, "build-a")
    assert not own.measured and "from another build than the one under test" in own.sentence


def test_a_variant_beyond_the_reference_arithmetic_is_refused_and_nothing_stored(tmp_path, refs, capsys):
    run = write_repeat(tmp_path / "run", tmp_path / "floor", comparisons(1e-3))
    smoke = load_arm("cpu-smoke")
    bf16 = smoke.model_copy(update={"model": smoke.model.model_copy(update={"dtype": "bfloat16"})})
    with pytest.raises(ConfigError, match="cpu-smoke differs from its reference cpu-ref in model.dtype"):
        store_run(run, {"cpu-smoke": bf16, "cpu-ref": load_arm("cpu-ref")})
    assert not (refs / "self_noise").exists()
    assert main([str(tmp_path / "missing")]) == 2 and "self_noise: " in capsys.readouterr().err
