"""Command line: plan, qualify, report, pipeline, arms, make-tiny-model.

A qualification is a pipeline of named steps:
  parse_suites -> named_candidates -> choose_run_dir -> load_run_arms (candidates and references: harness.config.armset)
  -> admit (shared workloads, parallel GPUs, preflight, workloads, resources, vLLM's parser; all in harness.admission)
  -> check_baseline -> record_run_start -> run_suites (pytest) -> render_run (harness.report).
HarnessErrors are caught once here: one readable message, exit code from the error.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from harness.admission import (
    LOCAL_FILE_RULES,
    SUITES_DIR,
    admit,
    arm_verdicts,
    check_baseline,
    check_parallel,
    check_resume,
    check_shared_workloads,
    choose_run_dir,
    default_suites,
    env_verdict,
    load_run_arms,
    machine_verdicts,
    method_verdicts,
    parse_suites,
    parser_verdict,
    resume_run_dir,
    strict_run,
    workload_verdicts,
)
from harness.config.arms import Arm, defining_file, known_arms, load_arm
from harness.config.armset import ArmSet, Pair, expand_arm_set, parse_arm_names
from harness.config.errors import ConfigError, HarnessError
from harness.config.paths import REPO_ROOT, REPORTS_DIR, gsm8k_dir, server_python
from harness.config.thresholds import for_run, load_gates
from harness.console import progress
from harness.interrupts import InterruptRelay
from harness.plan.nodes import render_plan
from harness.plan.preflight import Verdict, violations
from harness.plan.redact import redact_argv, redact_arm_dump
from harness.records.attempts import resumed_exit_code
from harness.records.results import read_results
from harness.records.runinfo import (
    finish_run_info,
    now,
    pairs_of,
    read_run_info,
    start_info,
    workload_dumps,
    write_run_info,
)
from harness.records.schema import ReferenceCheckRecord
from harness.refcheck.floor_store import save_floor
from harness.serve.process import stop_all

if TYPE_CHECKING:
    from harness.report.render import Rendered

log = logging.getLogger(__name__)


def cmd_plan(args: argparse.Namespace) -> int:
    """Per-node argv + environment + preflight verdicts of one arm or several (--arms; their references checked too,
    a shared one once); this machine's resources are shown but do not decide the exit code: a GPU arm is planned on
    a laptop. The arms that fail are listed in one message at the end."""
    if bool(args.arm) == bool(args.arms):
        raise ConfigError("plan: name one arm (--arm NAME) or several (--arms a,b); `python -m harness arms` lists "
                          "them")
    arms = load_run_arms([args.arm] if args.arm else parse_arm_names(args.arms), None, args.set)
    check_shared_workloads(arms, default_suites())  # as a run of the default suites would (`qualify` without --suites)
    failed = {}
    for i, candidate in enumerate(arms.candidates):
        if len(arms.candidates) > 1:
            print(("\n" if i else "") + f"=== {candidate.name} ({i + 1} of {len(arms.candidates)}) ===")
        failed[candidate.name] = plan_one(candidate, args)
    others = [a for a in arms.all if a.name not in arms.arm_set.candidates]
    named = [f"{a.name} ({'reference' if a.name in arms.arm_set.arms else 'eager variant'})" for a in others]
    for arm in others:  # they run the candidate's workloads: each must fit them, as `qualify` checks
        failed[arm.name] = violations(plan_workloads(arms.owner(arm), arm)[0])
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


def plan_one(candidate: Arm, args: argparse.Namespace) -> list[Verdict]:
    """Print one candidate's plan; its failed verdicts."""
    strict = strict_run(args.strict)
    plan, verdicts = arm_verdicts(candidate, candidate, None, resources=False)
    fits, local_files = plan_workloads(candidate, candidate)
    verdicts += fits
    verdicts.append(env_verdict(candidate, plan))
    verdicts += method_verdicts(candidate, strict)
    verdicts.append(parser_verdict(candidate, plan, not args.no_vllm_check, strict, bool(violations(verdicts))))
    print(render_plan(plan, verdicts[len(plan.verdicts):]))
    print("\nthis machine (checked again by `qualify` before anything starts):")
    for v in [*local_files, *machine_verdicts(candidate)]:
        print(f"  [{v.label}] {v.rule}: {v.detail}")
    return violations(verdicts)


