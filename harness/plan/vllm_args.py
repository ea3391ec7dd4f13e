"""Parse a plan's argv with vLLM's own CLI parser, in the server environment.

A misspelt flag then fails in seconds, not after a 15-minute model load. The check
runs the server's interpreter in a subprocess (vLLM is not importable in the
harness's environment); where vLLM is not importable there, the check says "not checked" -- and fails
where the caller requires it (a GPU arm in a strict run: `--strict`, or CI=true).
"""

from __future__ import annotations

import json

from harness.plan.nodes import ENTRYPOINT_MODULES, NodeCommand
from harness.plan.preflight import Verdict, not_checked
from harness.plan.server_env import ProbeFailed, run_cached_json_probe


def cli_part(argv: tuple[str, ...]) -> list[str]:
    """The flags vLLM's parser sees: everything after `-m <module> [serve]` (srun prefix dropped)."""
    args = list(argv)
    i = args.index("-m")
    module = args[i + 1]
    for entry in ENTRYPOINT_MODULES.values():
        if entry[0] == module:
            return args[i + 1 + len(entry):]
    raise ValueError(f"unknown vLLM entry module {module!r}")


def check_with_vllm(nodes: tuple[NodeCommand, ...], python: str, timeout_s: float = 180,
                    strict: bool = False) -> Verdict:
    rule = "vllm_parses_argv"
    payload = json.dumps([cli_part(n.argv) for n in nodes])
    try:
        result = run_cached_json_probe(python, "parse-argv", timeout_s, stdin=payload)
    except ProbeFailed as exc:
        return not_checked(rule, f"could not run vLLM's parser with {python} ({exc})", strict)
    if not result["importable"]:
        return not_checked(rule, f"vLLM is not importable with {python}", strict)
    bad = [f"node {n.node_rank}: {e}" for n, e in zip(nodes, result["errors"], strict=True) if e]
    if bad:
        return Verdict(rule, False, f"vLLM {result['version']} rejects the argv: " + "; ".join(bad))
    return Verdict(rule, True, f"vLLM {result['version']}'s parser accepts every node's argv")
