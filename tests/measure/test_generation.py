"""A batch of requests in flight at once (harness/measure/generation.py generate_batch): its first failure is raised
whichever request it was. The fault is injected in place of the HTTP call: a real server cannot be made to fail one
request of a batch on demand (the engine-death e2e kills a real engine and goes through this path)."""

import asyncio

import pytest

from harness.config.errors import WorkloadError
from harness.measure import generation


def test_a_batch_raises_its_first_failure_while_earlier_requests_are_still_in_flight(monkeypatch):
    """An engine death fails one request of a batch while the ones before it in the list are still waiting: the
    batch raises that failure (WorkloadError), never an InvalidStateError from reading an unfinished request (a
    clean-clone CI run saw one), and the requests still in flight are cancelled."""
    cancelled = []

    async def one(client, base_url, model, prompt, sampling, timeout_s, cache_salt=None):
        if prompt == [2]:
            await asyncio.sleep(0.05)
            raise WorkloadError("HTTP 500: engine dead")
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(prompt)
            raise

    monkeypatch.setattr(generation, "generate_one", one)
    with pytest.raises(WorkloadError, match="engine dead"):
        asyncio.run(generation.generate_batch("http://x", "m", [[1], [2], [3]], generation.Sampling(4, 1), 60))
    assert sorted(cancelled) == [[1], [3]]
