"""Kill matrix of the DCP mutation benchmark: fault x op case -> caught / missed, with the measured error.

    python -m harness.faults.kill_matrix RESULTS_DIR [--out kill_matrix]

RESULTS_DIR holds clean.json and faults/<fault>/ops.json (harness.opcheck.runner outputs), optionally
faults/<fault>/e2e.rc and clean_e2e.rc (exit codes of the end-to-end command). A case catches a fault when it
PASSes on clean vLLM and not under the fault; a run that broke (no JSON, rank died) counts as caught, marked so.
Writes <out>.json, <out>.md and <out>.csv (the full fault x case grid).

    python -m harness.faults.kill_matrix RESULTS_DIR --length [--out length_kill_matrix]

Length-dependent faults (harness/faults/length_faults), end to end: RESULTS_DIR/length_runs.json lists qualify
runs, {"runs": [{"fault": null | NAME, "length": null | L, "run_dir": DIR (relative to RESULTS_DIR), "arm": CANDIDATE,
"exit_code": N}, ...]}, the fault-free control first. Each check of the candidate is read from its run's
results.jsonl: long_context, long_prefix_outputs, the TPOT gate (caught only when it reads "outputs invalid": a
timing failure is no catch), prefix_reuse, graph_replay, teacher_forcing, and the TPOT ratio alone (what the gate
judged before outputs counted). A check catches a fault when it PASSes on the control and FAILs (or aborts) under it.
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
    ap.add_argument("--out", default=None, help="kill_matrix (length_kill_matrix with --length)")
    ap.add_argument("--length", action="store_true", help="the length-fault matrix from length_runs.json")
    args = ap.parse_args(argv)
    d = args.results_dir
    if args.length:
        return length_main(d, args.out or "length_kill_matrix")
    args.out = args.out or "kill_matrix"
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


# --- length-dependent faults, end to end ------------------------------------------------------------------------------
LENGTH_CHECKS = ("long_context", "long_prefix_outputs", "tpot_gate", "prefix_reuse", "graph_replay", "teacher_forcing",
                 "tpot_timing")
TODAY = ("prefix_reuse", "graph_replay", "teacher_forcing", "tpot_timing")  # the checks before issue 22
TPOT_GATE = "long_prefix_tpot_p50"
TPOT_TOLERANCE = 0.05  # gates.yaml defaults.long_prefix.tpot_p50_tolerance: what tpot_timing reads as a regression


def read_records(results: Path) -> list[dict]:
    if not results.is_file():
        return []
    out = []
    for line in results.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn last line of a killed run
    return out


def _state(found: list[dict], passed_of) -> dict:
    if not found:
        return {"state": "absent"}
    if any(r.get("status") == "aborted" for r in found):
        r = next(r for r in found if r.get("status") == "aborted")
        return {"state": "aborted", "why": (r.get("reason") or "")[:200]}
    bad = [r for r in found if not passed_of(r)]
    reach = [r["checked_to_tokens"] for r in found if r.get("checked_to_tokens") is not None]
    return {"state": "FAIL" if bad else "PASS", "why": ((bad or found)[0].get("detail") or "")[:200],
            **({"checked_to_tokens": max(reach)} if reach else {})}


def run_checks(records: list[dict], cand: str) -> dict[str, dict]:
    """check -> {"state": PASS | FAIL | aborted | absent, "why", ...} for one candidate's records (the latest
    record per check and reference; graph_replay's comparison with an eager variant counts too)."""
    latest: dict[tuple, dict] = {}
    for r in records:
        if r.get("arm") == cand:
            latest[(r.get("kind"), r.get("check") or r.get("gate") or r.get("concurrency"), r.get("reference"))] = r
    recs = list(latest.values())
    out = {}
    lc = [r for r in recs if r.get("kind") == "long_context"]
    out["long_context"] = _state(lc, lambda r: r.get("passed"))
    if lc:
        out["long_context"]["first_failing_length"] = lc[-1].get("first_failing_length")
        out["long_context"]["checked_to_tokens"] = lc[-1].get("checked_to_tokens")
    for check in ("long_prefix_outputs", "prefix_reuse", "graph_replay", "teacher_forcing"):
        out[check] = _state([r for r in recs if r.get("kind") == "reference_check" and r.get("check") == check],
                            lambda r: r.get("passed"))
    # A gate that had no timing to judge ("no data: no long_prefix record": the faulted server never started) did
    # not run: it must read "not run", not "missed".
    gate = [r for r in recs if r.get("kind") == "gate" and r.get("gate") == TPOT_GATE
            and not (r.get("detail") or "").startswith("no data")]
    out["tpot_gate"] = _state(gate, lambda r: "outputs invalid" not in (r.get("detail") or ""))
    out["tpot_timing"] = tpot_timing(records, cand)
    return out


def tpot_timing(records: list[dict], cand: str) -> dict:
    """The TPOT gate as it was before outputs counted: candidate p50 / reference p50 at each concurrency."""
    lp = [r for r in records if r.get("kind") == "long_prefix" and r.get("status") == "complete"]
    mine = {r["concurrency"]: r for r in lp if r.get("arm") == cand}
    refs = {r.get("reference") for r in records if r.get("kind") == "gate" and r.get("arm") == cand}
    theirs = {r["concurrency"]: r for r in lp if r.get("arm") in refs}
    ratios = {}
    for c in sorted(mine.keys() & theirs.keys()):
        a, b = (mine[c].get("tpot") or {}).get("p50"), (theirs[c].get("tpot") or {}).get("p50")
        if a and b:
            ratios[f"c{c}"] = a / b
    if not ratios:
        return {"state": "absent"}
    worst = max(ratios.values())
    return {"state": "PASS" if worst <= 1 + TPOT_TOLERANCE else "FAIL", "ratios": ratios,
            "why": ", ".join(f"{k} x{v:.3f}" for k, v in ratios.items())}


