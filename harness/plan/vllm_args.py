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
from harness.plan.server_env import ScriptFailed, run_cached_json_script

PARSE_SCRIPT = r"""
import contextlib, io, json, sys
try:
    import vllm
except Exception as exc:
    print(json.dumps({"importable": False, "error": repr(exc)})); sys.exit(0)
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser  # vLLM >= 0.30
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
results = []
for argv in json.loads(sys.stdin.read()):
    parser = make_arg_parser(FlexibleArgumentParser())
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(argv)
        results.append(None)
    except SystemExit:
        lines = [l for l in err.getvalue().splitlines() if l.strip()]
        results.append(lines[-1] if lines else "rejected")
print(json.dumps({"importable": True, "version": vllm.__version__, "errors": results}))
"""


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
        result = run_cached_json_script(python, PARSE_SCRIPT, timeout_s, stdin=payload)
    except ScriptFailed as exc:
        return not_checked(rule, f"could not run vLLM's parser with {python} ({exc})", strict)
    if not result["importable"]:
        return not_checked(rule, f"vLLM is not importable with {python}", strict)
    bad = [f"node {n.node_rank}: {e}" for n, e in zip(nodes, result["errors"], strict=True) if e]
    if bad:
        return Verdict(rule, False, f"vLLM {result['version']} rejects the argv: " + "; ".join(bad))
    return Verdict(rule, True, f"vLLM {result['version']}'s parser accepts every node's argv")
