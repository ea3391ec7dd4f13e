"""Judge a stored run: each pair's gates recomputed from its records with the thresholds run.json recorded, the
baseline diff, and the run's exit code (harness.judge.verdict). qualify judges before it records run.json's end and
renders; the report shows the same judgement."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.config.suites import BY_NAME
from harness.config.thresholds import Gates, load_gates, load_thresholds
from harness.judge.baseline import Delta, baseline_deltas
from harness.judge.gates import GateResult
from harness.judge.suite_gates import evaluate_gates, gated_suites
from harness.judge.verdict import run_exit_code
from harness.records.manifest import RunManifest, RunPair
from harness.records.results import locate_results
from harness.report.rundata import RunData, load_results


@dataclass
class Judgement:
    gates: list[GateResult]
    exit_code: int | None  # the run's verdict; None when no exit code was ever recorded
    baseline: str | None = None  # the baseline's results file, when diffed against one
    deltas: list[Delta] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)  # enforced: they fail the run
    shown_only: list[str] = field(default_factory=list)  # flagged for arms whose timing is not enforced
    problems: list[str] = field(default_factory=list)  # the baseline's unreadable lines and files


def recorded(run: RunData) -> list[RunPair]:
    return run.manifest.pairs if run.manifest else []


def recorded_exit_code(manifest: RunManifest | None) -> int | None:
    """pytest's exit code where recorded (the run's verdict may differ from it), else the run's."""
    if manifest is None:
        return None
    return manifest.pytest_exit_code if manifest.pytest_exit_code is not None else manifest.exit_code


def run_pairs(run: RunData) -> list[tuple[str, str | None]]:
    return [(p.candidate, p.reference) for p in recorded(run)] or \
        ([(run.arm_order[0], run.arm_order[1] if len(run.arm_order) > 1 else None)] if run.arm_order else [])


def recorded_pairs(run: RunData) -> list[RunPair]:
    return recorded(run) or [RunPair(candidate=c, reference=r) for c, r in run_pairs(run)]


def recorded_thresholds(run: RunData) -> dict[str, Gates]:
    """Each candidate's gate thresholds as run.json recorded them (its current configs/gates.yaml section for runs
    that did not record them): a re-rendered report judges with what the run was judged with."""
    return {p.candidate: Gates.model_validate(p.gates) if p.gates else load_gates(p.candidate)
            for p in recorded_pairs(run)}


def run_gates(run: RunData) -> list[GateResult]:
    """Each candidate-vs-reference pair's gates recomputed from the run's records, with recorded_thresholds."""
    thresholds_of = recorded_thresholds(run)
    out = []
    for pair in recorded_pairs(run):
        cand, ref = pair.candidate, pair.reference
        if not ref:
            continue
        thresholds = thresholds_of[cand]
        arms = (run.manifest.arms if run.manifest else None) or {}
        speculative = bool((arms.get(cand) or {}).get("speculative"))
        suites = [s for s in (run.manifest.suites if run.manifest else None) or gated_suites(run.records)
                  if s not in BY_NAME or BY_NAME[s].runs_for(speculative)]  # a suite its skip rule left out has no gate
        out += evaluate_gates(run.records, cand, ref, thresholds, suites,
                              run.manifest.workloads_of(pair) if run.manifest else pair.workloads)
    return out


@dataclass(frozen=True)
class Baseline:
    """The earlier run a run is diffed against, read once: its results file and its records."""

    path: Path
    run: RunData


def load_baseline(arg: str) -> Baseline:
    """--baseline as a run directory, results file or run id, read (no run.json needed)."""
    path = locate_results(arg)
    return Baseline(path, load_results(path))


def judge(run: RunData, baseline: Baseline | None = None, exit_code: int | None = None) -> Judgement:
    """The run's gates, baseline diff and exit code. `exit_code`: pytest's, as qualify passes it; None: the one
    run.json recorded (pytest's where both are)."""
    raw = exit_code if exit_code is not None else recorded_exit_code(run.manifest)
    gates = run_gates(run)
    if baseline is None:
        return Judgement(gates, run_exit_code(raw, [], gates))
    deltas = baseline_deltas(run.records, baseline.run.records, load_thresholds())
    regressions = [d.regression for d in deltas if d.fails]
    return Judgement(gates, run_exit_code(raw, regressions, gates), str(baseline.path), deltas, regressions,
                     [d.regression for d in deltas if d.regression and not d.enforced], baseline.run.problems)
