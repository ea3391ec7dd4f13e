"""Kill matrix of the DCP mutation benchmark: fault x op case -> caught / missed, with the measured error.

    python benchmarks/dcp_kill_matrix.py RESULTS_DIR [--out kill_matrix]

RESULTS_DIR holds clean.json and faults/<fault>/ops.json (harness.opcheck.runner outputs), optionally
faults/<fault>/e2e.rc and clean_e2e.rc (exit codes of the end-to-end command). A case catches a fault when it
PASSes on clean vLLM and not under the fault; a run that broke (no JSON, rank died) counts as caught, marked so.
Writes <out>.json, <out>.md and <out>.csv (the full fault x case grid).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path


def cell(clean_row: dict | None, row: dict | None) -> dict:
    if clean_row is None or clean_row["verdict"] != "PASS":
        return {"status": "n/a", "why": "not PASS on clean vLLM"}
    if row is None:
        return {"status": "caught", "why": "case missing from the fault run"}
    if row["verdict"] == "PASS":
        return {"status": "missed", "err": row["max_abs_err"], "limit": row["limit"]}
    return {"status": "caught", "verdict": row["verdict"], "err": row.get("max_abs_err"), "limit": row.get("limit"),
            "why": (row.get("detail") or "")[:200]}


def build(clean: dict, faults: dict[str, dict | None], e2e: dict[str, int | None] | None = None,
          clean_e2e: int | None = None) -> dict:
    e2e = e2e or {}
    clean_rows = {r["id"]: r for r in clean.get("cases", [])}
    out = {"clean": {"status": clean.get("status"), "summary": clean.get("summary"),
                     "vllm_version": clean.get("vllm_version"), "e2e_rc": clean_e2e},
           "cases": list(clean_rows), "faults": {}}
    for name, res in faults.items():
        if res is None or res.get("status") in (None, "skipped"):
            why = "no result" if res is None else f"skipped: {res.get('reason')}"
            cells = {cid: {"status": "caught" if res is None else "n/a", "why": why} for cid in clean_rows}
            broke = res is None
        else:
            rows = {r["id"]: r for r in res.get("cases", [])}
            cells = {cid: cell(clean_rows[cid], rows.get(cid)) for cid in clean_rows}
            broke = res.get("status") == "broken"
        caught = [c for c, v in cells.items() if v["status"] == "caught"]
        rc = e2e.get(name)
        out["faults"][name] = {
            "killed_by_ops": bool(caught), "caught": len(caught),
            "missed": sum(v["status"] == "missed" for v in cells.values()),
            "run_broke": broke, "cells": cells,
            "e2e": None if rc is None else ("caught" if rc != 0 else "missed") + f" (rc {rc})",
        }
    return out


def _fmt(v: dict) -> str:
    if v["status"] in ("caught", "missed") and v.get("err") is not None:
        return f"{v['status']} {v['err']:.3g}/{v['limit']:.3g}"
    return v["status"]


def markdown(m: dict) -> str:
    lines = [f"Clean vLLM {m['clean']['vllm_version']}: op suite {m['clean']['status']} {m['clean']['summary']}"
             + (f", e2e rc {m['clean']['e2e_rc']}" if m["clean"]["e2e_rc"] is not None else ""), "",
             "| fault | op suite | cases caught / missed | strongest catch (err / limit) | e2e |",
             "|---|---|---|---|---|"]
    for name, f in m["faults"].items():
        best = max(((c, v) for c, v in f["cells"].items() if v["status"] == "caught"),
                   key=lambda cv: _strength(cv[1]), default=None)
        best_s = "-" if best is None else f"{best[0]}: {_fmt(best[1])}"
        verdict = "CAUGHT" if f["killed_by_ops"] else ("MISSED" if f["missed"] else "n/a (no case PASSes clean)")
        lines.append(f"| {name} | {verdict}{' (run broke)' if f['run_broke'] else ''} | {f['caught']} / {f['missed']} "
                     f"| {best_s} | {f['e2e'] or 'not run'} |")
    return "\n".join(lines) + "\n"


def _strength(v: dict) -> float:
    err, limit = v.get("err"), v.get("limit")
    if err is None:
        return float("inf")
    return err / limit if limit else float("inf")


def write_csv(m: dict, path: Path) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["fault"] + m["cases"] + ["e2e"])
        for name, f in m["faults"].items():
            w.writerow([name] + [_fmt(f["cells"][c]) for c in m["cases"]] + [f["e2e"] or "not run"])


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _rc(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results_dir", type=Path)
    ap.add_argument("--out", default="kill_matrix")
    args = ap.parse_args(argv)
    d = args.results_dir
    clean = _load(d / "clean.json")
    if clean is None:
        print(f"error: no clean control result at {d / 'clean.json'}", file=sys.stderr)
        return 2
    fault_dirs = sorted(p for p in (d / "faults").glob("*") if p.is_dir())
    m = build(clean, {p.name: _load(p / "ops.json") for p in fault_dirs},
              {p.name: _rc(p / "e2e.rc") for p in fault_dirs}, _rc(d / "clean_e2e.rc"))
    (d / f"{args.out}.json").write_text(json.dumps(m, indent=1, default=float))
    (d / f"{args.out}.md").write_text(markdown(m))
    write_csv(m, d / f"{args.out}.csv")
    print(markdown(m))
    return 0


if __name__ == "__main__":
    sys.exit(main())
