"""Command line: plan, qualify, report, arms, make-tiny-model.

A qualification is a pipeline of named steps:
  load_arms -> check_arms (preflight + vLLM's parser) -> run_suites (pytest) -> render_run (harness.report.render).
HarnessErrors are caught once here: one readable message, exit code from the error.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from harness.config.arms import Arm, known_arms, load_arm
from harness.config.errors import HarnessError
from harness.config.paths import REPO_ROOT, REPORTS_DIR, gsm8k_dir, run_id_now, server_python
from harness.config.thresholds import load_gates
from harness.config.workloads import (
    SUITE_WORKLOADS,
    WORKLOAD_KINDS,
    Gsm8kWorkload,
    load_workload,
    workload_for,
)
from harness.measure.gsm8k import check_data
from harness.plan.nodes import Plan, render_plan
from harness.plan.preflight import Verdict, check_workload_fits
from harness.plan.redact import redact_argv, redact_arm_dump
from harness.plan.vllm_args import check_with_vllm
from harness.records.results import locate_results
from harness.records.runinfo import finish_run_info, read_run_info, start_info, workload_dumps, write_run_info
from harness.report.render import Rendered, annotation, render_run
from harness.report.screenshot import take_screenshot
from harness.serve.launch import plan_for, preflight_error
from harness.serve.process import stop_all

SUITES_DIR = REPO_ROOT / "suites"


def load_arms(name: str, reference: str | None, overrides: list[str]) -> tuple[Arm, Arm | None]:
    arm = load_arm(name, overrides)
    ref_name = reference or arm.reference
    return arm, (load_arm(ref_name) if ref_name and ref_name != name else None)


def workload_verdicts(candidate: Arm, arm: Arm, suites: str | None) -> list[Verdict]:
    """Per suite the run will execute: its workload fits the arm's max_model_len; its data files are sound."""
    chosen = {SUITE_WORKLOADS[s] for s in SUITE_WORKLOADS if not suites or s in suites.split(",")}
    verdicts = []
    for key in sorted(chosen):
        w = load_workload(workload_for(candidate, key), kind=WORKLOAD_KINDS[key])
        if isinstance(w, Gsm8kWorkload):
            verdicts.append(Verdict("gsm8k_data", True, check_data()))  # raises ConfigError on bad data
        else:
            verdicts.append(check_workload_fits(w.name, w.max_len, arm.name, arm.model.max_model_len))
    return verdicts


def check_arm(arm: Arm, vllm_check: bool = True, more: list[Verdict] = ()) -> tuple[Plan, list[Verdict]]:
    """Preflight and (where vLLM is importable) vLLM's own parser; raises on a violation."""
    plan = plan_for(arm)
    extra = list(more) + ([check_with_vllm(plan.nodes, arm.launcher.python or server_python())] if vllm_check else [])
    if not plan.ok or not all(v.ok for v in extra):
        failed = Plan(plan.arm, plan.nodes, (*plan.verdicts, *extra))
        raise preflight_error(failed)
    return plan, extra


def cmd_plan(args: argparse.Namespace) -> int:
    arm = load_arm(args.arm, args.set)
    plan = plan_for(arm)
    extra = [] if args.no_vllm_check else [check_with_vllm(plan.nodes, arm.launcher.python or server_python())]
    print(render_plan(plan, extra))
    print("\nport: chosen free at launch unless server.port is set")
    ok = plan.ok and all(v.ok for v in extra)
    if not ok:
        print(f"\narm {arm.name!r} fails preflight: nothing would be started", file=sys.stderr)
    return 0 if ok else 2


def all_suites() -> list[str]:
    return sorted(p.stem.removeprefix("test_") for p in SUITES_DIR.glob("test_*.py"))


def per_arm_suites(suites: list[str]) -> list[str]:
    """Suites whose tests run once per arm (they take the plugin's `served_arm`); the rest run for the candidate."""
    files = {s: SUITES_DIR / f"test_{s}.py" for s in suites}
    return [s for s, f in files.items() if f.is_file() and "served_arm" in f.read_text()]


def record_run_start(run_dir: Path, arms: list[Arm], argv: list[str], suites: list[str] | None = None) -> None:
    """run.json at the start: harness version, commit, host, argv, suites, the candidate's workloads and gate
    thresholds (the report recomputes the gates with these), the arms (candidate first), secrets redacted."""
    suites = suites if suites is not None else all_suites()
    info = start_info({a.name: redact_arm_dump(a.model_dump(mode="json")) for a in arms}, redact_argv(argv), suites,
                      workload_dumps(arms[0]) if arms else {})
    info["per_arm_suites"] = per_arm_suites(suites)
    if arms:
        info["gates"] = load_gates(arms[0].name).model_dump(mode="json")
    write_run_info(run_dir, info)


def write_annotation(run_dir: Path, info: dict, rendered: Rendered) -> Path:
    arms = list(info.get("arms", {})) or ["unknown arm"]
    path = run_dir / "annotation.md"
    path.write_text(annotation(arms[0], arms[1] if len(arms) > 1 else None, rendered.exit_code, rendered.markdown,
                               rendered.regressions, rendered.html_path))
    return path


TERMINATED: list[int] = []


def _raise_interrupt(signum, frame):
    # Turn SIGTERM into KeyboardInterrupt so pytest tears its fixtures down (servers stop).
    TERMINATED.append(signum)
    raise KeyboardInterrupt(f"signal {signum}")


