"""`qualify`: one run as a chain of named steps, each taking the previous one's value and returning its own:

    QualifyRequest -> admit_run -> AdmittedRun -> record_run -> RunManifest (run.json, for the report and resume)
    -> started_run -> StartedRun (these three harness/admission's: a by-hand pytest takes them too; handed to pytest
    as a value) -> run_suites (interrupts raised) -> SuiteOutcome ->
    judge, record the end in run.json (once) and render: the run's verdict (a fresh interpreter:
    harness/qualify/finish.py, then harness/qualify/render.py).

Interrupts: during the suites SIGINT/SIGTERM stop them (servers torn down, exit 128 + signal); after them a signal is
only noted and the run is finished and rendered all the same (harness/qualify/interrupts.py)."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.admission.admitting import admit_run
from harness.admission.record import record_run, started_run
from harness.admission.request import AdmittedRun, QualifyRequest
from harness.console import progress
from harness.qualify import interrupts
from harness.qualify.interrupts import SIGNAL_NAMES, interrupts_noted, interrupts_raised
from harness.qualify.render import render_in_fresh_process
from harness.qualify.suites import run_suites
from harness.records.attempts import resumed_exit_code
from harness.records.manifest import RunManifest
from harness.records.results import read_results
from harness.serve.process import stop_all

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SuiteOutcome:
    """What the suites left: their exit code (for a resumed run the verdict of every attempt; 128 + a signal that
    stopped them), which the judge step turns into the run's verdict."""
    run: AdmittedRun
    exit_code: int

    @property
    def interrupted(self) -> bool:
        return self.exit_code >= 128


def qualify(request: QualifyRequest) -> int:
    run = admit_run(request)
    manifest = record_run(run)
    log_file = announce(run, manifest)
    with interrupts_noted() as late:  # once the suites end, a signal no longer cuts anything short
        outcome = suites_outcome(run, run_suites_interruptibly(run, manifest))
        code = render_in_fresh_process(run.run_dir, run.baseline, outcome.exit_code)
    if late and code < 128:  # the report was finished all the same
        code = 128 + late[0]
        print(f"interrupted ({SIGNAL_NAMES[late[0]]}) while the report was written; it was finished", file=sys.stderr)
    print(f"results: {run.run_dir / 'results.jsonl'}\njunit:   {run.run_dir / 'junit.xml'}\nlog:     {log_file}")
    log.info("report %s; exit code %s", run.run_dir / "report.html", code)
    return code


def announce(run: AdmittedRun, manifest: RunManifest) -> Path:
    """harness.log started, the run named on stdout (its seeds in the log: a failure is reproduced with them);
    terminal status lines where stderr is a terminal."""
    log_file = progress.start_log(run.run_dir)
    pairs = "; ".join(f"{p.candidate}" + (f" vs reference {p.reference}" if p.reference else "")
                      for p in run.arms.arm_set.pairs)
    log.info("run %s: %s; suites %s; order seed %s, length seed %s", run.run_dir.name, pairs, list(run.suites),
             manifest.order_seed or 0, manifest.length_seed)
    print(f"run {run.run_dir.name}: {pairs} -> {run.run_dir}")
    if sys.stderr.isatty() and not run.strict:
        progress.enable(os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1))
    return log_file


def run_suites_interruptibly(run: AdmittedRun, manifest: RunManifest) -> int:
    """pytest's exit code, or 128 + the signal that stopped the suites; every server stopped either way."""
    try:
        with interrupts_raised():
            try:
                code = run_suites(started_run(run, manifest), *run.request.pytest_args)
            except KeyboardInterrupt:  # outside pytest's own handling (collection, start-up)
                code = interrupts.taken_interrupt()
    finally:
        stop_all()
        progress.disable()
    return interrupts.interrupted_code(code)


def suites_outcome(run: AdmittedRun, code: int) -> SuiteOutcome:
    """The suites' exit code as the judge step takes it: for a resumed run the verdict of every attempt, not only of
    the tests this one ran."""
    if run.request.resume:
        code = resumed_exit_code(code, read_results(run.run_dir / "results.jsonl")[0])
    outcome = SuiteOutcome(run, code)
    if outcome.interrupted:
        print(f"\ninterrupted ({SIGNAL_NAMES.get(code - 128, code - 128)}): servers stopped; every record is "
              "kept and the report is rendered", file=sys.stderr)
    log.info("suites finished: exit code %s", code)
    return outcome
