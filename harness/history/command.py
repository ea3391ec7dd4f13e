"""`harness history`: append or backfill runs, list them, a metric's trend with its change points, HUD-style windows,
the lengths covered over the nights, and the nightly check (harness/history/nightly.py: exit 1 on a lasting change at
a stated false-alarm budget, 3 when it cannot judge)."""

from __future__ import annotations

import argparse
import difflib
import sqlite3
import sys
from pathlib import Path

from tabulate import tabulate

from harness.config.numbers import whole_number
from harness.config.paths import REPORTS_DIR
from harness.history import store
from harness.history.extract import RunRows, coverage_lines, run_rows

NOT_JUDGED = 3  # `history check`'s exit code when no gated series has enough runs


def run_dirs_under(root: Path) -> list[Path]:
    """Every run directory below `root` (itself included): a directory holding run.json or results.jsonl."""
    found = {p.parent for name in ("run.json", "results.jsonl") for p in root.rglob(name)}
    return sorted(d for d in found if d.name != "references" and "references" not in d.parts)


def append_run(run_dir: Path, path: Path | None = None) -> RunRows:
    """Appends one run directory; its rows, with the problems met reading it (what could be read is stored)."""
    return append_rows(run_rows(run_dir), path)


def append_rows(rows: RunRows, path: Path | None = None) -> RunRows:
    """Appends a run read already (qualify's end reads its run once, harness/qualify/finish.py)."""
    store.append(rows, path)
    return rows


def cmd_append(args: argparse.Namespace) -> int:
    for run in args.run:
        run_dir = Path(run) if Path(run).is_dir() else REPORTS_DIR / run
        if not run_dir.is_dir():
            raise store.HistoryError(f"history append --run {run!r}: no run directory there (looked in . and "
                                     f"{REPORTS_DIR})")
        rows = append_run(run_dir)
        for problem in rows.problems:
            print(f"warning: {run_dir.name}: {problem}", file=sys.stderr)
        print(f"appended run {rows.run.run_id} ({run_dir}) to {store.history_path()}")
    return 0