def per_arm_suites(suites: list[str]) -> list[str]:
    """Suites whose tests run once per arm (they take the plugin's `served_arm`); the rest run for the candidate."""
    files = {s: SUITES_DIR / f"test_{s}.py" for s in suites}
    return [s for s, f in files.items() if f.is_file() and "served_arm" in f.read_text()]


def record_run_start(run_dir: Path, arms: list[Arm], argv: list[str], suites: list[str] | None = None,
                     arm_set: ArmSet | None = None, strict: bool = False) -> None:
    """run.json at the start: harness version, commit, host, argv, suites, the first candidate's workloads and gate
    thresholds, the pairs (each candidate with its reference, gate thresholds and workloads: the report recomputes the
    gates and finds missing levels with these) and the arms (candidates first), secrets redacted. Without `arm_set`
    the first arm is the candidate of the second."""
    suites = suites if suites is not None else default_suites()
    info = start_info({a.name: redact_arm_dump(a.model_dump(mode="json")) for a in arms}, redact_argv(argv), suites,
                      workload_dumps(arms[0]) if arms else {})
    info["per_arm_suites"] = per_arm_suites(suites)
    if arm_set is None and arms:
        arm_set = ArmSet((Pair(arms[0].name, arms[1].name if len(arms) > 1 else None),))
    if arm_set is not None:
        info["strict"] = strict  # the gates below are resolved for it (thresholds.for_run)
        info["gates"] = for_run(load_gates(arm_set.candidates[0]), strict).model_dump(mode="json")
        by_name = {a.name: a for a in arms}
        info["pairs"] = [{"candidate": p.candidate, "reference": p.reference,
                          "gates": for_run(load_gates(p.candidate), strict).model_dump(mode="json"),
                          "workloads": workload_dumps(by_name[p.candidate]) if p.candidate in by_name else None}
                         for p in arm_set.pairs]
    write_run_info(run_dir, info)


def note_resume(run_dir: Path, argv: list[str]) -> None:
    """run.json keeps its first start; each resume adds when and how (the end time and exit code are the last)."""
    info, _ = read_run_info(run_dir)
    info.setdefault("resumed", []).append({"started": now(), "argv": redact_argv(argv),
                                           "exit_code_before": info.get("exit_code")})
    write_run_info(run_dir, info)


def render_run(run_dir: Path, baseline: str | None = None, exit_code: int | None = None) -> Rendered:
    # Imported here: the report stack (pandas, scipy, matplotlib) takes seconds to import, and a refused command
    # should answer at once.
    from harness.report.render import render_run as render

    return render(run_dir, baseline, exit_code)


def write_annotation(run_dir: Path, info: dict, rendered: Rendered) -> Path:
    from harness.report.render import annotation

    path = run_dir / "annotation.md"
    pairs = [(p["candidate"], p["reference"]) for p in pairs_of(info)] or [("unknown arm", None)]
    path.write_text(annotation(pairs, rendered.exit_code, rendered.markdown, rendered.regressions, rendered.html_path))
    return path


TERMINATED: list[int] = []
SIGNAL_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


RELAY = InterruptRelay()


def _raise_interrupt(signum, frame):
    # SIGINT (Ctrl-C) and SIGTERM both become KeyboardInterrupt, so pytest tears its fixtures down (servers stop);
    # the signal is remembered for the exit code (130, 143): pytest's own code for an interrupt is 2. The relay
    # raises it again should this KeyboardInterrupt be lost (harness/interrupts.py).
    TERMINATED.append(signum)
    RELAY.noted(signum)
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def interrupts_noted() -> Iterator[list[int]]:
    """SIGINT/SIGTERM are noted (the list it yields), not raised, inside: writing the report is never cut short.
    A KeyboardInterrupt inside an import leaves the module half-initialised (CI saw `partially initialized module
    'pandas'` and no report after a Ctrl-C), and the report stack imports for seconds."""
    noted: list[int] = []
    old = {sig: signal.signal(sig, lambda signum, frame: noted.append(signum)) for sig in SIGNAL_NAMES}
    try:
        yield noted
    finally:
        # Once interrupted, the process is on its way out with 128 + signal: a further press (a user's second or
        # third Ctrl-C) stays noted up to the exit, else it lands between here and exit and kills it (CI: -2).
        if not noted:
            for sig, handler in old.items():
                signal.signal(sig, handler)


