"""Series out of the store and what they say: change points, which of them are new tonight, HUD-style windows, and
speed judged beside correctness. Pure apart from the queries (`series`, `nightly`)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import numpy as np

from harness.config.suites import SUITES
from harness.history import store
from harness.history.changepoints import MIN_SIZE, ChangePoint, change_points

# Metrics where a larger value is better; every other one (times, drift, tie flips) is worse when it grows.
HIGHER_IS_BETTER = (".exact_rate", "kv_capacity.tokens", ".accuracy", ".output_tokens_per_s")
SPEED = (".tpot_", ".ttft_", ".itl_", ".output_tokens_per_s")
CORRECTNESS = ("check.", "gsm8k.", "ruler.")


def higher_is_better(metric: str) -> bool:
    """The built-in metrics by name; a catalogue timing suite's (`<suite>.<metric>_p50`) as its MetricGate says."""
    gate = next((s.metric_gate for s in SUITES if s.metric_gate and metric == f"{s.name}.{s.metric_gate.metric}_p50"),
                None)
    return gate.better == "higher" if gate else any(s in metric for s in HIGHER_IS_BETTER)


def family(metric: str) -> str:
    """speed, correctness or capacity: what a change in it means for a release."""
    if any(s in metric for s in SPEED):
        return "speed"
    return "correctness" if metric.startswith(CORRECTNESS) else "capacity"


@dataclass(frozen=True)
class Series:
    arm: str
    metric: str
    runs: list[str]  # ids of the finished runs that measured it, oldest first
    values: list[float]
    keys: list[str] | None = None  # their store keys (ids may repeat); the ids where not given

    def key(self, i: int) -> str:
        return (self.keys or self.runs)[i]


@dataclass(frozen=True)
class Finding:
    arm: str
    metric: str
    change: ChangePoint
    runs: list[str]  # the series' runs: the first at the new level is runs[change.index]
    keys: list[str] | None = None  # their store keys

    @property
    def regression(self) -> bool:
        grew = self.change.after > self.change.before
        return grew != higher_is_better(self.metric)

    @property
    def family(self) -> str:
        return family(self.metric)

    @property
    def run(self) -> str:
        return self.runs[self.change.index]

    @property
    def key(self) -> str:
        return (self.keys or self.runs)[self.change.index]

    def sentence(self) -> str:
        since = self.runs[self.change.index:]
        span = since[0] if len(since) == 1 else f"{since[0]} .. {since[-1]} ({len(since)} runs)"
        return (f"{self.arm} {self.metric}: {'regression' if self.regression else 'improvement'} "
                f"{self.change.size()} from run {span}; p = {self.change.p_value:.2g}")


def series(db: sqlite3.Connection, arm: str, metric: str, upto: str | None = None) -> Series:
    """One arm's metric over its finished runs (interrupted ones are partial, and left out; so are a calibration's
    repeats: no night, and their builds are judged by `calibrate`), up to the run whose store key is `upto`."""
    values = store.metric_values(db, arm, metric)
    rows = [r for r in store.runs(db, arm) if r.status == "finished" and not r.calibration and r.run_key in values]
    keys = [r.run_key for r in rows]
    if upto is not None and upto in keys:
        rows = rows[:keys.index(upto) + 1]
    return Series(arm, metric, [r.run_id for r in rows], [values[r.run_key] for r in rows], [r.run_key for r in rows])


def findings(s: Series) -> list[Finding]:
    return [Finding(s.arm, s.metric, c, s.runs, s.keys) for c in change_points(s.values)]


def new_at_newest(s: Series) -> list[Finding]:
    """Change points the newest run reveals: found with it, at a level the newest run belongs to, and not found
    (at that run) without it. A level needs MIN_SIZE runs, so a step shows the night its second run arrives."""
    if len(s.values) < 2 * MIN_SIZE:
        return []
    before = {s.key(c.index) for c in change_points(s.values[:-1])}
    latest = findings(s)[-1:]
    return [f for f in latest if f.key not in before]


@dataclass(frozen=True)
class Window:
    baseline: list[float]
    recent: list[float]

    @property
    def ratio(self) -> float | None:
        base = float(np.median(self.baseline)) if self.baseline else 0.0
        return float(np.median(self.recent)) / base if base and self.recent else None


def windows(s: Series, baseline: int = 6, recent: int = 2) -> Window:
    """PyTorch HUD's comparison: the last `recent` runs against the `baseline` runs before them."""
    return Window(s.values[-(baseline + recent):-recent] if len(s.values) > recent else [], s.values[-recent:])


def violated(s: Series, w: Window) -> bool:
    """Every recent run outside the baseline window's range on the worse side (HUD flags 2+ such runs in a row)."""
    if len(w.baseline) < 2 or len(w.recent) < 2:
        return False
    if higher_is_better(s.metric):
        return all(v < min(w.baseline) for v in w.recent)
    return all(v > max(w.baseline) for v in w.recent)


@dataclass
class NightlyVerdict:
    failures: list[str]  # change points that fail the night: regressions, speed gains with a correctness change
    notes: list[str]  # improvements, older change points, HUD windows

    @property
    def passed(self) -> bool:
        return not self.failures


def judge_night(all_series: list[Series]) -> NightlyVerdict:
    """A run's nightly verdict from its arms' series, each ending at the run (pure)."""
    new = [f for s in all_series for f in new_at_newest(s)]
    correctness_runs = {(f.arm, f.key) for f in new if f.family == "correctness"}
    failures, notes = [], []
    for f in new:
        if f.regression:
            failures.append(f"change point at the newest runs: {f.sentence()}")
        elif f.family == "speed" and (f.arm, f.key) in correctness_runs:
            failures.append(f"speed-up on the same run as a correctness change (outputs differ: judge them before "
                            f"the speed): {f.sentence()}")
        else:
            notes.append(f"change point at the newest runs: {f.sentence()}")
    for s in all_series:
        w = windows(s)
        if violated(s, w):
            notes.append(f"{s.arm} {s.metric}: the last {len(w.recent)} runs are all worse than the {len(w.baseline)} "
                         f"before them (median x{w.ratio:.3f}); HUD's window rule, not yet a change point")
    return NightlyVerdict(failures, notes)


def nightly(db: sqlite3.Connection, run_id: str) -> NightlyVerdict:
    """Run `run_id`'s candidates' every metric up to it, judged as one night (the newest run of that id)."""
    key = store.run_key(db, run_id)
    cands = [a.arm for a in store.arms(db, key) if a.role == "candidate"] if key else []
    if not cands:
        raise store.HistoryError(f"run {run_id!r} is not in the history (or has no candidate arm): append it "
                                 "first (`harness history append --run RUN`)")
    return judge_night([series(db, arm, m, upto=key) for arm in cands for m in store.metric_names(db, arm)])