def length_cell(clean: dict, got: dict, length: int | None = None) -> dict:
    """A check not run under the fault, whose longest context on the control stayed below L, missed it by
    construction: each fault is the identity wherever every position is below L."""
    if clean.get("state") != "PASS":
        return {"status": "n/a", "why": f"control: {clean.get('state')}"}
    if got.get("state") == "absent":
        reach = clean.get("checked_to_tokens")
        if length is not None and reach is not None and reach < length:
            return {"status": "missed", "by_reach": reach}
        return {"status": "not run"}
    if got["state"] == "PASS":
        return {"status": "missed", **{k: v for k, v in got.items() if k != "state"}}
    return {"status": "caught", **{k: v for k, v in got.items() if k != "state"},
            **({"aborted": True} if got["state"] == "aborted" else {})}


def not_run(cells: dict[str, dict]) -> bool:
    """No check ran under the fault (its server never started): nothing caught or missed it."""
    states = {v["status"] for v in cells.values()}
    return "not run" in states and states <= {"not run", "n/a"}


def build_length(clean: dict[str, dict], faults: list[dict]) -> dict:
    """faults: [{"fault", "length", "checks" (run_checks), "exit_code"}] -> the fault x L x check matrix."""
    rows = []
    for f in faults:
        cells = {c: length_cell(clean.get(c, {"state": "absent"}), f["checks"].get(c, {"state": "absent"}),
                                f["length"]) for c in LENGTH_CHECKS}
        rows.append({"fault": f["fault"], "length": f["length"], "exit_code": f.get("exit_code"),
                     "verdict": f.get("verdict"), "cells": cells,
                     "caught_by": [c for c, v in cells.items() if v["status"] == "caught"],
                     "not_run": not_run(cells),
                     "today_missed": all(cells[c]["status"] != "caught" for c in TODAY) and not not_run(cells)})
    return {"checks": list(LENGTH_CHECKS), "today": list(TODAY), "clean": clean, "rows": rows}


def _length_fmt(check: str, v: dict) -> str:
    s = {"caught": "CAUGHT", "missed": "missed"}.get(v["status"], v["status"])
    if v["status"] == "caught" and check == "long_context" and v.get("first_failing_length"):
        s += f" (first failing {v['first_failing_length']:,})"
    if v.get("aborted"):
        s += " (aborted)"
    if v.get("by_reach") is not None:
        s += f" (checks to {v['by_reach']:,} < L)"
    if check == "tpot_timing" and v.get("ratios"):
        s += " " + "/".join(f"x{r:.2f}" for r in v["ratios"].values())
    return s


def length_markdown(m: dict) -> str:
    names = {"long_prefix_outputs": "long_prefix outputs", "tpot_gate": "TPOT gate (outputs invalid)",
             "tpot_timing": "TPOT ratio alone (before)"}
    clean = ", ".join(f"{c} {m['clean'].get(c, {}).get('state', 'absent')}" for c in m["checks"])
    clean += f"; qualify {m['clean'].get('verdict') or 'exit ' + str(m['clean'].get('exit_code'))}"
    head = [names.get(c, c) + (" (today)" if c in m["today"] else "") for c in m["checks"]]
    lines = [f"Control (no fault): {clean}", "",
             "| fault | L | " + " | ".join(head) + " | qualify |", "|---|---:|" + "---|" * (len(head) + 1)]
    for r in m["rows"]:
        cells = " | ".join(_length_fmt(c, r["cells"][c]) for c in m["checks"])
        verdict = r.get("verdict") or f"exit {r['exit_code']}"
        lines.append(f"| {r['fault']} | {r['length']:,} | {cells} | {verdict} |")
    missed = [f"{r['fault']}@{r['length']}" for r in m["rows"] if r["today_missed"]]
    lines += ["", f"Missed by every check of today ({', '.join(m['today'])}): {', '.join(missed) or 'none'}."]
    not_run = [f"{r['fault']}@{r['length']}" for r in m["rows"] if r.get("not_run")]
    if not_run:
        lines.append(f"Not run (no check recorded anything: see the run's report): {', '.join(not_run)}.")
    return "\n".join(lines) + "\n"


def length_main(d: Path, out: str) -> int:
    try:
        runs = json.loads((d / "length_runs.json").read_text())["runs"]
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {d / 'length_runs.json'}: {exc}", file=sys.stderr)
        return 2
    control = [r for r in runs if not r.get("fault")]
    if not control:
        print(f"error: {d / 'length_runs.json'} lists no control run (fault null)", file=sys.stderr)
        return 2
    clean = run_checks(read_records(d / control[0]["run_dir"] / "results.jsonl"), control[0]["arm"])
    clean["exit_code"] = control[0].get("exit_code")
    clean["verdict"] = control[0].get("verdict")
    faults = [{"fault": r["fault"], "length": r["length"], "exit_code": r.get("exit_code"), "verdict": r.get("verdict"),
               "checks": run_checks(read_records(d / r["run_dir"] / "results.jsonl"), r["arm"])}
              for r in runs if r.get("fault")]
    m = build_length(clean, faults)
    (d / f"{out}.json").write_text(json.dumps(m, indent=1, default=float))
    (d / f"{out}.md").write_text(length_markdown(m))
    with (d / f"{out}.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["fault", "L", *m["checks"], "exit_code"])
        for r in m["rows"]:
            w.writerow([r["fault"], r["length"], *(_length_fmt(c, r["cells"][c]) for c in m["checks"]),
                        r["exit_code"]])
    print(length_markdown(m))
    return 0


if __name__ == "__main__":
    sys.exit(main())
