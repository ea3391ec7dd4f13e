"""Series out of the store and what they say: change points, HUD-style windows, and the nightly gate's view. A series
is one arm config, reference, model and machine class, nightly runs in UTC start order. Pure apart from the queries."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from harness.config.arms import VOLATILE_ARM_FIELDS
from harness.config.suites import SUITES
from harness.history import store
from harness.history.changepoints import ChangePoint, change_points
from harness.history.nightly import (
    BASELINE_RUNS,
    LINEAR,
    WINDOWS,
    Judged,
    NightlyVerdict,
    Scale,
    baseline_of,
    judge,
    lag1,
    shift,
)
from harness.records.meaning import Metric, metric_named


def meaning_of(metric: str) -> Metric:
    """A stored metric's declaration (harness/records/meaning.py); a name no record kind declares any more is trended
    as a capacity figure, lower better, no gate."""
    return metric_named(metric) or Metric(metric, None, "lower", "capacity")


def higher_is_better(metric: str) -> bool:
    return meaning_of(metric).higher_is_better


def family(metric: str) -> str:
    """speed, correctness or capacity: what a change in it means for a release."""
    return meaning_of(metric).family


@dataclass(frozen=True)
class Series:
    arm: str
    metric: str
    runs: list[str]  # ids of the finished runs that measured it, oldest first
    values: list[float]
    keys: list[str] | None = None  # their store keys (ids may repeat); the ids where not given
    versions: list[str | None] | None = None  # the arm's vLLM version in each run
    left_out: int = 0  # runs of the arm that do not belong to this series (another config, reference, model, host)

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


def utc_start(run: store.RunRow) -> datetime:
    """A run's start in UTC (run.json writes local time with its offset); an unreadable one sorts first."""
    try:
        return datetime.strptime(run.started or "", "%Y-%m-%dT%H:%M:%S%z").astimezone(timezone.utc)
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)


def host_class(manifest: str) -> str:
    """The kind of machine a run timed on, from run.json's device: the GPU models, else the CPU model (a hostname
    is one agent of a class; two agents of one class time alike)."""
    try:
        device = json.loads(manifest or "{}").get("device") or {}
    except ValueError:
        device = {}
    if device.get("gpus"):
        names = device["gpus"]
        return f"gpu: {names[0]} x {len(names)}"
    return f"cpu: {device['cpu']}" if device.get("cpu") else "unknown"


@dataclass(frozen=True)
class SeriesKey:
    """What runs must share to be one series: the arm's resolved config, its reference, its model and the class of
    machine (a run of another config or host measures something else, not a step)."""

    config: str | None  # config_sha of the arm
    reference: str | None  # the reference's name and config_sha
    model: str | None
    host: str


def config_sha(fields: dict | None) -> str | None:
    """An arm's resolved fields as run.json recorded them, without those that cannot change what its server
    computes (paths, names, waits, placement: config.arms.VOLATILE_ARM_FIELDS; the server's host and port)."""
    if not isinstance(fields, dict):
        return None
    kept = {k: v for k, v in fields.items() if k not in VOLATILE_ARM_FIELDS}
    if isinstance(kept.get("server"), dict):
        kept["server"] = {k: v for k, v in kept["server"].items() if k not in ("host", "port")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]


def series_key(run: store.RunRow, row: store.ArmRow) -> SeriesKey:
    """What a run's arm must share with the others of its series, from the run's own run.json: the arm's config and
    its reference's (drift, exact rate and tie flips are measured against the reference's outputs)."""
    try:
        arms = json.loads(run.manifest or "{}").get("arms") or {}
    except ValueError:
        arms = {}
    mine = config_sha(arms.get(row.arm)) or row.arm_sha
    theirs = config_sha(arms.get(row.reference)) if row.reference else None
    return SeriesKey(mine, f"{row.reference}:{theirs}" if row.reference else None, row.model, host_class(run.manifest))


def nightly_runs(db: sqlite3.Connection, arm: str) -> list[tuple[store.RunRow, store.ArmRow, SeriesKey]]:
    """The arm's finished nightly runs in UTC start order with arm row and series key (no interrupted runs, no
    calibration repeats)."""
    out = []
    for run in sorted(store.runs(db, arm), key=utc_start):
        if run.status != "finished" or run.calibration:
            continue
        row = next((a for a in store.arms(db, run.run_key) if a.arm == arm), None)
        if row is not None:
            out.append((run, row, series_key(run, row)))
    return out


def series(db: sqlite3.Connection, arm: str, metric: str, upto: str | None = None) -> Series:
    """One arm's metric over the nightly runs that belong with its newest one (or with the run whose store key is
    `upto`, the series then ending there)."""
    runs = nightly_runs(db, arm)
    keys = [r.run_key for r, _, _ in runs]
    if upto is not None and upto in keys:
        runs = runs[:keys.index(upto) + 1]
    if not runs:
        return Series(arm, metric, [], [], [], [])
    belongs = runs[-1][2]
    values = store.metric_values(db, arm, metric)
    kept = [(r, a) for r, a, k in runs if k == belongs and r.run_key in values]
    return Series(arm, metric, [r.run_id for r, _ in kept], [values[r.run_key] for r, _ in kept],
                  [r.run_key for r, _ in kept], [a.vllm_version for _, a in kept],
                  left_out=sum(1 for _, _, k in runs if k != belongs))


def findings(s: Series) -> list[Finding]:
    return [Finding(s.arm, s.metric, c, s.runs, s.keys) for c in change_points(s.values)]


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


