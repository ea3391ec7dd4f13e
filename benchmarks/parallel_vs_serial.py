"""Two runs of the same arms, serial and parallel (scripts/device_parallel.sh): wall time ratio and whether their
tables agree row for row on everything but the measured numbers.

    python benchmarks/parallel_vs_serial.py <serial run dir> <parallel run dir>

Wall time: the run.json start/end (seconds), or `qualify_wall_s` beside the run directory when the device script
wrote it. Prints one line per table (same rows or the difference) and the ratio (target <= 0.6).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

# key and verdict columns per table: measured numbers differ from run to run
KEYS = {"kv_capacity": ["Arm", "TP/DCP"], "performance": ["Arm", "Conc", "Failed"], "accuracy": ["Arm"],
        "gates": ["Gate", "Arm vs reference", "Verdict"], "checks": ["Suite", "Arm", "Test", "Outcome"],
        "reference_checks": ["Arm vs reference", "Check", "Verdict"]}


def rows(run: Path, table: str) -> list[tuple] | None:
    path = run / "tables" / f"{table}.json"
    if not path.is_file():
        return None
    return sorted(tuple(r.get(k) for k in KEYS[table]) for r in json.loads(path.read_text()))


def wall_s(run: Path) -> float | None:
    for candidate in (run.parent / "qualify_wall_s", run.parent.parent / "qualify_wall_s"):
        if candidate.is_file():
            return float(candidate.read_text())
    info = json.loads((run / "run.json").read_text())
    if "started" in info and "finished" in info:
        fmt = "%Y-%m-%dT%H:%M:%S%z"
        return (datetime.strptime(info["finished"], fmt) - datetime.strptime(info["started"], fmt)).total_seconds()
    return None


def main(serial: Path, parallel: Path) -> int:
    same = True
    for table in KEYS:
        a, b = rows(serial, table), rows(parallel, table)
        if a == b:
            print(f"{table}: same rows ({'absent in both' if a is None else len(a)})")
        else:
            same = False
            print(f"{table}: DIFFER\n  serial:   {a}\n  parallel: {b}")
    ws, wp = wall_s(serial), wall_s(parallel)
    print(f"wall: serial {ws} s, parallel {wp} s" + (f", ratio {wp / ws:.3f} (target <= 0.6)" if ws and wp else ""))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]), Path(sys.argv[2])))
