"""Where a calibration repeat's (or any qualify run's) time goes: one table row per run, from what the run left on
disk -- run.json (start, end), junit.xml (pytest's start and each suite's test time), results.jsonl (each server's
startup_s) and the server logs (vLLM's own weight loading, torch.compile, CUDA-graph capture and engine init lines,
and whether the compile came from the cache).

    python benchmarks/repeat_timing.py RUN_DIR [RUN_DIR ...] [--json OUT]

Columns (seconds): setup (qualify's start to pytest's), servers (sum of startup_s), of which compile / capture / load
(vLLM's lines, summed over servers), each suite's test time (servers started inside a suite count there too),
finishing (pytest's end to run.json's end: judging, report, history) and wall. The figures are the run's own; a
table for the evidence pages names the card they were measured on.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

# vLLM 0.25.0's log lines ("took" there, "takes" in older releases) (vllm/compilation/backends.py, monitor.py; v1/worker/gpu_model_runner.py; v1/engine/core.py)
LOG_LINES = {
    "compile": re.compile(r"torch\.compile (?:takes|took) ([\d.]+) s in total"),
    "capture": re.compile(r"Graph capturing finished in ([\d.]+) secs"),
    "load": re.compile(r"Model loading took [^\n]*? and ([\d.]+) s(?:econds)?"),
    "engine_init": re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
}
CACHE_HIT = re.compile(r"Directly load the compiled graph")


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S"):
        try:
            return datetime.strptime(text, fmt).timestamp()
        except ValueError:
            continue
    return None


def log_seconds(text: str) -> dict[str, float]:
    """vLLM's own timings in one server log (pure): each LOG_LINES kind summed, and cache_hits (lines saying the
    compiled graph came from the cache)."""
    out = {k: round(sum(float(m) for m in p.findall(text)), 1) for k, p in LOG_LINES.items()}
    out["cache_hits"] = len(CACHE_HIT.findall(text))
    return out


def junit_suites(path: Path) -> tuple[float | None, float | None, dict[str, float]]:
    """(pytest's start, its total time, {suite file: summed test time}) from junit.xml; Nones when absent."""
    if not path.is_file():
        return None, None, {}
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return None, None, {}
    per: dict[str, float] = {}
    for case in suite.iter("testcase"):
        name = (case.get("classname") or "?").split(".")[-1].removeprefix("test_")
        per[name] = round(per.get(name, 0.0) + float(case.get("time") or 0), 1)
    return parse_time(suite.get("timestamp")), float(suite.get("time") or 0), per


def servers(run_dir: Path) -> list[dict]:
    """Each server launch of the run: arm, startup_s and the log's timings."""
    out = []
    results = run_dir / "results.jsonl"
    if not results.is_file():
        return out
    for line in results.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("kind") != "server":
            continue
        log = Path(rec.get("log_path") or "")
        if not log.is_file():
            log = run_dir / rec.get("arm", "") / "server.log"
        text = log.read_text(errors="replace") if log.is_file() else ""
        out.append({"arm": rec.get("arm"), "startup_s": rec.get("startup_s") or 0.0, **log_seconds(text)})
    return out


def run_timing(run_dir: Path) -> dict:
    manifest = json.loads((run_dir / "run.json").read_text())
    started, finished = parse_time(manifest.get("started")), parse_time(manifest.get("finished"))
    py_start, py_total, suites = junit_suites(run_dir / "junit.xml")
    launched = servers(run_dir)
    row = {"run": run_dir.name, "servers": len(launched),
           "setup": round(py_start - started, 1) if py_start and started else None,
           "server_start": round(sum(s["startup_s"] for s in launched), 1),
           **{k: round(sum(s[k] for s in launched), 1) for k in ("compile", "capture", "load", "engine_init")},
           "cache_hits": sum(s["cache_hits"] for s in launched),
           "suites": suites,
           "finishing": round(finished - (py_start + py_total), 1) if finished and py_start and py_total else None,
           "wall": round(finished - started, 1) if finished and started else None}
    return row


def table(rows: list[dict]) -> str:
    suites = sorted({s for r in rows for s in r["suites"]})
    head = ["run", "wall", "setup", "servers", "server_start", "load", "compile", "capture", "engine_init",
            "cache_hits", *suites, "finishing"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.get(h) if h not in suites else r["suites"].get(h) for h in head]
        lines.append("| " + " | ".join("" if c is None else str(c) for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    missing = [str(r) for r in args.runs if not (r / "run.json").is_file()]
    if missing:
        print(f"error: no run.json in {', '.join(missing)}: give run directories", file=sys.stderr)
        return 2
    rows = [run_timing(r) for r in args.runs]
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