def render_in_fresh_process(run_dir: Path, baseline: str | None, code: int) -> int:
    """`harness report --exit-code CODE` in a new interpreter: the suites' process may hold modules an interrupt cut
    short mid-import. It runs in a session of its own, so a terminal's Ctrl-C reaches only this process (which notes
    it); its exit code is the run's verdict."""
    argv = [sys.executable, "-m", "harness", "report", "--run", str(run_dir.resolve()), "--exit-code", str(code)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    sys.stdout.flush()
    sys.stderr.flush()
    return subprocess.run([*argv, *(["--baseline", baseline] if baseline else [])], env=env,
                          start_new_session=True).returncode


def run_suites(run_dir: Path, args: argparse.Namespace) -> int:
    import pytest

    targets = [str(SUITES_DIR / f"test_{s}.py") for s in args.suite_list]  # the default leaves NAMED_ONLY out
    named = ["--arm", args.names[0]] if len(args.names) == 1 else ["--arms", ",".join(args.names)]
    pytest_args = [*targets, "-p", "no:cacheprovider", *named, "--run-dir", str(run_dir),
                   f"--junitxml={run_dir / 'junit.xml'}", "-o", "junit_family=xunit2", "-rfE"]
    if args.reference:
        pytest_args += ["--reference", args.reference]
    for assignment in args.set:
        pytest_args += ["--set", assignment]
    if args.refresh_reference:
        pytest_args.append("--refresh-reference")
    if args.resume:
        pytest_args.append("--resume")
    if args.parallel:  # one xdist worker per arm of the run: candidates and references side by side
        pytest_args += ["-n", str(args.arm_count), "--parallel-arms"]
    pytest_args += args.pytest_args
    return int(pytest.main(pytest_args, plugins=[RELAY]))


def check_pytest_args(extra: list[str]) -> None:
    """The pytest arguments after `--` are ones pytest accepts: parsed as pytest.main's first step does (plugins and
    the root conftest loaded, nothing collected or run), before the run directory exists; a ConfigError otherwise."""
    if not extra:
        return
    from _pytest.config import _prepareconfig  # pytest.main's own parse step; no public equivalent
    from _pytest.config.exceptions import UsageError

    try:
        config = _prepareconfig([str(SUITES_DIR), "-p", "no:cacheprovider", *extra])
    except UsageError as exc:
        why = next((ln.split("error: ", 1)[1] for ln in str(exc).splitlines() if "error: " in ln), str(exc))
        raise ConfigError(f"pytest arguments after --: {' '.join(extra)}: pytest refuses them ({why}); nothing was "
                          "started: drop them, or see `python -m pytest --help`") from None
    config._ensure_unconfigure()


def interrupted_code(code: int) -> int:
    """128 + the signal that stopped the run (SIGINT 130, SIGTERM 143). Without one, pytest's 'interrupted' (2) is
    not a Ctrl-C: pytest ends with it when a suite module fails to import ('Interrupted: 1 error during collection'),
    which printed 'interrupted (SIGINT)' and exit 130 before; it stays 2 (an error, reported as such)."""
    if TERMINATED:
        return 128 + TERMINATED[0]
    return code


def resume_run(args: argparse.Namespace, arms: list[Arm]) -> Path:
    """--resume: the earlier run's directory, its configuration checked against this command's; run.json gets one
    more entry under `resumed`. The suites default to the run's own."""
    run_dir = resume_run_dir(args.resume, args.run_id, args.run_dir)
    info, problems = read_run_info(run_dir)
    if problems:
        raise ConfigError(f"--resume: {problems[0]}")
    dumps = {a.name: redact_arm_dump(a.model_dump(mode="json")) for a in arms}
    args.suite_list = check_resume(run_dir, info, dumps, args.suite_list if args.suites else None)
    args.suites = ",".join(args.suite_list)
    return run_dir


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
    info, problems = read_run_info(resume_run_dir(args.resume, args.run_id, args.run_dir))
    pairs = pairs_of(info)
    if problems or not pairs:
        raise ConfigError(f"--resume {args.resume}: " + (problems[0] if problems else "its run.json names no arms")
                          + "; name the run's arms with --arm or --arms")
    if len(pairs) == 1:
        return [pairs[0]["candidate"]], pairs[0]["reference"]
    return [p["candidate"] for p in pairs], None


def cmd_qualify(args: argparse.Namespace) -> int:
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
        run_dir = resume_run(args, arms.run_arms)
    admit(arms, args.suite_list, not args.no_vllm_check, strict_run(args.strict))
    check_pytest_args(args.pytest_args)  # before the run directory: a refused option leaves no empty run behind
    if args.resume:
        note_resume(run_dir, sys.argv)
    else:
        record_run_start(run_dir, arms.run_arms, sys.argv, args.suite_list, arms.arm_set, strict_run(args.strict))
    log_file = progress.start_log(run_dir)
    pairs = "; ".join(f"{p.candidate}" + (f" vs reference {p.reference}" if p.reference else "")
                      for p in arms.arm_set.pairs)
    log.info("run %s: %s; suites %s", run_dir.name, pairs, args.suite_list)
    print(f"run {run_dir.name}: {pairs} -> {run_dir}")
    if sys.stderr.isatty() and not strict_run():
        progress.enable(os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1))
    with interrupts_noted() as late:  # once the suites end, a signal no longer cuts anything short
        noting = {sig: signal.signal(sig, _raise_interrupt) for sig in SIGNAL_NAMES}
        try:
            code = run_suites(run_dir, args)
        except KeyboardInterrupt:  # outside pytest's own handling (collection, start-up)
            if not TERMINATED:
                TERMINATED.append(signal.SIGINT)
            code = 128 + TERMINATED[0]
        finally:
            RELAY.take()
            for sig, handler in noting.items():  # first: a second Ctrl-C must not cut the servers' stop short
                signal.signal(sig, handler)
            stop_all()
            progress.disable()
        code = interrupted_code(code)
        if args.resume:  # the verdict of every attempt, not only of the tests this one ran
            code = resumed_exit_code(code, read_results(run_dir / "results.jsonl")[0])
        if code >= 128:
            print(f"\ninterrupted ({SIGNAL_NAMES.get(code - 128, code - 128)}): servers stopped; every record is "
                  "kept and the report is rendered", file=sys.stderr)
        log.info("suites finished: exit code %s", code)
        finish_run_info(run_dir, code, args.baseline)
        code = render_in_fresh_process(run_dir, args.baseline, code)
    if late and code < 128:  # the report was finished all the same
        code = 128 + late[0]
        print(f"interrupted ({SIGNAL_NAMES[late[0]]}) while the report was written; it was finished", file=sys.stderr)
    print(f"results: {run_dir / 'results.jsonl'}\njunit:   {run_dir / 'junit.xml'}\nlog:     {log_file}")
    log.info("report %s; exit code %s", run_dir / "report.html", code)
    return code


