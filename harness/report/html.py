"""The HTML sign-off report (pure): one self-contained page, inline CSS, images as base64 data URIs, no URLs."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field

import pandas as pd

from harness.report.tables import to_markdown

CSS = """
body{font:14px/1.45 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px 32px;color:#1b1f23;max-width:1400px}
h1{font-size:22px;margin:0 0 6px}h2{font-size:17px;border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:28px}
.verdict{font-size:16px;font-weight:600;padding:8px 12px;border-radius:6px;display:inline-block}
.ok{background:#dafbe1;color:#116329}.bad{background:#ffebe9;color:#a40e26}
table{border-collapse:collapse;margin:6px 0 10px}th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;
vertical-align:top}th{background:#f6f8fa}td.PASS,td.ok{color:#116329;font-weight:600}
td.FAIL,td.REGRESSION,td.failed,td.error,td.aborted{color:#a40e26;font-weight:600}
pre{background:#f6f8fa;padding:6px 8px;white-space:pre-wrap;word-break:break-all;margin:2px 0}
ul.warn li{color:#9a6700}
ul.bad li{color:#a40e26;font-weight:600}
.empty{color:#57606a;font-style:italic}img{max-width:100%;border:1px solid #eaeef2}
"""

FLAG_WORDS = ("PASS", "FAIL", "REGRESSION", "ok", "failed", "error", "aborted", "passed", "skipped")


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
    baseline: tuple[str, pd.DataFrame, list[str]] | None = None  # label, deltas, regression sentences


def esc(text) -> str:
    return html.escape(str(text))


def table_html(df: pd.DataFrame) -> str:
    """A plain HTML table; verdict cells get a class so PASS/FAIL/REGRESSION stand out."""
    if df.empty:
        return f'<p class="empty">{esc(to_markdown(df).strip("_()"))}</p>'
    head = "".join(f"<th>{esc(c)}</th>" for c in df.columns)
    rows = []
    for values in df.itertuples(index=False):
        cells = "".join(f'<td class="{v}">{esc(v)}</td>' if str(v) in FLAG_WORDS else f"<td>{esc(v)}</td>"
                        for v in values)
        rows.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def listing(items: list[str], cls: str = "warn") -> str:
    return f'<ul class="{cls}">' + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>"


def kv_table(pairs: dict) -> str:
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in pairs.items())
    return f"<table>{rows}</table>"


def launches_html(launches: list[dict]) -> str:
    if not launches:
        return '<p class="empty">no server record: no arm was launched</p>'
    parts = []
    for launch in launches:
        env = "\n".join(f"{k}={v}" for k, v in launch["env"].items()) or "(nothing set by the harness)"
        parts.append(f"<h3>{esc(launch['arm'])} ({esc(launch['status'])})</h3>"
                     f"<div>argv</div><pre>{esc(' '.join(launch['argv']) or '(not recorded)')}</pre>"
                     f"<div>environment</div><pre>{esc(env)}</pre>")
    return "".join(parts)


def image(title: str, data: bytes | None, note: str) -> str:
    if data is None:
        return f"<h3>{esc(title)}</h3><p class=\"empty\">{esc(note)}</p>"
    uri = "data:image/png;base64," + base64.b64encode(data).decode()
    return f'<h3>{esc(title)}</h3><img alt="{esc(title)}" src="{uri}">'


def render_html(c: ReportContent) -> str:
    p = c.provenance
    body = [f"<h1>{esc(c.title)}</h1>",
            f'<div class="verdict {"ok" if c.passed else "bad"}">{esc(c.verdict)}</div>']
    if c.baseline is not None:
        label, df, regressions = c.baseline
        body.append(f"<h2>Baseline diff: {esc(label)}</h2>")
        body.append(listing([f"REGRESSION: {r}" for r in regressions], "bad") if regressions
                    else "<p>No regression against the baseline.</p>")
        body.append(table_html(df))
    body.append("<h2>Missing or incomplete</h2>")
    body.append(listing(c.gaps) if c.gaps else "<p>Nothing missing: every suite x arm recorded a result.</p>")
    body.append("<h2>Results file problems</h2>")
    body.append(listing(c.problems) if c.problems else "<p>None: every line was read.</p>")
    for title, df in c.tables:
        body.append(f"<h2>{esc(title)}</h2>{table_html(df)}")
    body.append("<h2>Plots</h2>")
    body.extend(image(*plot) for plot in c.plots)
    body.append("<h2>Provenance</h2>")
    body.append(kv_table(p.get("summary", {})))
    body.append("<h3>Data files (sha256)</h3>" + (kv_table(p["data_files"]) if p.get("data_files")
                                                  else '<p class="empty">no data files recorded</p>'))
    body.append("<h3>Workload prompt fingerprints</h3>" + (kv_table(p["workloads"]) if p.get("workloads")
                                                           else '<p class="empty">no workload recorded</p>'))
    body.append("<h3>Arms as launched (secrets redacted)</h3>" + launches_html(p.get("launches", [])))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(c.title)}</title>'
            f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
