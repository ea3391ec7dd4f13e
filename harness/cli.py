"""Command line: argparse and dispatch. Each command is one call into the package that does it (qualify: the
pipeline in harness.qualify.pipeline; plan and report: harness.qualify). HarnessErrors are caught once here: one
readable message, exit code from the error."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from harness.config.errors import ConfigError, HarnessError
from harness.config.numbers import seed, whole_number
from harness.config.paths import REPO_ROOT, gsm8k_dir, server_python
from harness.history.command import add_parser as add_history_parser
from harness.qualify.interrupts import exit_with, sigint_interrupts

if TYPE_CHECKING:
    from harness.admission.request import QualifyRequest

# Each command imports the package that does it when it runs: `history`, `report`, `arms` and `pipeline` start
# without qualify's and calibrate's imports.


def cmd_qualify(args: argparse.Namespace) -> int:
    """The Namespace ends here: qualify's steps take and return frozen values (harness/qualify/pipeline.py)."""
    from harness.admission.request import QualifyRequest
    from harness.qualify.pipeline import qualify

    if args.calibration_repeat is not None:
        raise ConfigError(f"qualify --calibration-repeat {args.calibration_repeat}: refused: a calibration repeat is "
                          "made only by `python -m harness calibrate --arm ARM` (it judges its repeats against the "
                          "current calibration and keeps them out of the nightly history); run qualify without it")
    return qualify(QualifyRequest(
        arm=args.arm, arms=args.arms, reference=args.reference, run_id=args.run_id, run_dir=args.run_dir,
        suites=args.suites, parallel=args.parallel, resume=args.resume, refresh_reference=args.refresh_reference,
        baseline=args.baseline, baseline_build=args.baseline_build, keep_outputs=args.keep_outputs,
        order_seed=args.order_seed, length_seed=args.length_seed, overrides=tuple(args.set),
        vllm_check=not args.no_vllm_check, strict=args.strict, pytest_args=tuple(args.pytest_args),
        argv=tuple(sys.argv)))


def cmd_plan(args: argparse.Namespace) -> int:
    from harness.qualify.plan import plan_arms

    return plan_arms(args.arm, args.arms, args.set, args.strict, not args.no_vllm_check)


def cmd_report(args: argparse.Namespace) -> int:
    from harness.qualify.render import report

    return report(args.run, args.baseline, args.exit_code, args.screenshot)


def cmd_accept_floor(args: argparse.Namespace) -> int:
    from harness.admission.rundir import find_run_dir
    from harness.refcheck.store.accept_floor import accept_floor

    accept_floor(find_run_dir(args.run, "accept-floor"), args.run, args.arm)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """K repeats, each a QualifyRequest run as a `qualify` in a fresh interpreter (servers started anew), then the
    calibration."""
    from harness.admission.rundir import find_run_dir
    from harness.calibrate.command import store_calibration
    from harness.config.arms import load_arm, overrides_for
    from harness.qualify.calibrating import CalibrateRequest, calibrate

    # a wrong arm: one message, no repeat run
    candidate = load_arm(args.arm, overrides_for(args.arm, args.set, candidate=True))
    if args.from_runs:
        return store_calibration(args.arm, args.id or f"calibrate-{args.arm}-from-runs",
                                 [find_run_dir(r, "calibrate --from-runs") for r in args.from_runs], trust=args.trust,
                                 candidate=candidate)
    suites = tuple(s.strip() for s in args.suites.split(",")) if args.suites is not None else None
    return calibrate(CalibrateRequest(
        arm=args.arm, repeats=args.repeats, suites=suites, ident=args.id, trust=args.trust, reference=args.reference,
        overrides=tuple(args.set), vllm_check=not args.no_vllm_check, strict=args.strict, argv=tuple(sys.argv)),
        qualify_in_fresh_process, candidate)


def qualify_in_fresh_process(request: QualifyRequest, env: dict[str, str]) -> int:
    """A calibration repeat: `qualify` of the request in a new interpreter (spawned: the request is handed over as a
    value, no command line), with `env` added to its environment; its exit code."""
    process = multiprocessing.get_context("spawn").Process(target=qualify_here, args=(request, env))
    process.start()
    process.join()
    return process.exitcode


def qualify_here(request: QualifyRequest, env: dict[str, str]) -> NoReturn:
    """The spawned interpreter's whole life, as `python -m harness qualify` would live it."""
    from harness.qualify.pipeline import qualify

    sigint_interrupts()
    os.environ.update(env)
    exit_with(answered(lambda: qualify(request)))


def cmd_pipeline(args: argparse.Namespace) -> int:
    """A Buildkite pipeline (YAML on stdout, or --out) with one step per arm group; every arm validated first."""
    from harness.nightly.emit import pipeline_yaml

    text = pipeline_yaml(args.arms, args.nightly, args.queue, args.cpu_queue, args.parallel, args.history,
                         args.history_reset)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text, end="")
    return 0


