"""The arm's speculative method must be one the installed vLLM accepts: read from its own `SpeculativeMethod` type
(vllm/config/speculative.py, a nested Literal), not a list kept here. vLLM would otherwise refuse the JSON only
after the model has loaded -- or, for an unknown name given with a `model`, guess another method.

The listing is read in the server environment (vLLM is not importable in the harness's); where it cannot be read the
rule says "not checked", and fails in a strict run for GPU arms, like vLLM's parser check.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.config.arms import Arm, defining_file
from harness.plan.preflight import Verdict, not_checked
from harness.plan.server_env import ProbeFailed, run_cached_json_probe

RULE = "speculative_method_known"


@dataclass(frozen=True)
class MethodListing:
    version: str | None
    methods: frozenset[str] | None  # None: could not be read
    why_unknown: str = ""


def check_method(arm: Arm, listing: MethodListing, strict: bool = False) -> Verdict | None:
    """Pure: None for an arm without `speculative`; FAIL naming the arm, file, field and version for a method the
    installed vLLM does not accept."""
    spec = arm.speculative
    if spec is None:
        return None
    if listing.methods is None:
        return not_checked(RULE, f"speculative.method {spec.method!r}: {listing.why_unknown}",
                           strict and arm.device == "gpu")
    where = f"arm {arm.name!r} ({defining_file(arm, 'speculative')}): field speculative.method"
    if spec.method not in listing.methods:
        return Verdict(RULE, False, f"{where}: {spec.method!r} is not a speculative method vLLM {listing.version} "
                       f"accepts ({', '.join(sorted(listing.methods))})")
    return Verdict(RULE, True, f"vLLM {listing.version} accepts speculative method {spec.method!r}")


def read_methods(python: str, timeout_s: float = 300) -> MethodListing:
    """I/O edge: the installed vLLM's accepted speculative methods (it imports vLLM's config, torch included: ~15 s
    on an idle 2-core machine, minutes on a loaded one)."""
    try:
        result = run_cached_json_probe(python, "speculative-methods", timeout_s)
    except ProbeFailed as exc:
        return MethodListing(None, None, f"could not list vLLM's speculative methods with {python} ({exc})")
    if not result["importable"]:
        return MethodListing(None, None, f"vLLM not importable with {python}")
    if not result["methods"]:
        return MethodListing(result["version"], None, f"vLLM {result['version']} names no speculative methods "
                             f"({result['where']})")
    return MethodListing(result["version"], frozenset(result["methods"]))
