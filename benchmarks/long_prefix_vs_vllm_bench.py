"""Measurement truth for the long-prefix suite: the harness's client vs `vllm bench serve` vs the server's
own histograms, on one running server and the same workload shape.

    .venv/bin/python benchmarks/long_prefix_vs_vllm_bench.py [--arm cpu-smoke] [--requests 16]

Prints TTFT/TPOT p50 from the three sources and their ratios, and each client's CPU time per streamed
token (the difference between an N-request and a 1-request run, so start-up costs cancel).
Not part of `make test`: it measures, it does not assert.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import tempfile
import time
from pathlib import Path
from statistics import median

import psutil
from histograms import bucket_delta, histogram_buckets, histogram_quantile  # benchmarks/histograms.py

from harness.config.arms import load_arm
from harness.config.paths import server_python
from harness.config.workloads import load_workload
from harness.measure.loadgen import run_level
from harness.measure.metrics import fetch_metrics
from harness.measure.prompts import build_prompts, token_space
from harness.records.schema import Summary
from harness.serve.launch import LiveServer, launch

TPOT_HIST = "vllm:request_time_per_output_token_seconds"
TTFT_HIST = "vllm:time_to_first_token_seconds"

BENCH = r"""
import sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.benchmarks.serve import add_cli_args, main
parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""


def harness_run(live: LiveServer, prompts: list[list[int]], output_tokens: int) -> tuple[dict, float]:
    cpu0 = time.process_time()
    run = asyncio.run(run_level(live.info.base_url, live.arm.model.served_name, prompts, output_tokens, 1, 1,
                                live.arm.timeouts.request_s, live.server.check_alive))
    cpu = time.process_time() - cpu0
    ok = [s for s in run.samples if s.ok]
    assert len(ok) == len(prompts), [s.error for s in run.samples if s.error]
    return {"ttft": Summary.of([s.ttft_s for s in ok]).p50, "tpot": Summary.of([s.tpot_s for s in ok]).p50}, cpu