def gate_of(metric: str, gates: dict | None) -> tuple[str | None, float]:
    """Why this metric may fail the night (from the run's recorded gates) and the smallest move that counts on the
    tested scale; (None, 0) where no enforced gate judges it."""
    declared = meaning_of(metric)
    if declared.family == "correctness":
        # any lasting move of the outputs counts; a drift's float32 rounding sits under nightly.DRIFT_FLOOR
        return "correctness", 0.0
    if gates is None or not declared.gated:  # a run that recorded no gates: its timing is trended only
        return None, 0.0
    spec = next((s.metric_gate for s in SUITES if s.gate == declared.gate), None)
    if spec:  # a catalogue timing gate: gates.yaml metric_gates.<gate> overrides its tolerance per run
        own = (gates.get("metric_gates") or {}).get(declared.gate) or {}
        tolerance = own.get("tolerance") if own.get("tolerance") is not None else spec.tolerance
        return (f"gate {declared.gate} (enforced)" if own.get("enforce", True) else None), math.log1p(tolerance)
    lp = gates.get("long_prefix") or {}  # the long_prefix TPOT p50 gate: gates.yaml long_prefix
    tolerance = lp.get("tpot_p50_tolerance", 0.05)
    # a slowdown inside the gate's own tolerance is one qualify passes: the night does not fail on it either
    enforced = lp.get("enforce_timing", True)
    return (f"gate {declared.gate} (enforced)" if enforced else None), math.log1p(tolerance)


def attribution(s: Series, window: int) -> str:
    """Where the window holds the run at which the arm's vLLM version changed: that change, named."""
    v = s.versions or []
    for i in range(max(1, len(v) - window), len(v)):
        if v[i] != v[i - 1]:
            return f"the vLLM version moved {v[i - 1]} -> {v[i]} at run {s.runs[i]}: attributed to it"
    return ""


def scale_of(metric: str, values: list[float]) -> Scale:
    declared = meaning_of(metric).scale
    if declared in ("drift", "rate"):
        return Scale(declared)
    if declared == "linear":
        return LINEAR
    return Scale("log") if values and all(v > 0 for v in values) else LINEAR


def judged_series(s: Series, gates: dict | None, missing: str | None = None, rho: float | None = None) -> Judged:
    """One series as the night judges it; `rho`: the lag-1 autocorrelation to allow for (judged_night pools it over
    the arm's series; None: this series' own)."""
    gated, min_effect = gate_of(s.metric, gates)
    if missing:
        return Judged(s.arm, s.metric, family(s.metric), gated, len(s.values), None, run_ids=tuple(s.runs),
                      missing=missing)
    worse_up = not higher_is_better(s.metric)
    scale = scale_of(s.metric, s.values)
    x = scale.forward(np.asarray(s.values, dtype=float))
    base = x[:-WINDOWS[0]][-BASELINE_RUNS:]
    rho = lag1([baseline_of(x)]) if rho is None else rho
    worse = shift(s.values, worse_up, min_effect, scale, rho)
    better = shift(s.values, not worse_up, min_effect, scale, rho) if worse is not None else None
    noise = float(np.std(base, ddof=1)) if len(base) >= 2 else None
    tail = attribution(s, max(w.window for w in (worse, better) if w)) if worse else ""
    return Judged(s.arm, s.metric, family(s.metric), gated, len(s.values), worse, better, min_effect, tail, noise,
                  rho, tuple(s.runs), scale.name)


def judged_night(of_night: list[tuple[Series, str | None]], gates_of: dict[str, dict | None]) -> list[Judged]:
    """Every (series, missing) of a night judged, the lag-1 autocorrelation pooled per arm over its series'
    baselines (nightly.lag1)."""
    baselines: dict[str, list[np.ndarray]] = {}
    for s, missing in of_night:
        if not missing:
            x = scale_of(s.metric, s.values).forward(np.asarray(s.values, dtype=float))
            baselines.setdefault(s.arm, []).append(baseline_of(x))
    rho = {arm: lag1(b) for arm, b in baselines.items()}
    return [judged_series(s, gates_of.get(s.arm), missing, rho.get(s.arm, 0.0)) for s, missing in of_night]


def run_gates(manifest: str, arm: str) -> dict | None:
    """The gate thresholds the run resolved for a candidate (its pair's, else the run's)."""
    try:
        m = json.loads(manifest or "{}")
    except ValueError:
        return None
    pair = next((p for p in m.get("pairs") or [] if p.get("candidate") == arm), {})
    return pair.get("gates") or m.get("gates")


def nightly(db: sqlite3.Connection, run_id: str) -> NightlyVerdict:
    """Every metric of `run_id`'s candidates over its series up to the run, judged as one night; a metric the
    previous run measured and this one did not is judged missing."""
    key = store.run_key(db, run_id)
    cands = [a.arm for a in store.arms(db, key) if a.role == "candidate"] if key else []
    if not cands:
        raise store.HistoryError(f"run {run_id!r} is not in the history (or has no candidate arm): append it "
                                 "first (`harness history append --run RUN`)")
    manifest = next(r.manifest for r in store.runs(db) if r.run_key == key)
    of_night: list[tuple[Series, str | None]] = []
    for arm in cands:
        runs = nightly_runs(db, arm)
        keys = [r.run_key for r, _, _ in runs]
        mine = runs[:keys.index(key) + 1] if key in keys else runs
        previous = next((r for r, _, k in reversed(mine[:-1]) if mine and k == mine[-1][2]), None)
        for metric in store.metric_names(db, arm):
            s = series(db, arm, metric, upto=key)
            if s.keys and s.keys[-1] == key:
                of_night.append((s, None))
            elif previous is not None and s.keys and s.keys[-1] == previous.run_key:
                of_night.append((s, previous.run_id))
    return judge(judged_night(of_night, {arm: run_gates(manifest, arm) for arm in cands}))