def cmd_backfill(args: argparse.Namespace) -> int:
    roots = [Path(r) for r in args.dirs] or [REPORTS_DIR]
    missing = [str(r) for r in roots if not r.is_dir()]
    if missing:
        raise store.HistoryError(f"history backfill: {', '.join(missing)}: not a directory; name directories that "
                                 "hold run directories (default reports/)")
    dirs = [d for root in roots for d in run_dirs_under(root)]
    for d in dirs:
        problems = append_run(d).problems
        print(f"appended {d}" + (f" ({len(problems)} problems; first: {problems[0]})" if problems else ""))
    print(f"{len(dirs)} run directories appended to {store.history_path()}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with store.connect() as db:
        rows = store.runs(db, args.arm)[-args.last:]
    print(tabulate([(r.run_id, r.started, r.status, r.exit_code, r.candidates, r.host,
                     r.git_commit and r.git_commit[:10], r.calibration or "") for r in rows],
                   headers=["run", "started", "status", "exit", "candidates", "host", "commit", "calibration"],
                   tablefmt="github"))
    return 0


def arm_metrics(db: sqlite3.Connection, command: str, arm: str) -> list[str]:
    """The arm's metric names; an arm the store holds none of is refused, naming the arms it does hold."""
    metrics = store.metric_names(db, arm)
    if not metrics:
        arms = store.arm_names(db)
        raise store.HistoryError(f"history {command} --arm {arm!r}: no metric of that arm in "
                                 f"{store.named(store.history_path())}; its arms: {', '.join(arms) or 'none yet'}")
    return metrics


def chosen_metrics(arm: str, asked: list[str] | None, known: list[str]) -> list[str]:
    """The metrics named (default: every one); a name the arm does not have is refused, naming close or first ones."""
    unknown = [m for m in asked or [] if m not in known]
    if unknown:
        like = difflib.get_close_matches(unknown[0], known, n=3) or known[:3]
        raise store.HistoryError(f"history trend --metric {unknown[0]!r}: arm {arm} has no such metric; its "
                                 f"{len(known)} metrics include {', '.join(like)} (without --metric: every one)")
    return asked or known


def cmd_trend(args: argparse.Namespace) -> int:
    from harness.history.trends import family, findings, series  # ruptures and scipy: only where a series is judged

    with store.connect() as db:
        for metric in chosen_metrics(args.arm, args.metric, arm_metrics(db, "trend", args.arm)):
            s = series(db, args.arm, metric)
            found = findings(s)
            cps = {f.key: f for f in found}
            print(f"\n{args.arm} {metric} ({family(metric)}): {len(s.values)} finished runs, "
                  f"{len(found)} change point(s)")
            rows = [(r, f"{v:.6g}", cps[k].sentence() if k in cps else "")
                    for r, k, v in list(zip(s.runs, s.keys or s.runs, s.values, strict=True))[-args.last:]]
            print(tabulate(rows, headers=["run", "value", "change point"], tablefmt="github"))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.history.trends import series, violated, windows  # ruptures and scipy: only where a series is judged

    with store.connect() as db:
        out = []
        for metric in arm_metrics(db, "compare", args.arm):
            s = series(db, args.arm, metric)
            w = windows(s, args.baseline, args.window)
            out.append((metric, len(w.baseline), len(w.recent), f"{w.ratio:.3f}" if w.ratio else "n/a",
                        "FLAGGED" if violated(s, w) else "ok"))
    print(tabulate(out, headers=["metric", "baseline runs", "recent runs", "median recent / baseline", "window rule"],
                   tablefmt="github"))
    return 0


def cmd_coverage(args: argparse.Namespace) -> int:
    with store.connect() as db:
        arm_metrics(db, "coverage", args.arm)  # an arm the store does not hold: refused, not an empty answer
        rows = store.coverage(db, args.arm)
    for line in coverage_lines(rows):
        print(line)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from harness.history.nightly import BUDGET, power_lines
    from harness.history.trends import nightly  # ruptures and scipy: only where a series is judged

    with store.connect() as db:
        key = store.run_key(db, args.run)
        known = {r.run_key: r for r in store.runs(db)}
        if key is None:
            raise store.HistoryError(f"history check --run {args.run!r}: not in {store.history_path()}; append it "
                                     "first (qualify does, or `harness history append --run RUN`)")
        if known[key].status != "finished":
            print(f"FAIL: run {args.run} was interrupted: its metrics are partial and are not judged as a night")
            return 1
        if known[key].calibration:
            print(f"FAIL: run {args.run} is a calibration repeat ({known[key].calibration}): no nightly run; "
                  "`harness calibrate` judges its repeats")
            return 1
        verdict = nightly(db, args.run)
    for line in verdict.failures:
        print(f"FAIL: {line}")
    for line in verdict.notes:
        print(f"note: {line}")
    for line in verdict.short:
        print(f"not judged: {line} (not enough history)")
    power = power_lines(verdict)
    if power:
        print(f"power at a false-alarm budget of {BUDGET:.0%} of clean nights over {verdict.family_size} gated series:")
        print("\n".join(f"  {line}" for line in power))
    print(verdict.headline(args.run))
    # 3: nothing could be judged (too few runs): not a PASS, and no regression either; the pipeline says which
    return 0 if verdict.passed else (1 if verdict.failures else NOT_JUDGED)


def cmd_prune(args: argparse.Namespace) -> int:
    with store.connect() as db:
        print(f"pruned {store.prune(db, args.keep)} runs from {store.history_path()}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("history", help="every run in one store ($HARNESS_HISTORY, default reports/history.sqlite): "
                       "list, trends with change points, the nightly check")
    hs = p.add_subparsers(dest="history_command", required=True)
    a = hs.add_parser("append", help="append finished (or interrupted) run directories; qualify does it itself")
    a.add_argument("--run", nargs="+", required=True, help="run ids or directories")
    a.set_defaults(func=cmd_append)
    a = hs.add_parser("backfill", help="append every run directory found under DIRS (default reports/)")
    a.add_argument("dirs", nargs="*")
    a.set_defaults(func=cmd_backfill)
    a = hs.add_parser("list", help="the runs, oldest first")
    a.add_argument("--arm")
    a.add_argument("--last", type=int, default=50)
    a.set_defaults(func=cmd_list)
    a = hs.add_parser("trend", help="an arm's metric(s) over the runs, change points marked")
    a.add_argument("--arm", required=True)
    a.add_argument("--metric", action="append", help="e.g. long_prefix.c1.tpot_p50_ms (default: every metric)")
    a.add_argument("--last", type=whole_number(1), default=30)
    a.set_defaults(func=cmd_trend)
    a = hs.add_parser("compare", help="PyTorch HUD's windows: the last runs against the ones before them")
    a.add_argument("--arm", required=True)
    a.add_argument("--baseline", type=int, default=6, help="runs in the baseline window (default 6)")
    a.add_argument("--window", type=int, default=2, help="recent runs compared (default 2)")
    a.set_defaults(func=cmd_compare)
    a = hs.add_parser("coverage", help="the context lengths and batch sizes each check covered, over every run")
    a.add_argument("--arm", required=True)
    a.set_defaults(func=cmd_coverage)
    a = hs.add_parser("check", help="the nightly verdict: exit 1 on a lasting change against the established "
                      "level (a gated series' regression, or a speed-up on the night outputs changed) at a false-alarm "
                      "budget of 1 %% of clean nights; 3 when no gated series has enough runs (NOT JUDGED)")
    a.add_argument("--run", required=True, help="run id")
    a.set_defaults(func=cmd_check)
    a = hs.add_parser("prune", help="keep only the newest N runs (N >= 1: to drop every run, delete the store file)")
    a.add_argument("--keep", type=whole_number(1, why=" (to drop every run, delete the store file)"), required=True,
                   metavar="N")
    a.set_defaults(func=cmd_prune)