def cmd_arms(args: argparse.Namespace) -> int:
    from harness.config.arms import known_arms

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
    p.add_argument("--keep-outputs", action="store_true", help="store the candidate's outputs in the run "
                   "(build_outputs suite): a passed run signs its build off as a later --baseline-build")
    p.add_argument("--baseline-build", nargs="?", const="last", metavar="RUN",
                   help="compare the candidate build with the arm's last signed-off build (or run RUN): its stored "
                   "outputs judged as a reference check, the metric gates diffed as --baseline; outputs kept too")
    p.add_argument("--order-seed", type=seed(0), default=0, metavar="N",
                   help="send the reference checks' prompts in another batch composition and arrival order (0: the "
                   "canonical order); recorded in run.json, so a failure is reproducible")
    p.add_argument("--length-seed", type=seed(1), metavar="N",
                   help="the seed of the long_context sweep's jittered lengths (default: a new one each run, recorded "
                   "in run.json as length_seed; give it to check the same lengths again)")
    # refused (cmd_qualify): a repeat's marker comes from `calibrate` alone, in the QualifyRequest it builds
    p.add_argument("--calibration-repeat", metavar="ID:K/N", help=argparse.SUPPRESS)
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments after --")
    p.set_defaults(func=cmd_qualify)

    p = sub.add_parser("report", help="render a finished run: tables, report.html, annotation.md")
    p.add_argument("--run", required=True, help="run id or run directory")
    p.add_argument("--baseline", help="earlier run (directory, run id or results.jsonl) to diff against; "
                   "exit code 1 on a regression")
    p.add_argument("--screenshot", action="store_true", help="also write <run-dir>/report.png (headless Chromium)")
    p.add_argument("--exit-code", type=int, help="pytest's exit code of the run: qualify's own finishing step (run in "
                   "a fresh process): the run is judged, run.json's end (time, device, verdict) written, then "
                   "rendered; the exit code is then the run's verdict")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("accept-floor", help="store a passing run's teacher-forced drift as its pair's known-good "
                       "floor (later runs are paired against it)")
    p.add_argument("--run", required=True, help="run id or run directory")
    p.add_argument("--arm", help="the candidate arm, where the run has several")
    p.set_defaults(func=cmd_accept_floor)

    p = sub.add_parser("calibrate", help="run an arm's output checks K times on a good build (other batch "
                       "compositions, a fresh server each time) and store each check's limits and floor, derived from "
                       "the clean spread; later runs of the arm are judged by them")
    arm_options(p)
    p.add_argument("--reference", help="reference arm (default: the arm's `reference:`)")
    p.add_argument("--repeats", type=whole_number(2), metavar="K",
                   help="clean repeats (default: the arm's gates.yaml calibration.min_repeats, at least 3; fewer than "
                   "that minimum is refused)")
    p.add_argument("--suites", help="the suites to calibrate (default: every default suite with output checks: "
                   "long_prefix, long_context, prefix_reuse, graph_replay, teacher_forcing)")
    p.add_argument("--id", help="the calibration's name (default calibrate-<arm>-<time>); repeats run in "
                   "reports/<id>-r<k>, the table lands in reports/<id>/")
    p.add_argument("--from-runs", nargs="+", metavar="RUN", help="derive from these finished repeats (run ids or "
                   "directories, e.g. copied from a GPU machine) instead of running any: at least the arm's minimum "
                   "K distinct runs of one build; stored in this machine's reference store")
    p.add_argument("--trust", metavar="REASON", help="store the calibration although its repeats failed against the "
                   "current calibration (gates.yaml for an arm's first) or a limit moved more than "
                   "calibration.max_move_factor: REASON is kept in the calibration and the history and printed on "
                   "every line it judges (\"trusted by hand: REASON\"); interrupted, refused or incomplete repeats "
                   "and a ceiling are refused all the same")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("pipeline", help="emit a Buildkite pipeline (YAML): one step per arm group")
    p.add_argument("--arms", required=True, help="comma-separated candidate arms; each runs with its reference")
    p.add_argument("--nightly", action="store_true", help="run ids nightly-<build>-<arm>, baseline from the previous "
                   "nightly build's artifacts")
    p.add_argument("--queue", default="gpu", help="Buildkite agent queue of GPU hosts (agents also get gpus=<N>)")
    p.add_argument("--cpu-queue", default="cpu", help="agent queue for CPU arms")
    p.add_argument("--parallel", action="store_true", help="a group's arms side by side on disjoint GPUs: the step "
                   "asks for the sum of their GPUs")
    p.add_argument("--history", help="nightly: a history store every agent reaches (shared filesystem) for all "
                   "nights; default: each group's reports/history-<group>.sqlite, carried from night to night as the "
                   "builds' artifact")
    p.add_argument("--history-reset", metavar="REASON", help="nightly, for one build: each step starts its group's "
                   "history anew (the first night, a lost store) instead of failing when the previous store cannot be "
                   "fetched; REASON is shown in the annotation")
    p.add_argument("--out", help="write the YAML here instead of stdout")
    p.set_defaults(func=cmd_pipeline)

    add_history_parser(sub)

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
    return answered(lambda: args.func(args))


def answered(command: Callable[[], int]) -> int:
    """The command's exit code; a HarnessError as one readable message and its code, a Ctrl-C as servers stopped."""
    try:
        return command()
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        from harness.serve.process import stop_all

        stop_all()
        print("interrupted (SIGINT): servers stopped", file=sys.stderr)
        return 128 + signal.SIGINT