def find_run_dir(arg: str, command: str = "report") -> Path:
    """`<command> --run`: a run directory, or a run id under reports/, that holds a run (results or run.json)."""
    for path in (Path(arg), REPORTS_DIR / arg):
        if path.is_dir():
            break
    else:
        raise ConfigError(f"{command} --run {arg!r}: no run directory there (looked in . and {REPORTS_DIR})")
    results = path / "results.jsonl"
    if not results.is_file() and not (path / "run.json").is_file():
        raise ConfigError(f"{command} --run {arg!r}: {path} holds no run (no results.jsonl, no run.json)")
    if results.is_file():
        records, problems = read_results(results)
        if not records and problems:
            raise ConfigError(f"{command} --run {arg!r}: {results} has no readable record; "
                              f"first problem: {problems[0]}")
    return path


def cmd_report(args: argparse.Namespace) -> int:
    """Render a stored run. A Ctrl-C while it renders is noted, the report finished, and the exit code is 130.
    `--exit-code` is qualify's own rendering (in a fresh process): the run's code, which a baseline regression
    turns to 1 in run.json, is the exit code."""
    with interrupts_noted() as noted:
        run_dir = find_run_dir(args.run)
        if args.baseline:
            check_baseline(args.baseline)
        info, _ = read_run_info(run_dir)  # a missing or broken run.json is listed among the report's problems
        rendered = render_run(run_dir, args.baseline, args.exit_code)
        code = 1 if rendered.regressions else 0
        if args.exit_code is not None:
            code = rendered.exit_code
            if code != args.exit_code:  # a baseline regression fails the run
                info = finish_run_info(run_dir, code, args.baseline, pytest_exit_code=args.exit_code)
        note = write_annotation(run_dir, info, rendered)
        print(("\n" if args.exit_code is not None else "") + rendered.markdown)
        print(f"report: {rendered.html_path}\nbuildkite annotation: {note}")
    if noted:
        print(f"interrupted ({SIGNAL_NAMES[noted[0]]}) while the report was written; it was finished",
              file=sys.stderr)
        return 128 + noted[0]
    if args.screenshot:
        from harness.report.screenshot import take_screenshot

        print(f"screenshot: {take_screenshot(rendered.html_path, run_dir / 'report.png')}")
    return code


