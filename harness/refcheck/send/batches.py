"""Driving a live server through the reference checks' prompts (I/O): capture reference outputs, or send
batches to the candidate and compare each output as it arrives.

Comparisons are appended to a JSONL file as they are made, so a server that dies mid-check leaves every
comparison already made on disk, and the check reports where it stopped.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from harness.config.errors import HarnessError, LaunchError
from harness.measure.generation import Generation, Sampling, generate_batch
from harness.refcheck.judging.compare import compare_outputs
from harness.refcheck.judging.comparisons import BatchComparisons
from harness.refcheck.prompts.check_prompts import CheckPrompt
from harness.serve.launch import LiveServer
from harness.serve.serverlog import tail


def send(live: LiveServer, batch: list[CheckPrompt], sampling: Sampling,
         cache_salt: str | None = None) -> list[Generation]:
    return asyncio.run(generate_batch(live.info.base_url, live.arm.model.served_name, [p.tokens for p in batch],
                                      sampling, live.arm.timeouts.request_s, live.server.check_alive, cache_salt))


def abort_reason(where: str, exc: HarnessError, live) -> str:
    """Why a sender stopped at `where`: a dead server's message carries its log tail already; a failed request gets
    it added."""
    if isinstance(exc, LaunchError):
        return f"{where}: {exc}"
    return f"{where}: {exc}\nserver log tail:\n{tail(live.server.log_text(), 15)}"


def capture(live: LiveServer, prompts: list[CheckPrompt], sampling: Sampling) -> dict[str, Generation]:
    """One prompt at a time, each under its own cache salt: the reference computes every output alone and from
    scratch, even on an arm with prefix caching on (gpu-tp2), where the probes would otherwise hit the warm prompt."""
    return {p.id: send(live, [p], sampling, cache_salt=f"reference-{p.id}")[0] for p in prompts}


def compare_batches(live: LiveServer, batches: list[list[CheckPrompt]], sampling: Sampling,
                    reference: dict[str, Generation], sink: Path) -> BatchComparisons:
    """Each batch in flight at once; every output compared with the reference output for the same prompt id."""
    compared = BatchComparisons()
    sink.parent.mkdir(parents=True, exist_ok=True)
    with sink.open("a") as f:
        for batch in batches:
            try:
                outputs = send(live, batch, sampling)
            except LaunchError as exc:  # the server died: its message already carries the log tail
                compared.aborted = f"{batch[0].group}: {exc}"
                return compared
            except HarnessError as exc:  # a request failed: add what the server logged
                compared.aborted = f"{batch[0].group}: {exc}\nserver log tail:\n{tail(live.server.log_text(), 15)}"
                return compared
            for p, out in zip(batch, outputs, strict=True):
                compared.outputs[p.id] = out.token_ids
                compared.generations[p.id] = out
                c = compare_outputs(p.id, len(p.tokens), out, reference[p.id], p.group)
                compared.comparisons.append(c)
                f.write(c.model_dump_json() + "\n")
                f.flush()
    return compared
