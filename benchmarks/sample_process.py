"""Sample one process's own footprint (not its children's: the servers are separate processes) while it runs:
RSS and CPU time every interval, each sample appended to a JSONL file as it is taken; a summary line at the end.

    python benchmarks/sample_process.py <pid> <out.jsonl> [--interval 0.5]

Used by scripts/device_long_prefix_120k.sh on the harness's `qualify` process (target: peak RSS <= 300 MB).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import psutil


def summary(samples: list[tuple[float, float, float]]) -> dict:
    """(t_s, rss_mb, cpu_s) samples -> peak RSS, final CPU time, wall (pure)."""
    if not samples:
        return {"samples": 0}
    return {"samples": len(samples), "peak_rss_mb": round(max(s[1] for s in samples), 1),
            "cpu_s": round(samples[-1][2], 2), "wall_s": round(samples[-1][0], 1)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("pid", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args()
    proc = psutil.Process(args.pid)
    t0, taken = time.monotonic(), []
    with args.out.open("a") as f:
        while True:
            try:
                with proc.oneshot():
                    rss, cpu = proc.memory_info().rss / 2**20, sum(proc.cpu_times()[:2])
            except psutil.Error:
                break  # the process ended
            sample = (round(time.monotonic() - t0, 2), round(rss, 1), round(cpu, 2))
            taken.append(sample)  # three floats per sample; the rows go to disk as they come
            f.write(json.dumps(dict(zip(("t_s", "rss_mb", "cpu_s"), sample, strict=True))) + "\n")
            f.flush()
            time.sleep(args.interval)
    print(json.dumps(summary(taken)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
