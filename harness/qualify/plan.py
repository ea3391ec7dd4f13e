"""`plan`: qualify's admission without a run: per-node argv, environment and every verdict of each arm, printed."""

from __future__ import annotations

import sys

from harness.admission.arms import check_shared_workloads, load_run_arms
from harness.admission.verdicts import (
    arm_verdicts,
    env_verdict,
    machine_verdicts,
    method_verdicts,
    parser_verdict,
    strict_run,
)
from harness.admission.workloads import LOCAL_FILE_RULES, kv_twins, workload_verdicts
from harness.config.arms import Arm
from harness.config.armset import parse_arm_names
from harness.config.errors import ConfigError
from harness.config.kv_twin import TWIN_SUFFIX
from harness.config.suites import default_suites
from harness.plan.nodes import render_plan
from harness.plan.preflight import Verdict, violations


def plan_arms(arm: str | None, arms: str | None, overrides: list[str], strict: bool, vllm_check: bool) -> int:
    """Per-node argv + environment + preflight verdicts of one arm or several (--arms; their references checked too,
    a shared one once); this machine's resources are shown but do not decide the exit code: a GPU arm is planned on
    a laptop. The arms that fail are listed in one message at the end."""
    if bool(arm) == bool(arms):
        raise ConfigError("plan: name one arm (--arm NAME) or several (--arms a,b); `python -m harness arms` lists "
                          "them")
    run_arms = load_run_arms([arm] if arm else parse_arm_names(arms), None, overrides)
    check_shared_workloads(run_arms, default_suites())  # as `qualify` without --suites would
    run_arms.loaded.update(kv_twins(run_arms.candidates, default_suites()))
    failed = {}
    for i, candidate in enumerate(run_arms.candidates):
        if len(run_arms.candidates) > 1:
            print(("\n" if i else "") + f"=== {candidate.name} ({i + 1} of {len(run_arms.candidates)}) ===")
        failed[candidate.name] = plan_one(candidate, strict_run(strict), vllm_check)
    others = [a for a in run_arms.all if a.name not in run_arms.arm_set.candidates]
    kinds = {True: "KV-capped twin", False: "eager variant"}
    named = [f"{a.name} ({'reference' if a.name in run_arms.arm_set.arms else kinds[a.name.endswith(TWIN_SUFFIX)]})"
             for a in others]
    for other in others:  # they run the candidate's workloads: each must fit them, as `qualify` checks
        failed[other.name] = violations(plan_workloads(run_arms.owner(other), other)[0])
    if named:
        print(f"\nnamed arms: {', '.join(named)}: " + ("valid" if not any(failed[a.name] for a in others)
                                                       else "see the error below"))
    lines = [line for name, bad in failed.items() if bad
             for line in (f"arm {name!r} fails preflight (nothing would be started):",
                          *(f"  {v.rule}: {v.detail}" for v in bad))]
    if lines:
        print("error: " + "\n".join(lines), file=sys.stderr)
    return 2 if lines else 0


def plan_workloads(candidate: Arm, arm: Arm) -> tuple[list[Verdict], list[Verdict]]:
    """The workloads of a run of qualify's default suites on this arm (named-only suites such as ruler are checked
    when a qualify names them): (whether each fits the arm, which decides; what this machine's files say, which is
    shown with this machine)."""
    verdicts = workload_verdicts(candidate, arm, default_suites())
    local = [v for v in verdicts if v.rule in LOCAL_FILE_RULES]
    return [v for v in verdicts if v not in local], local


def plan_one(candidate: Arm, strict: bool, vllm_check: bool) -> list[Verdict]:
    """Print one candidate's plan; its failed verdicts."""
    arm_plan, verdicts = arm_verdicts(candidate, candidate, None, resources=False)
    fits, local_files = plan_workloads(candidate, candidate)
    verdicts += fits
    verdicts.append(env_verdict(candidate, arm_plan))
    verdicts += method_verdicts(candidate, strict)
    verdicts.append(parser_verdict(candidate, arm_plan, vllm_check, strict, bool(violations(verdicts))))
    print(render_plan(arm_plan, verdicts[len(arm_plan.verdicts):]))
    print("\nthis machine (checked again by `qualify` before anything starts):")
    for v in [*local_files, *machine_verdicts(candidate)]:
        print(f"  [{v.label}] {v.rule}: {v.detail}")
    return violations(verdicts)
