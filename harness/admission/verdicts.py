"""Admission of the arms: preflight, the workloads, this machine (GPUs, model, server environment, cluster) and the
installed vLLM (its parser, environment variables, speculative methods), every arm checked before anything starts;
the failures of all arms come in one PreflightError, one line each."""

from __future__ import annotations

import os

from harness.admission.arms import RunArms
from harness.admission.workloads import workload_verdicts
from harness.config.arms import Arm, defining_file
from harness.config.errors import ConfigError, PreflightError
from harness.config.paths import server_python
from harness.plan.env_policy import check_env_with_vllm
from harness.plan.nodes import Plan
from harness.plan.preflight import Verdict, not_checked, violations
from harness.plan.resources import check_parallel_gpus, check_resources, lease_pool
from harness.plan.spec_methods import check_method, read_methods
from harness.plan.vllm_args import check_with_vllm
from harness.serve.launch import plan_for
from harness.serve.slurm_allocation import preview, slurm_verdicts


def strict_run(flag: bool = False) -> bool:
    """Nightly and CI runs are strict: a check that could not run fails instead of reading 'not checked'."""
    return flag or os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def server_python_of(arm: Arm) -> tuple[str, str]:
    """The arm's server interpreter and where that choice came from (for the message)."""
    if arm.launcher.python:
        return arm.launcher.python, f"{defining_file(arm, 'launcher')}: field launcher.python"
    origin = "HARNESS_SERVER_PYTHON" if os.environ.get("HARNESS_SERVER_PYTHON") else "the default server interpreter"
    return server_python(), origin


def arm_verdicts(arm: Arm, candidate: Arm, suites: list[str] | None, resources: bool = True) -> tuple[Plan,
                                                                                                   list[Verdict]]:
    """Every verdict of one arm but vLLM's parser: preflight, workloads, this machine."""
    plan = plan_for(arm, placement=preview(arm))
    verdicts = [*plan.verdicts, *(workload_verdicts(candidate, arm, suites) if suites is not None else []),
                *(machine_verdicts(arm) if resources else [])]
    return plan, verdicts


def machine_verdicts(arm: Arm) -> list[Verdict]:
    """This machine: GPUs, model, server environment, port; and the SLURM cluster (an unknown node name, no
    allocation and nothing to ask one with) or Ray cluster the arm runs on."""
    python, origin = server_python_of(arm)
    return [*check_resources(arm, python, origin), *slurm_verdicts(arm)]


def parser_verdict(arm: Arm, plan: Plan, vllm_check: bool, strict: bool, earlier_failures: bool) -> Verdict:
    """vLLM's own parser on the arm's argv -- only when every other check of the run holds: importing vLLM takes
    seconds, and a refused run needs no second opinion."""
    needs_gpu_vllm = strict and arm.device == "gpu"
    if not vllm_check:
        return not_checked("vllm_parses_argv", "--no-vllm-check", needs_gpu_vllm)
    if earlier_failures:
        return not_checked("vllm_parses_argv", "the failures above come first")
    return check_with_vllm(plan.nodes, server_python_of(arm)[0], strict=needs_gpu_vllm)


def env_verdict(arm: Arm, plan: Plan) -> Verdict:
    """Every VLLM_* variable the arm sets is one the installed vLLM reads (its vllm.envs listing)."""
    return check_env_with_vllm(plan.nodes, server_python_of(arm)[0])


def method_verdicts(arm: Arm, strict: bool) -> list[Verdict]:
    """The speculative method checked against the installed vLLM's accepted methods (none without `speculative`)."""
    if arm.speculative is None:
        return []
    return [check_method(arm, read_methods(server_python_of(arm)[0]), strict)]


def refusal(failed: dict[str, list[Verdict]]) -> PreflightError:
    lines = []
    for name, verdicts in failed.items():
        lines.append(f"arm {name!r} cannot run here:")
        lines += [f"  {v.rule}: {v.detail}" for v in verdicts]
    return PreflightError("\n".join(lines) + "\nnothing was started")


def admit(arms: RunArms, suites: list[str], vllm_check: bool, strict: bool) -> dict[str, list[Verdict]]:
    """Every arm of the run checked; a PreflightError listing every failure of every arm, or the verdicts."""
    checked = {arm.name: (arm, *arm_verdicts(arm, arms.owner(arm), suites)) for arm in arms.all}
    failed = {name: violations(v) for name, (_, _, v) in checked.items() if violations(v)}
    if failed:
        raise refusal(failed)
    out = {}
    for name, (arm, plan, verdicts) in checked.items():
        # The env check imports only vllm.envs and runs even with --no-vllm-check: an unread DCP variable would
        # otherwise silently do nothing.
        out[name] = [*verdicts, env_verdict(arm, plan), *method_verdicts(arm, strict),
                     parser_verdict(arm, plan, vllm_check, strict, False)]
        if violations(out[name]):
            failed[name] = violations(out[name])
    if failed:
        raise refusal(failed)
    return out


def check_parallel(arms: RunArms) -> None:
    """--parallel starts every arm's server at once, each on GPUs leased for it: together they must fit the pool."""
    try:
        pool, origin = lease_pool()
    except ValueError as exc:
        raise ConfigError(f"HARNESS_GPUS: {exc}") from None
    verdict = check_parallel_gpus(arms.run_arms, pool, origin)
    if not verdict.ok:
        raise PreflightError(f"{verdict.rule}: {verdict.detail}\nnothing was started")
