"""The admit step of qualify: what the command names (suites, candidates, a run directory new or resumed, a baseline)
and admission of every arm of the run, all before anything is started or written."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.admission.arms import RunArms, check_shared_workloads, load_run_arms
from harness.admission.rundir import check_baseline, check_resume, choose_run_dir, resume_run_dir
from harness.admission.verdicts import admit, check_parallel, strict_run
from harness.config.armset import parse_arm_names
from harness.config.errors import ConfigError
from harness.config.suites import parse_suites
from harness.plan.redact import redact_arm_dump
from harness.qualify.suites import check_pytest_args
from harness.records.manifest import load_manifest


def named_candidates(args: argparse.Namespace) -> tuple[list[str], str | None]:
    """The candidates and the command-line reference: --arm X [--reference R], --arms a,b, or with --resume alone the
    resumed run's own (its run.json pairs)."""
    if args.arm and args.arms:
        raise ConfigError(f"--arm {args.arm} and --arms {args.arms}: name one candidate with --arm, or several with "
                          "--arms, not both")
    if args.arms:
        if args.reference:
            raise ConfigError(f"--reference {args.reference} with --arms {args.arms}: --reference replaces the "
                              "reference of one candidate (--arm); with --arms each candidate runs against its own "
                              "`reference:` field (an arm YAML with `extends:` and another `reference:` picks another)")
        return parse_arm_names(args.arms), None
    if args.arm:
        return [args.arm], args.reference
    if not args.resume:
        raise ConfigError("qualify: name the candidate arm (--arm NAME) or several (--arms a,b); "
                          "`python -m harness arms` lists them")
    manifest, problems = load_manifest(resume_run_dir(args.resume, args.run_id, args.run_dir))
    pairs = manifest.pairs if manifest else []
    if problems or not pairs:
        raise ConfigError(f"--resume {args.resume}: " + (problems[0] if problems else "its run.json names no arms")
                          + "; name the run's arms with --arm or --arms")
    if len(pairs) == 1:
        return [pairs[0].candidate], pairs[0].reference
    return [p.candidate for p in pairs], None


def resume_run(args: argparse.Namespace, arms: RunArms) -> Path:
    """--resume: the earlier run's directory, its configuration checked against this command's. The suites default
    to the run's own."""
    run_dir = resume_run_dir(args.resume, args.run_id, args.run_dir)
    manifest, problems = load_manifest(run_dir)
    if manifest is None:
        raise ConfigError(f"--resume: {problems[0]}")
    dumps = {a.name: redact_arm_dump(a.model_dump(mode="json")) for a in arms.run_arms}
    args.suite_list = check_resume(run_dir, manifest, dumps, args.suite_list if args.suites else None)
    args.suites = ",".join(args.suite_list)
    return run_dir


def admit_run(args: argparse.Namespace) -> tuple[Path, RunArms]:
    """Every check of a qualify, cheapest first: suites and candidates named, the run directory chosen (a resumed
    one once its arms are loaded), the baseline, the arms with their shared workloads and GPUs, then admission
    (preflight, workloads, this machine, vLLM) and the pytest arguments. The run directory and its arms; sets
    args.suite_list, names, reference and arm_count, which the run-suites step reads."""
    args.suite_list = parse_suites(args.suites)
    args.names, reference = named_candidates(args)
    run_dir = None if args.resume else choose_run_dir(args.run_id, args.run_dir)
    if args.baseline:
        check_baseline(args.baseline)  # a wrong or corrupt baseline fails now, not after the suites ran
    arms = load_run_arms(args.names, reference, args.set)
    args.reference = reference if len(args.names) == 1 else None
    check_shared_workloads(arms, args.suite_list)
    if args.parallel:
        check_parallel(arms)
    args.arm_count = len(arms.run_arms)
    if args.resume:
        run_dir = resume_run(args, arms)
    admit(arms, args.suite_list, not args.no_vllm_check, strict_run(args.strict))
    check_pytest_args(args.pytest_args)  # before the run directory: a refused option leaves no empty run behind
    return run_dir, arms
