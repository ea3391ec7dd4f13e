"""`qualify`: one run as a chain of named steps, each the previous one's output in:
admit_run -> record_run -> run_suites (interrupts raised) -> suites_code -> judge, record the end in run.json (once)
and render (a fresh interpreter: harness/qualify/render.py).
Interrupts: during the suites SIGINT/SIGTERM stop them (servers torn down, exit 128 + signal); after them a signal is
only noted and the run is finished and rendered all the same (harness/qualify/interrupts.py)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from harness.admission.arms import RunArms
from harness.admission.verdicts import strict_run
from harness.console import progress
from harness.qualify import interrupts
from harness.qualify.admitting import admit_run
from harness.qualify.interrupts import SIGNAL_NAMES, interrupts_noted, interrupts_raised
from harness.qualify.record import record_run
from harness.qualify.render import render_in_fresh_process
from harness.qualify.suites import run_suites
from harness.records.attempts import resumed_exit_code
from harness.records.results import read_results
from harness.serve.process import stop_all

log = logging.getLogger(__name__)


def qualify(args: argparse.Namespace) -> int:
    run_dir, arms = admit_run(args)
    record_run(run_dir, arms, args)
    log_file = announce(run_dir, arms, args)
    with interrupts_noted() as late:  # once the suites end, a signal no longer cuts anything short
        code = run_suites_interruptibly(run_dir, args)
        code = suites_code(run_dir, code, args)
        code = render_in_fresh_process(run_dir, args.baseline, code)
    if late and code < 128:  # the report was finished all the same
        code = 128 + late[0]
        print(f"interrupted ({SIGNAL_NAMES[late[0]]}) while the report was written; it was finished", file=sys.stderr)
    print(f"results: {run_dir / 'results.jsonl'}\njunit:   {run_dir / 'junit.xml'}\nlog:     {log_file}")
    log.info("report %s; exit code %s", run_dir / "report.html", code)
    return code


def announce(run_dir: Path, arms: RunArms, args: argparse.Namespace) -> Path:
    """harness.log started, the run named on stdout; terminal status lines where stderr is a terminal."""
    log_file = progress.start_log(run_dir)
    pairs = "; ".join(f"{p.candidate}" + (f" vs reference {p.reference}" if p.reference else "")
                      for p in arms.arm_set.pairs)
    log.info("run %s: %s; suites %s", run_dir.name, pairs, args.suite_list)
    print(f"run {run_dir.name}: {pairs} -> {run_dir}")
    if sys.stderr.isatty() and not strict_run():
        progress.enable(os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1))
    return log_file


def run_suites_interruptibly(run_dir: Path, args: argparse.Namespace) -> int:
    """pytest's exit code, or 128 + the signal that stopped the suites; every server stopped either way."""
    try:
        with interrupts_raised():
            try:
                code = run_suites(run_dir, args)
            except KeyboardInterrupt:  # outside pytest's own handling (collection, start-up)
                code = interrupts.taken_interrupt()
    finally:
        stop_all()
        progress.disable()
    return interrupts.interrupted_code(code)


def suites_code(run_dir: Path, code: int, args: argparse.Namespace) -> int:
    """The suites' exit code (for a resumed run the verdict of every attempt, not only of the tests this one ran),
    which the judge step turns into the run's verdict and records, with the end, in run.json."""
    if args.resume:
        code = resumed_exit_code(code, read_results(run_dir / "results.jsonl")[0])
    if code >= 128:
        print(f"\ninterrupted ({SIGNAL_NAMES.get(code - 128, code - 128)}): servers stopped; every record is "
              "kept and the report is rendered", file=sys.stderr)
    log.info("suites finished: exit code %s", code)
    return code
