"""Render a run directory: tables (Markdown/CSV/JSON), baseline diff, annotation.md and report.html.

Reads only <run-dir>/results.jsonl, run.json and the raw files the records reference, so a report can be
re-rendered later or on another machine. Steps: load_run -> judge (judging.py: gates, baseline deltas, exit code)
-> render_judged (build_tables / gaps / plots -> write_tables + report.html); qualify's end hands render_judged the
run it read once (harness/qualify/finish.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.judge.baseline import Delta, power_lines
from harness.judge.verdict import run_verdict
from harness.records.manifest import CalibrationRepeat
from harness.records.schema import Gsm8kRecord, KvCapacityRecord, LongPrefixRecord, Record, RulerRecord
from harness.report import plots
from harness.report.basis import verdict_basis
from harness.report.capacity import pareto_points
from harness.report.completeness import gaps
from harness.report.glance import glance_markdown
from harness.report.headline import candidate_verdicts, headline
from harness.report.html import ReportContent, render_html
from harness.report.judging import Judgement, judge, load_baseline, recorded_thresholds, run_pairs
from harness.report.long_context import heatmaps
from harness.report.provenance import summarize_provenance
from harness.report.rundata import RunData, kv_series, load_run, tpot_samples
from harness.report.tables import build_tables, deltas_table, flag_of, to_markdown
from harness.report.trend import trend_view


def slug(title: str) -> str:
    return title.lower().replace(" ", "_")


def write_tables(tables_dir: Path, tables: list[tuple[str, pd.DataFrame]]) -> str:
    """Each table as <slug>.md (GitHub pipes, ready to paste), .csv and .json; returns the Markdown of all."""
    tables_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for title, df in tables:
        md = to_markdown(df)
        (tables_dir / f"{slug(title)}.md").write_text(md + "\n")
        df.to_csv(tables_dir / f"{slug(title)}.csv", index=False)
        (tables_dir / f"{slug(title)}.json").write_text(df.to_json(orient="records", indent=2) + "\n")
        out.append(f"### {title}\n\n{md}\n")
    return "\n".join(out)


def write_headline(tables_dir: Path, lines: list[str]) -> str:
    """The headline as tables/headline.md (one bullet per measure, in the measures' order); returns its Markdown
    section as read at a glance (glance.py: the count, failures first and marked)."""
    if not lines:
        return ""
    tables_dir.mkdir(parents=True, exist_ok=True)
    (tables_dir / "headline.md").write_text("\n".join(f"- {line}" for line in lines) + "\n")
    return glance_markdown(lines)


def bar_panels(records: list[Record], flt: str = "strict-match") -> list[tuple[str, dict[str, float]]]:
    """Arm-vs-reference bars (pure): TPOT p50 per concurrency, accuracy (GSM8K, RULER), KV capacity."""
    panels: dict[str, dict[str, float]] = {}
    for r in records:
        if isinstance(r, LongPrefixRecord) and r.tpot.p50 is not None:
            panels.setdefault(f"TPOT p50 c{r.concurrency} (ms)", {})[r.arm] = r.tpot.p50 * 1e3
    for r in records:
        if isinstance(r, Gsm8kRecord) and flt in r.scores and r.n:
            panels.setdefault(f"GSM8K {flt} (%)", {})[r.arm] = 100 * r.scores[flt].correct / r.n
        elif isinstance(r, RulerRecord) and r.n:
            panels.setdefault("RULER all answers found (%)", {})[r.arm] = 100 * sum(r.per_sample.values()) / r.n
        elif isinstance(r, KvCapacityRecord):
            panels.setdefault("KV capacity (tokens)", {})[r.arm] = float(r.tokens)
    return sorted(panels.items(), key=lambda kv: (not kv[0].startswith("TPOT"), kv[0]))


def capacity_plot(run: RunData) -> bytes | None:
    cands = [c for c, r in run_pairs(run) if r]
    slo = recorded_thresholds(run)[cands[0]].capacity.slo_tpot_p99_ms if cands else None
    return plots.capacity_pareto(pareto_points(run.records, run.arm_order), run.arm_order, slo)


def make_plots(run: RunData) -> tuple[list[tuple[str, bytes | None, str]], list[str]]:
    order = run.arm_order
    samples, p1 = tpot_samples(run)
    series, p2 = kv_series(run)
    return [("TPOT distribution", plots.tpot_distribution(samples, order),
             "no long_prefix samples: suite not run or its samples files are missing"),
            ("KV-usage timeline", plots.kv_timeline(series, order),
             "no /metrics time series: suite not run or its telemetry files are missing"),
            ("Arm vs reference", plots.arm_bars(bar_panels(run.records), order), "no measurements to compare"),
            ("Long context: length x depth", plots.long_context_heatmap(heatmaps(run.records)),
             "no long_context record: suite not run (or its candidate never compared a cell)"),
            ("Capacity: throughput per GPU against TPOT", capacity_plot(run),
             "no capacity record: suite not run (it runs when named: --suites capacity)")], \
        p1 + p2


def pairs_title(pairs: list[tuple[str, str | None]]) -> str:
    """'cpu-smoke vs cpu-ref, cpu-spec vs cpu-ref': every candidate of the run with its reference."""
    return ", ".join(f"{c} vs {r}" if r else c for c, r in pairs) or "no arm recorded"


def not_a_qualification(repeat: CalibrationRepeat | None) -> list[str]:
    """A calibration repeat's verdict line: its exit code says only how its checks went (judged without
    require_floor where the key has no calibration yet), so nothing in its report may read as a qualification."""
    if repeat is None:
        return []
    return [f"calibration repeat {repeat.repeat} of {repeat.of} of {repeat.id}: not a qualification (`python -m "
            "harness calibrate` judges the repeats together)"]


def annotation(pairs: list[tuple[str, str | None]], exit_code: int | None, tables: str, regressions: list[str] = (),
               report_path: Path | None = None, repeat: CalibrationRepeat | None = None, basis: str = "") -> str:
    """Markdown for `buildkite-agent annotate`: the verdict line naming every candidate and how it was judged
    (`basis`), then the tables headed by the headline, failures first."""
    shown = "not recorded" if exit_code is None else exit_code
    verdict = f"DCP qualification {run_verdict(exit_code)}"
    judged = f" — judged: {basis}" if basis else ""
    lines = [f"## {(not_a_qualification(repeat) or [verdict])[0]}: {pairs_title(pairs)} (exit code {shown}){judged}\n"]
    lines += [f"- **baseline regression**: {r}" for r in regressions]
    if report_path is not None:
        lines.append(f"\nSign-off report: [{report_path.name}]({report_path}) (`{report_path}`)\n")
    return "\n".join(lines) + f"\n{tables}"


@dataclass
class Rendered:
    markdown: str  # every table, the baseline diff, what is missing, the reader's problems
    regressions: list[str]
    html_path: Path
    exit_code: int | None  # the run's exit code with baseline regressions applied; None when never recorded
    basis: str = ""  # how the verdict was reached (basis.py): the annotation's first line carries it


DELTA_COLUMNS = {"Performance": ("TPOT p50", "TPOT p50 vs baseline"), "KV capacity": ("KV tokens", "KV vs baseline"),
                 "Accuracy": ("exact_match", "exact_match vs baseline")}


def with_delta_columns(tables: list[tuple[str, pd.DataFrame]], deltas: list[Delta]) -> list[tuple[str, pd.DataFrame]]:
    """Each PR table gets its baseline change as a column (pure); REGRESSION where flagged."""
    out = []
    for title, df in tables:
        if title in DELTA_COLUMNS and not df.empty:
            metric, column = DELTA_COLUMNS[title]
            by_key = {(d.arm, d.where if metric == "TPOT p50" else ""): d.change + (f" {flag_of(d)}" if d.regression
                                                                                   else "")
                      for d in deltas if d.metric == metric}
            keys = zip(df["Arm"], df["Conc"] if "Conc" in df else [""] * len(df), strict=True)
            df = df.assign(**{column: [by_key.get(k, "not in baseline") for k in keys]})
        out.append((title, df))
    return out


def render_run(run_dir: Path, baseline: str | None = None, exit_code: int | None = None) -> Rendered:
    """Read, judge (judging.judge with `baseline` and `exit_code`) and render a run directory."""
    run = load_run(run_dir)
    return render_judged(run, judge(run, load_baseline(baseline) if baseline else None, exit_code))


def render_judged(run: RunData, judged: Judgement) -> Rendered:
    """Render the run as read, with its judgement made already (qualify judges before it records the end): its
    tables, report.html and the Markdown of both."""
    run_dir = run.run_dir
    gates = judged.gates
    pairs = run_pairs(run)
    tables = build_tables(run.records, run.arm_order, gates, dict(pairs),
                          {c: t.capacity for c, t in recorded_thresholds(run).items()})
    lines = [*not_a_qualification(run.manifest.calibration if run.manifest else None),
             *(candidate_verdicts(run.records, pairs, gates) if len(pairs) > 1 else []),
             *headline(run.records, pairs, gates)]
    base = None
    regressions, shown_only = judged.regressions, judged.shown_only
    tables_for_files = tables
    problems = list(run.problems)  # the reader's, then the baseline's and the plots' (the run as read is not changed)
    unjudged = [d.unjudged for d in judged.deltas if d.no_data] if judged.baseline else []
    if judged.baseline:
        base = (judged.baseline, deltas_table(judged.deltas), regressions, shown_only, unjudged)
        problems += judged.problems
        tables = with_delta_columns(tables, judged.deltas)
        tables_for_files = [*tables, ("Baseline diff", base[1])]
        lines += power_lines(judged.deltas)  # what the diff could have caught at its n: a pass says nothing below it
    code = judged.exit_code
    missing = gaps(run.manifest, run.records, run.arm_order, [c for c, _ in pairs])
    figures, plot_problems = make_plots(run)
    problems += plot_problems
    md = write_headline(run_dir / "tables", lines) + write_tables(run_dir / "tables", tables_for_files)
    if regressions:
        md += "\n### Baseline regressions\n\n" + "\n".join(f"- {r}" for r in regressions) + "\n"
    if shown_only:
        md += "\n### Baseline regressions, not enforced\n\n" + "\n".join(f"- {r}" for r in shown_only) + "\n"
    if unjudged:  # the current run's own gaps fail its gates; the baseline's are named here, not enforced
        md += "\n### Baseline comparisons without data\n\n" + "\n".join(f"- {u}" for u in unjudged) + "\n"
    if missing:
        md += "\n### Missing or incomplete\n\n" + "\n".join(f"- {g}" for g in missing) + "\n"
    trend = trend_view(run.manifest.run_id if run.manifest and run.manifest.run_id else run_dir.name,
                       [c for c, _ in pairs])
    if trend.change_points:
        md += "\n### Change points in the history\n\n" + "\n".join(f"- {c}" for c in trend.change_points) + "\n"
    if trend.gate:
        md += "\n### Nightly gate\n\n" + "\n".join(f"- {c}" for c in trend.gate) + "\n"
    if trend.coverage:
        md += "\n### Coverage over the runs in the history\n\n" + "\n".join(f"- {c}" for c in trend.coverage) + "\n"
    if problems:
        md += "\n### Results file problems\n\n" + "\n".join(f"- {p}" for p in problems) + "\n"
    title = f"DCP qualification {run_dir.name}: {pairs_title(pairs)}"
    line = f"{run_verdict(code)} (exit code {code if code is not None else 'not recorded: the run did not finish'})"
    provenance = summarize_provenance(run.manifest, run.records, code)
    basis = verdict_basis(run.records, [c for c, r in pairs if r])
    content = ReportContent(title, line, run_verdict(code) == "PASSED", provenance, tables, missing, problems,
                            figures, base, lines, trend, basis)
    html_path = run_dir / "report.html"
    html_path.write_text(render_html(content))
    return Rendered(md, regressions, html_path, code, basis)