def run_suites(run_dir: Path, args: argparse.Namespace) -> int:
    import pytest

    targets = [str(SUITES_DIR / f"test_{s}.py") for s in args.suites.split(",")] if args.suites else [str(SUITES_DIR)]
    pytest_args = [*targets, "-p", "no:cacheprovider", "--arm", args.arm, "--run-dir", str(run_dir),
                   f"--junitxml={run_dir / 'junit.xml'}", "-o", "junit_family=xunit2", "-rfE"]
    if args.reference:
        pytest_args += ["--reference", args.reference]
    for assignment in args.set:
        pytest_args += ["--set", assignment]
    if args.refresh_reference:
        pytest_args.append("--refresh-reference")
    pytest_args += args.pytest_args
    return int(pytest.main(pytest_args))


def cmd_qualify(args: argparse.Namespace) -> int:
    arm, ref = load_arms(args.arm, args.reference, args.set)
    for a in (arm, ref):
        if a is not None:
            check_arm(a, not args.no_vllm_check, workload_verdicts(arm, a, args.suites))
    if args.baseline:
        locate_results(args.baseline)  # a wrong path fails now, not after the suites ran
    run_dir = Path(args.run_dir) if args.run_dir else REPORTS_DIR / (args.run_id or run_id_now())
    suites = args.suites.split(",") if args.suites else all_suites()
    record_run_start(run_dir, [a for a in (arm, ref) if a], sys.argv, suites)
    print(f"run {run_dir.name}: {arm.name}" + (f" vs reference {ref.name}" if ref else "") + f" -> {run_dir}")
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        code = run_suites(run_dir, args)
    finally:
        stop_all()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    code = 128 + TERMINATED[0] if TERMINATED else code
    info = finish_run_info(run_dir, code, args.baseline)
    rendered = render_run(run_dir, args.baseline, code)
    if rendered.exit_code != code:  # a baseline regression fails the run
        info = finish_run_info(run_dir, rendered.exit_code, args.baseline, pytest_exit_code=code)
    note = write_annotation(run_dir, info, rendered)
    print("\n" + rendered.markdown)
    print(f"results: {run_dir / 'results.jsonl'}\njunit:   {run_dir / 'junit.xml'}\n"
          f"report:  {rendered.html_path}\nbuildkite annotation: {note}")
    return rendered.exit_code


def cmd_report(args: argparse.Namespace) -> int:
    run_dir = Path(args.run)
    if not run_dir.is_dir():
        run_dir = REPORTS_DIR / args.run
    if not run_dir.is_dir():
        raise HarnessError(f"no run directory {args.run!r} (looked in . and {REPORTS_DIR})")
    info, _ = read_run_info(run_dir)  # a missing or broken run.json is listed among the report's problems
    rendered = render_run(run_dir, args.baseline)
    note = write_annotation(run_dir, info, rendered)
    print(rendered.markdown)
    print(f"report: {rendered.html_path}\nbuildkite annotation: {note}")
    if args.screenshot:
        print(f"screenshot: {take_screenshot(rendered.html_path, run_dir / 'report.png')}")
    return 1 if rendered.regressions else 0


def cmd_arms(args: argparse.Namespace) -> int:
    for name in known_arms():
        print(name)
    return 0


def cmd_make_tiny_model(args: argparse.Namespace) -> int:
    train = Path(args.gsm8k_train) if args.gsm8k_train else gsm8k_dir() / "train.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.call([server_python(), "-m", "harness.tinymodel", "--out", args.out,
                            "--gsm8k-train", str(train), "--arch", args.arch, "--device", args.device], env=env)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description="DCP qualification harness for vLLM")
    sub = parser.add_subparsers(dest="command", required=True)

    def arm_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--arm", required=True, help="arm name (configs/arms/<name>.yaml)")
        p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE", help="override an arm field")
        p.add_argument("--no-vllm-check", action="store_true", help="skip parsing the argv with vLLM's parser")

    p = sub.add_parser("plan", help="print each node's argv, environment and preflight verdicts")
    arm_options(p)
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("qualify", help="run the suites for an arm against its reference")
    arm_options(p)
    p.add_argument("--reference", help="reference arm (default: the arm's `reference:`)")
    p.add_argument("--run-id", help="name of the run directory under reports/")
    p.add_argument("--run-dir", help="run directory (overrides --run-id)")
    p.add_argument("--suites", help="comma-separated suites, e.g. kv_capacity (default: all)")
    p.add_argument("--refresh-reference", action="store_true",
                   help="capture the reference arm's outputs anew instead of reusing reports/references/")
    p.add_argument("--baseline", help="earlier run (directory, run id or results.jsonl): delta columns, and a "
                   "regression beyond configs/gates.yaml `baseline:` fails the run")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments after --")
    p.set_defaults(func=cmd_qualify)

    p = sub.add_parser("report", help="render a finished run: tables, report.html, annotation.md")
    p.add_argument("--run", required=True, help="run id or run directory")
    p.add_argument("--baseline", help="earlier run (directory, run id or results.jsonl) to diff against; "
                   "exit code 1 on a regression")
    p.add_argument("--screenshot", action="store_true", help="also write <run-dir>/report.png (headless Chromium)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("arms", help="list the arms in configs/arms")
    p.set_defaults(func=cmd_arms)

    p = sub.add_parser("make-tiny-model", help="generate the deterministic tiny model (server environment)")
    p.add_argument("--out", default=str(REPO_ROOT / "models" / "tiny-llama"))
    p.add_argument("--gsm8k-train", help="GSM8K train.jsonl (default $HARNESS_GSM8K_DIR/train.jsonl)")
    p.add_argument("--arch", choices=["llama", "deepseek_v3"], default="llama",
                   help="llama: the CPU pair's model; deepseek_v3: the MLA model of the GPU arms (gpu-mla-ref.yaml)")
    p.add_argument("--device", default="cpu", help="where to train: cpu, or cuda on a GPU machine")
    p.set_defaults(func=cmd_make_tiny_model)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        stop_all()
        print("interrupted: servers stopped", file=sys.stderr)
        return 130
