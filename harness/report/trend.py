"""The report's trend page: the candidates' key metrics over the last runs in the history store, change points
marked, this run highlighted. Reads the store only if it exists (rendering an old run creates none)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.history import store
from harness.history.extract import coverage_lines
from harness.history.nightly import BUDGET, power_lines
from harness.history.trends import Series, family, findings, meaning_of, nightly, series
from harness.report import plots

LAST_RUNS = 30


@dataclass
class TrendView:
    png: bytes | None
    note: str  # why there is no plot, or what it shows
    change_points: list[str] = field(default_factory=list)
    coverage: list[str] = field(default_factory=list)  # what the runs together checked: lengths and batch sizes
    gate: list[str] = field(default_factory=list)  # the nightly gate on this run: its verdict, budget and power


def key_metrics(names: list[str]) -> list[str]:
    """The metrics whose declaration puts them on the trend page (harness/records/meaning.py Metric.key)."""
    return [n for n in names if meaning_of(n).key]


def window(s: Series, key: str, last: int) -> tuple[Series, int | None]:
    """The last `last` runs up to and including this run (its store key; the last ones when it is not in the
    series), and this run's position in them."""
    keys = s.keys or s.runs
    end = keys.index(key) + 1 if key in keys else len(keys)
    start = max(0, end - last)
    cut = Series(s.arm, s.metric, s.runs[start:end], s.values[start:end], keys[start:end])
    return cut, (end - start - 1 if key in keys else None)


def trend_view(run_id: str, candidates: list[str], last: int = LAST_RUNS) -> TrendView:
    path = store.history_path()
    if not path.is_file():
        return TrendView(None, f"no history store at {path}: nothing to plot (qualify appends every run; "
                         "`harness history backfill` adds old ones)")
    panels, lines = [], []
    with store.connect(path) as db:
        key = store.run_key(db, run_id)
        if key is None:
            return TrendView(None, f"run {run_id} is not in the history at {path} (`harness history append --run "
                             f"{run_id}` adds it)")
        for arm in candidates:
            for metric in key_metrics(store.metric_names(db, arm)):
                s, current = window(series(db, arm, metric), key, last)
                found = findings(s)
                panels.append((f"{arm} {metric} ({family(metric)})", s.runs, s.values,
                               [f.change.index for f in found], current))
                lines += [f.sentence() for f in found]
        covered = coverage_lines([row for arm in candidates for row in store.coverage(db, arm)])
        gate = gate_lines(db, run_id)
    runs = max((len(p[1]) for p in panels), default=0)
    return TrendView(plots.trend(panels), f"the last {runs} finished runs of {', '.join(candidates)} in {path}; "
                     "dashed: a change point's first run; ring: this run", lines, covered, gate)


def gate_lines(db, run_id: str) -> list[str]:
    """`history check`'s verdict on this run, the false-alarm budget it holds and each gated series' power."""
    key = store.run_key(db, run_id)
    row = next((r for r in store.runs(db) if r.run_key == key), None)
    if row is None or row.calibration or row.status != "finished":
        why = "a calibration repeat" if row and row.calibration else "interrupted (partial metrics)"
        return [f"not judged as a night: run {run_id} is {why}"]
    verdict = nightly(db, run_id)
    return [verdict.headline(run_id), *verdict.failures, *verdict.notes,
            *(f"not judged: {line}" for line in verdict.short),
            *(f"power at the {BUDGET:.0%} budget: {line}" for line in power_lines(verdict))]
