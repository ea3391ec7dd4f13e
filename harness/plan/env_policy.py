"""The arm's VLLM_* environment must take effect: every VLLM_* variable a plan sets must be one the installed vLLM
reads (its `vllm.envs.environment_variables`), else the arm fails before launch naming the variable and the version.

vLLM itself only warns about an unknown VLLM_* variable at start-up (`validate_environ` in vllm/envs.py logs
"Unknown vLLM environment variable detected: NAME"), and 0.25.0 reads none of VLLM_USE_DIRECT_DCP_A2A / _Q_GATHER /
_KV_GATHER: an arm's DCP policy would silently do nothing. An arm that leaves a switch at `auto` sets nothing and is
never refused. The listing is read in the server environment (vLLM is not importable in the harness's); where vLLM is
not importable there, the check is skipped and says so. The log scan is the second line of defence, after start-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from harness.plan.nodes import NodeCommand
from harness.plan.preflight import Verdict
from harness.plan.server_env import ProbeFailed, run_cached_json_probe

RULE = "vllm_reads_env"
# vllm/envs.py validate_environ (0.25.0 and 0.32.0): logger.warning("Unknown vLLM environment variable detected: %s")
# and, with VLLM_ENVIRONMENT_VARIABLES_HARD_FAIL-style strictness, ValueError(f"Unknown vLLM environment variable
# detected: {env}").
UNKNOWN_ENV_LINE = re.compile(r"Unknown vLLM environment variable detected: (VLLM_[A-Za-z0-9_]+)")


@dataclass(frozen=True)
class EnvListing:
    """What the installed vLLM reads: None when it could not be asked (then nothing is refused)."""

    version: str | None
    variables: frozenset[str] | None
    why_unknown: str = ""


def unread_variables(env: Mapping[str, str], listing: EnvListing) -> list[str]:
    """The VLLM_* names in `env` that the installed vLLM does not read (sorted)."""
    if listing.variables is None:
        return []
    return sorted(k for k in env if k.startswith("VLLM_") and k not in listing.variables)


def check_env_read(nodes: Iterable[NodeCommand], listing: EnvListing) -> Verdict:
    """Pure: fails when a node's env sets a VLLM_* variable the installed vLLM does not read."""
    if listing.variables is None:
        return Verdict(RULE, True, f"skipped: {listing.why_unknown or 'vLLM listing unavailable'}")
    unread = sorted({name for n in nodes for name in unread_variables(n.env, listing)})
    if unread:
        return Verdict(RULE, False, (
            f"vLLM {listing.version} does not read {', '.join(unread)} (not in vllm.envs.environment_variables): "
            "setting it would have no effect. Leave the arm's switch at `auto` (sets nothing) or use a vLLM "
            "that implements it"))
    return Verdict(RULE, True, f"vLLM {listing.version} reads every VLLM_* variable the plan sets")


def unknown_env_in_log(log_text: str) -> list[str]:
    """Pure: the variables vLLM's own start-up warning names, in order of first mention."""
    seen: dict[str, None] = {}
    for m in UNKNOWN_ENV_LINE.finditer(log_text):
        seen.setdefault(m.group(1), None)
    return list(seen)


def log_env_problem(log_text: str, planned_env: Mapping[str, str], version: str | None) -> str | None:
    """Pure: a sentence when vLLM logged one of the plan's own VLLM_* variables as unknown (inherited shell variables
    are vLLM's warning alone)."""
    ours = [v for v in unknown_env_in_log(log_text) if v in planned_env]
    if not ours:
        return None
    return (f"vLLM {version or '(version unknown)'} logged 'Unknown vLLM environment variable detected' for "
            f"{', '.join(ours)}, which the arm sets: the arm's environment policy has no effect")


def read_listing(python: str, timeout_s: float = 120) -> EnvListing:
    """I/O edge: ask the server environment's vLLM which variables it reads."""
    try:
        result = run_cached_json_probe(python, "env-variables", timeout_s)
    except ProbeFailed as exc:
        return EnvListing(None, None, f"could not list vLLM's variables with {python} ({exc})")
    if not result["importable"]:
        return EnvListing(None, None, f"vLLM not importable with {python}")
    return EnvListing(result["version"], frozenset(result["variables"]))


def check_env_with_vllm(nodes: Iterable[NodeCommand], python: str) -> Verdict:
    return check_env_read(nodes, read_listing(python))