def bench_run(live: LiveServer, model_dir: Path, n: int, prefix: int, suffix: int, out: int,
              result_dir: Path, seed: int) -> tuple[dict, float]:
    argv = ["--backend", "vllm", "--base-url", live.info.base_url, "--endpoint", "/v1/completions",
            "--model", str(model_dir), "--served-model-name", live.arm.model.served_name,
            "--dataset-name", "random", "--random-prefix-len", str(prefix), "--random-input-len", str(suffix),
            "--random-output-len", str(out), "--num-prompts", str(n), "--max-concurrency", "1",
            "--request-rate", "inf", "--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el",
            "--metric-percentiles", "50,90,99", "--save-result", "--result-dir", str(result_dir),
            "--result-filename", f"bench_{n}.json", "--disable-tqdm", "--seed", str(seed)]
    proc = psutil.Popen([server_python(), "-c", BENCH, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    cpu = 0.0
    while proc.poll() is None:  # last reading before exit: the bench's own CPU time (user + system)
        try:
            t = proc.cpu_times()
            cpu = t.user + t.system
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    output = proc.stdout.read().decode(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"vllm bench serve failed:\n{output[-3000:]}")
    data = json.loads((result_dir / f"bench_{n}.json").read_text())
    return {"ttft": data["median_ttft_ms"] / 1e3, "tpot": data["median_tpot_ms"] / 1e3}, cpu


def p50_bucket(delta: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(lower, upper] bounds of the bucket holding the median observation."""
    prev = 0.0
    for le, count in delta:
        if delta and count >= delta[-1][1] / 2:
            return (prev, le)
        prev = le
    return None


def server_p50(before: str, after: str) -> dict:
    out = {}
    for key, name in (("ttft", TTFT_HIST), ("tpot", TPOT_HIST)):
        delta = bucket_delta(histogram_buckets(before, name), histogram_buckets(after, name))
        out[key] = histogram_quantile(0.5, delta)
        out[key + "_bucket"] = p50_bucket(delta)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", default="cpu-smoke")
    parser.add_argument("--workload", default="long_prefix_cpu")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="alternating harness/bench rounds (noise estimate)")
    args = parser.parse_args()

    arm = load_arm(args.arm)
    w = load_workload(args.workload)
    tmp = Path(tempfile.mkdtemp(prefix="bench-long-prefix-"))
    live = launch(arm, tmp / arm.name)
    try:
        # Fresh suffixes every round (a repeated prompt would hit the prefix cache whole); bench gets a new seed.
        n_prompts = args.rounds * args.requests + 2
        prompts = build_prompts(w.model_copy(update={"requests_per_level": n_prompts}), token_space(arm, w)).measured[1]
        harness_run(live, prompts[:1], w.output_tokens)  # prefix cache and compile warm-up
        rounds = []
        for r in range(args.rounds):  # alternate the clients so drift on a shared box hits both
            measured = prompts[1 + r * args.requests: 1 + (r + 1) * args.requests]
            m0 = fetch_metrics(live.info.base_url)
            h, h_cpu_n = harness_run(live, measured, w.output_tokens)
            m1 = fetch_metrics(live.info.base_url)
            b, b_cpu_n = bench_run(live, arm.model.local_dir(), args.requests, w.prefix_tokens, w.suffix_tokens,
                                   w.output_tokens, tmp, seed=100 + r)
            m2 = fetch_metrics(live.info.base_url)
            rounds.append((h, b, server_p50(m0, m1), server_p50(m1, m2), h_cpu_n, b_cpu_n))
        _, h_cpu_1 = harness_run(live, prompts[-1:], w.output_tokens)
        _, b_cpu_1 = bench_run(live, arm.model.local_dir(), 1, w.prefix_tokens, w.suffix_tokens, w.output_tokens, tmp,
                               seed=99)
    finally:
        live.server.stop()
    report(arm.name, w, args.requests, live.info.vllm_version, rounds, h_cpu_1, b_cpu_1)


def report(arm: str, w, requests: int, version: str | None, rounds: list, h_cpu_1: float, b_cpu_1: float) -> None:
    print(f"arm {arm}, workload {w.name} ({w.prefix_tokens}+{w.suffix_tokens} prompt, {w.output_tokens} out), "
          f"{requests} requests at c1 per client per round, vLLM {version}")
    print(f"{'round':6}{'metric':10}{'harness':>10}{'vllm bench':>12}{'srv(h)':>9}{'srv(b)':>9}{'h/bench':>9}"
          f"{'h/srv(h)':>10}{'b/srv(b)':>10}  srv(h) p50 bucket")
    ratios = {"ttft": [], "tpot": []}
    for i, (h, b, sh, sb, _, _) in enumerate(rounds, start=1):
        for key in ("ttft", "tpot"):
            ratios[key].append(h[key] / b[key])
            print(f"{i:<6}{key + ' p50':10}{h[key] * 1e3:10.3f}{b[key] * 1e3:12.3f}{sh[key] * 1e3:9.3f}"
                  f"{sb[key] * 1e3:9.3f}{h[key] / b[key]:9.3f}{h[key] / sh[key]:10.3f}{b[key] / sb[key]:10.3f}"
                  f"  {sh[key + '_bucket']}")
    for key, values in ratios.items():
        print(f"harness/vllm-bench {key} p50 ratio: median {median(values):.3f}, "
              f"range {min(values):.3f}-{max(values):.3f} over {len(values)} rounds")
    tokens = (requests - 1) * w.output_tokens
    h_tok = median([(r[4] - h_cpu_1) / tokens for r in rounds])
    b_tok = median([(r[5] - b_cpu_1) / tokens for r in rounds])
    print(f"client CPU per streamed token (N-request minus 1-request run): harness {h_tok * 1e6:.1f} us, "
          f"vllm bench {b_tok * 1e6:.1f} us (ratio {h_tok / b_tok:.2f})")


if __name__ == "__main__":
    main()