def cmd_accept_floor(args: argparse.Namespace) -> int:
    """Mark a run's reference checks of one arm as that pair's known-good floor; refused unless every one passed
    complete (a floor taken from a faulty run would hide the fault in every later run)."""
    run_dir = find_run_dir(args.run, "accept-floor")
    checks = [r for r in read_results(run_dir / "results.jsonl")[0] if isinstance(r, ReferenceCheckRecord)]
    arms = sorted({r.arm for r in checks if args.arm is None or r.arm == args.arm})
    if len(arms) != 1:
        raise ConfigError(f"accept-floor --run {args.run!r}: needs the reference checks of exactly one arm "
                          f"{'(' + repr(args.arm) + ')' if args.arm else '(name it with --arm)'}; "
                          f"found: {', '.join(arms) or 'none'}")
    mine = [r for r in checks if r.arm == arms[0]]
    bad = [f"{r.check}: {r.detail or r.reason}" for r in mine
           if not r.passed or r.status != "complete" or not r.floor_path or not r.comparisons_path]
    if bad:
        raise ConfigError(f"accept-floor: {arms[0]}'s reference checks in {run_dir.name} did not all pass complete "
                          f"({'; '.join(bad)}); a failing run cannot be the known-good floor")
    for r in mine:
        path = save_floor(Path(r.floor_path), r.check, Path(r.comparisons_path),
                          {"run": run_dir.name, "arm": r.arm, "reference": r.reference,
                           "reference_key": r.reference_key, "requests": r.requests})
        print(f"floor for {r.check} of {r.arm} vs {r.reference} accepted from {run_dir.name}: {path}")
    return 0


def cmd_pipeline(args: argparse.Namespace) -> int:
    """A Buildkite pipeline (YAML on stdout, or --out) with one step per arm group; every arm validated first."""
    import yaml

    from harness.nightly.pipeline import arm_groups, pipeline

    names = parse_arm_names(args.arms)
    # Structure only (no model files): the pipeline is emitted on a CI agent, the models live on the GPU hosts.
    arms = {n: load_arm(n, geometry=False) for n in names}
    for arm in list(arms.values()):
        if arm.reference and arm.reference not in arms:
            if arm.reference not in known_arms():
                raise ConfigError(f"{defining_file(arm, 'reference')}: field reference: unknown arm {arm.reference!r}")
            arms[arm.reference] = load_arm(arm.reference, geometry=False)
    arm_set = expand_arm_set(names, {n: arms[n].reference for n in names})
    text = yaml.safe_dump(pipeline(arm_groups(arm_set, arms), args.nightly, args.queue, args.cpu_queue, args.parallel),
                          sort_keys=False, width=120)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text, end="")
    return 0


def cmd_arms(args: argparse.Namespace) -> int:
    for name in known_arms():
        print(name)
    return 0


