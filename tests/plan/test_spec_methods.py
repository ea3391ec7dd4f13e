"""The speculative method against the installed vLLM's accepted methods (pure check + the real listing)."""

from pathlib import Path

import pytest

from harness.config.arms import load_arm
from harness.plan.spec_methods import MethodListing, check_method, read_methods

SERVER_PY = Path(__file__).resolve().parents[2] / ".venv-server" / "bin" / "python"


def test_an_arm_without_speculative_is_not_checked():
    assert check_method(load_arm("cpu-ref"), MethodListing("0.32.0", frozenset({"ngram"}))) is None


def test_an_unknown_method_fails_naming_arm_file_field_and_version():
    arm = load_arm("cpu-spec", ["speculative.method=ngrm"])
    v = check_method(arm, MethodListing("0.32.0", frozenset({"ngram", "mtp"})))
    assert not v.ok
    assert "arm 'cpu-spec'" in v.detail and "cpu-spec.yaml" in v.detail and "field speculative.method" in v.detail
    assert "'ngrm' is not a speculative method vLLM 0.32.0 accepts (mtp, ngram)" in v.detail


def test_a_known_method_passes_and_an_unreadable_listing_is_not_checked():
    arm = load_arm("cpu-spec")
    assert check_method(arm, MethodListing("0.32.0", frozenset({"ngram"}))).label == "ok"
    unknown = check_method(arm, MethodListing(None, None, "vLLM not importable"))
    assert unknown.ok and unknown.label == "not checked"
    gpu = load_arm("dspark-dcp8")
    assert not check_method(gpu, MethodListing(None, None, "vLLM not importable"), strict=True).ok


@pytest.mark.skipif(not SERVER_PY.is_file(), reason="no .venv-server (make setup)")
def test_the_installed_vllm_lists_ngram_and_dspark():
    listing = read_methods(str(SERVER_PY))
    assert listing.methods and {"ngram", "dspark", "mtp", "draft_model"} <= listing.methods


@pytest.mark.skipif(not SERVER_PY.is_file(), reason="no .venv-server (make setup)")
def test_plan_refuses_a_method_the_installed_vllm_does_not_accept(tmp_path):
    import subprocess
    import sys

    from harness.config.paths import REPO_ROOT

    out = subprocess.run([sys.executable, "-m", "harness", "plan", "--arm", "cpu-spec", "--no-vllm-check",
                          "--set", "speculative.method=deepseek-mtp"], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    err = out.stderr
    assert "error: arm 'cpu-spec' fails preflight (nothing would be started)" in err and "Traceback" not in err
    assert "field speculative.method: 'deepseek-mtp' is not a speculative method vLLM 0.32.0 accepts" in err
