"""The engine core of a real cpu-ref server killed (SIGKILL) mid-work, once: what each consumer of the server had
finished is kept, and the death is reported with the server's last log lines. One kill serves what were three
tests (engine death reported, long-prefix requests kept, reference-check comparisons kept): the death lands inside
the long-prefix workload, which runs between the two rounds of a reference check. The server is the session's
shared cpu-ref (tests/e2e/conftest.py), once its other users are done: the kill ends it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import time

import pytest
from processes import wait_gone

from harness.config.errors import ConfigError, LaunchError
from harness.config.workloads import ReferenceChecksWorkload, load_workload
from harness.measure.generation import Sampling
from harness.measure.long_prefix import level_fields, level_records, measure
from harness.measure.prompts import build_prompts, token_space
from harness.refcheck.prompts.check_prompts import build_check_prompts
from harness.refcheck.send.batches import capture, compare_batches

pytestmark = pytest.mark.e2e


@pytest.mark.stops_shared_server
def test_engine_death_keeps_what_each_consumer_finished_and_names_the_death(tmp_path, cpu_ref_server):
    live = cpu_ref_server
    arm = live.arm
    check_w = load_workload("reference_checks_cpu", kind=ReferenceChecksWorkload)
    rounds = build_check_prompts(check_w, token_space(arm, check_w)).rounds
    # The text basis rides along (the default token-id basis runs in every qualify e2e): the server's own text for
    # the ids goes out, and the prompt tokens come back from the server's count.
    w = load_workload("long_prefix_cpu").model_copy(update={"concurrency": [1], "requests_per_level": 8,
                                                            "prompt_basis": "text"})
    prompts = build_prompts(w, token_space(arm, w))
    sink = tmp_path / "out" / "long_prefix_c1.jsonl"
    sampling = Sampling(8, 5)
    pids = live.server.pids()
    engine = [p for p in pids if p != live.server.proc.pid]
    assert engine, "no engine-core child found"

    async def kill_after_two_requests():
        task = asyncio.ensure_future(measure(live, w, prompts, tmp_path / "out"))
        while not (sink.is_file() and len(sink.read_text().splitlines()) >= 2):
            await asyncio.sleep(0.05)
        for pid in engine:
            os.kill(pid, signal.SIGKILL)  # the engine core dies under a live API server, as a crashing kernel takes it
        return await asyncio.wait_for(task, timeout=120)

    measured = {}

    def batches():
        yield rounds[0]
        measured["long_prefix"] = asyncio.run(kill_after_two_requests())  # the death, between the two rounds
        yield rounds[1]

    # Before anything is timed, the server's own count of the text prompts is checked against max_model_len: an arm
    # that fits the ids (3,544 with the output) but not their re-tokenized text (~4,030) fails naming the numbers.
    tight = dataclasses.replace(live, arm=arm.model_copy(
        update={"model": arm.model.model_copy(update={"max_model_len": 3600})}))
    try:
        with pytest.raises(ConfigError, match=r"workload long_prefix_cpu \(prompt_basis: text\) needs \d+ tokens: .*"
                                              r"\(as the server's tokenizer counts it\), \+ output_tokens 32; arm "
                                              r"cpu-ref model.max_model_len 3600: shorten"):
            asyncio.run(measure(tight, w, prompts, tmp_path / "tight"))
        assert list((tmp_path / "tight").iterdir()) == []  # no request was sent
        reference = capture(live, rounds[0] + rounds[1], sampling)
        comparisons = tmp_path / "comparisons.jsonl"
        checked = compare_batches(live, batches(), sampling, reference, comparisons)
        # The harness's crash watch names the death with the server's last lines
        deadline = time.monotonic() + 60
        with pytest.raises(LaunchError) as exc:
            while time.monotonic() < deadline:
                live.server.check_alive()
                time.sleep(0.5)
    finally:
        live.server.stop()
    message = str(exc.value)
    assert "arm 'cpu-ref': server" in message and ("exited with code" in message or "engine died" in message)
    assert "last lines:" in message and "(APIServer pid=" in message

    # Reference check: the round compared before the death is kept, on disk too; the next round names the death.
    assert checked.aborted and checked.aborted.startswith("round 1 (batch 2)"), checked.aborted
    assert "last lines" in checked.aborted or "server log tail" in checked.aborted
    assert len(checked.comparisons) == len(rounds[0]) and all(c.exact for c in checked.comparisons)
    assert len(comparisons.read_text().splitlines()) == len(rounds[0]), "comparisons made before the death are lost"

    # Long prefix: the requests finished before the death are kept.
    m = measured["long_prefix"]
    (level,) = m.levels
    fields = level_fields(level, m)
    assert fields["status"] == "aborted" and "last lines:" in fields["reason"]
    ok_on_disk = [json.loads(line) for line in sink.read_text().splitlines() if json.loads(line)["error"] is None]
    # (E2E: a level whose streams arrived buffered keeps no TPOT, and 2 shared cores can buffer them)
    assert len(ok_on_disk) >= 2 and fields["e2e"].n >= 2, "requests finished before the death were lost"
    # random ids re-tokenize to other, more tokens from their text: the count is the server's, not len(ids)
    assert all(s["prompt_tokens"] > w.prompt_tokens for s in ok_on_disk), [s["prompt_tokens"] for s in ok_on_disk]
    # requests after the death fail fast (counted, kept with their error text) or, when the crash watch sees the
    # death first (CI saw it: the API server took longer than a watch poll to notice), were in flight and are counted
    # as not finished in the record's reason: never dropped without a trace
    assert len(fields["errors"]) == fields["failed"]
    (record,) = level_records(m, w, prompts, tmp_path / "out")
    unfinished = len(prompts.measured[1]) - fields["requests"]
    assert fields["failed"] + unfinished >= 1, fields
    assert unfinished == 0 or f"; {unfinished} request(s) not finished" in record["reason"], record["reason"]
    assert fields["requests"] - fields["failed"] == fields["e2e"].n
    assert wait_gone(pids) == []