def cmd_make_tiny_model(args: argparse.Namespace) -> int:
    train = Path(args.gsm8k_train) if args.gsm8k_train else gsm8k_dir() / "train.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.call([server_python(), "-m", "harness.tinymodel", "--out", args.out,
                            "--gsm8k-train", str(train), "--arch", args.arch, "--device", args.device,
                            *(["--keep-weak-retrieval"] if args.keep_weak_retrieval else [])], env=env)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description="DCP qualification harness for vLLM")
    sub = parser.add_subparsers(dest="command", required=True)

    def arm_options(p: argparse.ArgumentParser, several: bool = False) -> None:
        if several:
            p.add_argument("--arm", help="the candidate arm (configs/arms/<name>.yaml)")
            p.add_argument("--arms", help="several candidates in one run, e.g. dcp8,dspark-dcp8: each against its own "
                           "`reference:`, a shared reference started and measured once")
        else:
            p.add_argument("--arm", required=True, help="arm name (configs/arms/<name>.yaml)")
        p.add_argument("--set", action="append", default=[], metavar="[ARM:]PATH=VALUE",
                       help="override a field of the candidate arm(s); ARM:PATH=VALUE of that arm of the run alone "
                       "(a reference too)")
        p.add_argument("--no-vllm-check", action="store_true", help="skip parsing the argv with vLLM's parser")
        p.add_argument("--strict", action="store_true", help="a check that cannot run fails (default with CI=true)")

    p = sub.add_parser("plan", help="print each node's argv, environment and preflight verdicts")
    arm_options(p, several=True)
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("qualify", help="run the suites for an arm (or several) against its reference")
    arm_options(p, several=True)
    p.add_argument("--reference", help="reference arm (default: the arm's `reference:`)")
    p.add_argument("--run-id", help="name of the run directory under reports/")
    p.add_argument("--run-dir", help="run directory (overrides --run-id)")
    p.add_argument("--suites", help="comma-separated suites, e.g. kv_capacity (default: all but ruler, which runs "
                   "when named)")
    p.add_argument("--parallel", action="store_true", help="run every arm of the run at once, one pytest-xdist "
                   "worker each; GPU servers on disjoint leased GPUs (HARNESS_GPUS or every GPU)")
    p.add_argument("--resume", metavar="RUN", help="continue an interrupted run (run id or directory): only the tests "
                   "without a recorded outcome run; the arms and suites of the run's run.json (--arm/--arms may be "
                   "left out)")
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
    p.add_argument("--exit-code", type=int, help="the run's exit code before rendering (qualify renders its run this "
                   "way, in a fresh process); the exit code is then the run's verdict")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("accept-floor", help="store a passing run's teacher-forced drift as its pair's known-good "
                       "floor (later runs are paired against it)")
    p.add_argument("--run", required=True, help="run id or run directory")
    p.add_argument("--arm", help="the candidate arm, where the run has several")
    p.set_defaults(func=cmd_accept_floor)

    p = sub.add_parser("pipeline", help="emit a Buildkite pipeline (YAML): one step per arm group")
    p.add_argument("--arms", required=True, help="comma-separated candidate arms; each runs with its reference")
    p.add_argument("--nightly", action="store_true", help="run ids nightly-<build>-<arm>, baseline from the previous "
                   "nightly build's artifacts")
    p.add_argument("--queue", default="gpu", help="Buildkite agent queue of GPU hosts (agents also get gpus=<N>)")
    p.add_argument("--cpu-queue", default="cpu", help="agent queue for CPU arms")
    p.add_argument("--parallel", action="store_true", help="a group's arms side by side on disjoint GPUs: the step "
                   "asks for the sum of their GPUs")
    p.add_argument("--out", help="write the YAML here instead of stdout")
    p.set_defaults(func=cmd_pipeline)

    p = sub.add_parser("arms", help="list the arms in configs/arms")
    p.set_defaults(func=cmd_arms)

    p = sub.add_parser("make-tiny-model", help="generate the deterministic tiny model (server environment)")
    p.add_argument("--out", default=str(REPO_ROOT / "models" / "tiny-llama"))
    p.add_argument("--gsm8k-train", help="GSM8K train.jsonl (default $HARNESS_GSM8K_DIR/train.jsonl)")
    p.add_argument("--arch", choices=["llama", "deepseek_v3", "deepseek_v3_mtp"], default="llama",
                   help="llama: the CPU pair's model; deepseek_v3: the MLA model of the GPU arms (gpu-mla-ref.yaml)")
    p.add_argument("--device", default="cpu", help="where to train: cpu, or cuda on a GPU machine")
    p.add_argument("--keep-weak-retrieval", action="store_true",
                   help="deepseek_v3: save the model without a retrieval circuit that falls short, instead of refusing")
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
        print("interrupted (SIGINT): servers stopped", file=sys.stderr)
        return 128 + signal.SIGINT
