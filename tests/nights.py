"""A series of nightly runs built from one real run directory: its run.json and results.jsonl copied per night, a day
apart, the candidate's long-prefix TPOT scaled by seeded run-to-run noise and, from night `slow_from` on, by a planted
slowdown; from night `drift_from` on, its reference checks' max drift moved by `drift_step` (a correctness step).
What the history's tests feed `harness history` (the real records' every other field unchanged)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

START = datetime(2026, 11, 1, 2, 0)


def scaled(record: dict, factor: float) -> dict:
    for summary in ("tpot", "itl"):
        record[summary] = {k: (v * factor if k in ("mean", "p50", "p90", "p99") and v is not None else v)
                           for k, v in record[summary].items()}
    return record


def drifted(record: dict, step: float) -> dict:
    """A reference check's record with its max drift moved by `step` (a planted correctness step)."""
    return {**record, "max_drift": (record.get("max_drift") or 0.0) + step}


def make_nights(source: Path, out: Path, count: int, slow_from: int | None = None, step: float = 0.10,
                sigma: float = 0.03, seed: int = 0, prefix: str = "night", drift_from: int | None = None,
                drift_step: float = 0.01) -> list[Path]:
    manifest = json.loads((source / "run.json").read_text())
    candidates = {p["candidate"] for p in manifest.get("pairs", [])}
    lines = [json.loads(line) for line in (source / "results.jsonl").read_text().splitlines() if line.strip()]
    noise = np.exp(np.random.default_rng(seed).normal(0, sigma, count))
    dirs = []
    for i in range(count):
        run_id = f"{prefix}-{i:02d}"
        factor = float(noise[i]) * (1 + step if slow_from is not None and i >= slow_from else 1)
        night = out / run_id
        night.mkdir(parents=True)
        when = START + timedelta(days=i)
        (night / "run.json").write_text(json.dumps({**manifest, "run_id": run_id,
                                                    "started": when.strftime("%Y-%m-%dT%H:%M:%S+0000"),
                                                    "finished": (when + timedelta(hours=1)).strftime(
                                                        "%Y-%m-%dT%H:%M:%S+0000")}))
        records = [scaled(dict(r), factor) if r.get("kind") == "long_prefix" and r.get("arm") in candidates
                   else r for r in lines]
        if drift_from is not None and i >= drift_from:
            records = [drifted(r, drift_step) if r.get("kind") == "reference_check" and r.get("arm") in candidates
                       else r for r in records]
        (night / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        dirs.append(night)
    return dirs
