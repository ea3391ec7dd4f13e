"""Measurement truth for the ttft suite: its client's TTFT against the server's own TTFT histogram, on one running
server, the suite's own prompts and requests (harness.measure.prompts.metric_prompts, one at a time).

    .venv/bin/python benchmarks/ttft_vs_server_histogram.py [--arm cpu-smoke] [--workload ttft_short] [--rounds 3]

Per round (a cache salt each, so no round reuses another's KV): /metrics scraped, the suite's measured requests
sent, /metrics scraped again; the server's TTFT over the
requests of that window from `vllm:time_to_first_token_seconds` (its median by Prometheus's histogram_quantile,
bucket-limited, and its mean from _sum/_count, which no bucket rounds). The client's TTFT includes the HTTP round
trip and the first chunk's delivery; the server's starts when the request arrives. Prints each round's client and
server medians and means and their ratios. Not part of `make test`: it measures, it does not assert.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from statistics import mean, median

from histograms import server_p50  # benchmarks/

from harness.config.arms import load_arm
from harness.config.workloads import MetricWorkload, load_workload
from harness.measure.loadgen import Endpoint, run_level
from harness.measure.metrics import fetch_metrics
from harness.measure.prompts import metric_prompts, token_space
from harness.serve.launch import launch


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arm", default="cpu-smoke")
    ap.add_argument("--workload", default="ttft_short")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", help="write the rounds as JSON here")
    args = ap.parse_args()
    arm = load_arm(args.arm)
    w = load_workload(args.workload, kind=MetricWorkload)
    warmup, measured = metric_prompts(w, token_space(arm, w))
    live = launch(arm, Path("/tmp") / f"ttft-bench-{arm.name}")
    rows = []
    try:
        base, model, timeout = live.info.base_url, arm.model.served_name, arm.timeouts.request_s
        to = Endpoint(base, model, timeout, live.server.check_alive)
        asyncio.run(run_level(to, warmup, w.output_tokens, 1, 0))
        for i in range(args.rounds):
            before = fetch_metrics(base)
            # each round under a cache salt of its own: the same prompts again would be prefix-cache hits
            run = asyncio.run(run_level(to, measured, w.output_tokens, 1, 1, extra={"cache_salt": f"ttft-round-{i}"}))
            server = server_p50(before, fetch_metrics(base))
            client = [s.ttft_s for s in run.samples if s.ok]
            row = {"round": i + 1, "n": len(client), "client_p50": median(client), "client_mean": mean(client),
                   "server_p50": server["ttft"], "server_p50_bucket": server["ttft_bucket"],
                   "server_mean": server["ttft_mean"]}
            row["p50_ratio"] = row["client_p50"] / row["server_p50"] if row["server_p50"] else None
            row["mean_ratio"] = row["client_mean"] / row["server_mean"] if row["server_mean"] else None
            rows.append(row)
            print(f"round {i + 1}: n {row['n']}, client p50 {row['client_p50'] * 1e3:.2f} ms, server p50 "
                  f"{(row['server_p50'] or 0) * 1e3:.2f} ms (bucket {row['server_p50_bucket']}), ratio "
                  f"{row['p50_ratio']:.2f}; means {row['client_mean'] * 1e3:.2f} vs "
                  f"{(row['server_mean'] or 0) * 1e3:.2f} ms, ratio {row['mean_ratio']:.2f}, client - server "
                  f"{(row['client_mean'] - (row['server_mean'] or 0)) * 1e3:.2f} ms")
    finally:
        live.server.stop()
    print(f"median ratio client/server: p50 {median(r['p50_ratio'] for r in rows):.2f}, "
          f"mean {median(r['mean_ratio'] for r in rows):.2f}; client - server mean "
          f"{median(r['client_mean'] - r['server_mean'] for r in rows) * 1e3:.2f} ms")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
