"""The HTML sign-off report: ReportContent rendered through the Jinja2 template in templates/ (autoescaped).

One self-contained page: the CSS is inlined, plots are base64 data URIs, nothing is fetched from a URL.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import pandas as pd

from harness.report.glance import glance
from harness.report.tables import to_markdown
from harness.report.trend import TrendView

TEMPLATES = Path(__file__).parent / "templates"
FLAG_WORDS = ("PASS", "FAIL", "REGRESSION", "ok", "failed", "error", "aborted", "passed", "skipped", "FLAGGED")


@dataclass
class ReportContent:
    title: str
    verdict: str
    passed: bool
    provenance: dict
    tables: list[tuple[str, pd.DataFrame]]
    gaps: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    plots: list[tuple[str, bytes | None, str]] = field(default_factory=list)  # title, png, why it is absent
    # label, deltas, regression sentences (failing the run), flagged sentences shown but not enforced, comparisons
    # with a side missing
    baseline: tuple[str, pd.DataFrame, list[str], list[str], list[str]] | None = None
    headline: list[str] = field(default_factory=list)
    trend: TrendView | None = None  # the history's trend page (harness/report/trend.py)
    basis: str = ""  # how the verdict was reached (harness/report/basis.py)


# A column naming the arm (pair) of every row: where all rows name the same one, the page says it once, in the
# table's caption, instead of "cpu-smoke vs cpu-ref" in every row (the Markdown tables keep the column).
WHOSE = ("Arm vs reference", "Arm")


def table_view(title: str, df: pd.DataFrame) -> dict:
    """What the template needs of a table: its columns and rows as plain values (a column naming one arm or pair
    for every row lifted into `whose`), or the empty-table sentence."""
    whose = next((c for c in WHOSE if c in df.columns and len(df) > 1 and df[c].nunique() == 1), None)
    shown = df.drop(columns=[whose]) if whose else df
    return {"title": title, "columns": list(shown.columns), "rows": [list(r) for r in shown.itertuples(index=False)],
            "empty": to_markdown(df).strip("_()") if df.empty else "", "whose": str(df[whose].iloc[0]) if whose else ""}


def breakable(value: object) -> str:
    """A cell's text, HTML-escaped here (the template marks it safe), with a line-break opportunity after each '/'
    and '_' (<wbr>): 'p50/p90/p99', 'long_context_bursts' and paths wrap inside a narrow column instead of widening
    the table past the page."""
    return html.escape(str(value)).replace("/", "/<wbr>").replace("_", "_<wbr>")


def headline_view(lines: list[str]) -> dict:
    """The headline at a glance (glance.py): its count, and each line with its kind ('fail', 'unenforced', '')."""
    g = glance(lines)
    return {"tally": g.tally, "failed": bool(g.failed), "lines": g.marked()}


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined,
                         keep_trailing_newline=True)
ENV.filters["breakable"] = breakable


def render_html(c: ReportContent) -> str:
    baseline = None
    if c.baseline is not None:
        label, df, regressions, not_enforced, unjudged = c.baseline
        baseline = {"label": label, "regressions": regressions, "not_enforced": not_enforced, "unjudged": unjudged,
                    "table": table_view("Baseline diff", df)}
    return ENV.get_template("report.html.j2").render(
        c=c, css=(TEMPLATES / "report.css").read_text(), flag_words=FLAG_WORDS, baseline=baseline,
        trend={"uri": data_uri(c.trend.png) if c.trend and c.trend.png else None,
               "note": c.trend.note if c.trend else "not rendered", "lines": c.trend.change_points if c.trend else [],
               "coverage": c.trend.coverage if c.trend else [], "gate": c.trend.gate if c.trend else []},
        tables=[table_view(t, df) for t, df in c.tables], prov=c.provenance, headline=headline_view(c.headline),
        plots=[{"title": t, "uri": data_uri(png) if png is not None else None, "note": note}
               for t, png, note in c.plots])
