"""Measurement truth for the long-prefix suite: the harness's client vs `vllm bench serve` vs the server's own
histograms, on one running server and exactly the same prompts.

    .venv/bin/python benchmarks/long_prefix_vs_vllm_bench.py [--arm cpu-smoke] [--requests 16] [--rounds 4]

Three clients per round, in an order that rotates every round: the harness with token-id prompts (`ids`, its
default basis: TTFT excludes tokenization), the harness with the same prompts as text (`text`: TTFT includes it)
and `vllm bench serve` fed that text as a custom dataset (`bench`). The prompts are the workload's, made canonical
through the server's tokenizer (ids -> text -> ids') so that the ids the harness sends are what the server makes of
the text the other two send; the round trip of the workload's own ids is reported. Every client has its own
cache_salt, so no client reuses another's prefix-cache blocks, and each one's prefix is warmed by its 1-request run.
Same length (ignore_eos), greedy, c1. Server histograms: per client window, with 1 % buckets where the installed
vLLM takes --custom-histogram-buckets. Prints TTFT/TPOT p50 per round, the median ratios, and each client's CPU time
per streamed token (an N-request run minus the 1-request run). Not part of `make test`: it measures, it does not assert.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from statistics import median

from histograms import FINE_BUCKETS, server_p50  # benchmarks/
from vllm_bench_client import bench_argv, bench_run, supports_custom_buckets, write_dataset

from harness.config.arms import load_arm
from harness.config.workloads import load_workload
from harness.measure.loadgen import Endpoint, run_level
from harness.measure.metrics import fetch_metrics
from harness.measure.prompts import build_prompts, token_space
from harness.measure.textbasis import canonical
from harness.records.schema import Summary
from harness.serve.launch import LiveServer, launch

CLIENTS = ("ids", "text", "bench")


def harness_run(live: LiveServer, prompts: list, out: int, salt: str) -> dict:
    cpu0 = time.process_time()
    run = asyncio.run(run_level(Endpoint.of(live), prompts, out, 1, 1, extra={"cache_salt": salt}))
    cpu = time.process_time() - cpu0
    ok = [s for s in run.samples if s.ok]
    assert len(ok) == len(prompts), [s.error for s in run.samples if s.error]
    return {"ttft": Summary.of([s.ttft_s for s in ok]).p50, "tpot": Summary.of([s.tpot_s for s in ok]).p50,
            # TPOT to the end of the stream (usage chunk + [DONE]), the harness's definition before 2026-11-30
            "tpot_stream_end": median((s.latency_ns - s.ttft_ns) * 1e-9 / (s.output_tokens - 1) for s in ok),
            "tail": median((s.latency_ns - s.chunk_offsets_ns[-1]) * 1e-9 for s in ok),
            "prompt_tokens": median(s.prompt_tokens for s in ok), "cpu": cpu}


def client_run(client: str, live: LiveServer, ids: list, texts: list, out: int, tmp: Path, tag: str) -> dict:
    """One client's run over the same prompts (ids for `ids`, their text for the others)."""
    if client != "bench":
        return harness_run(live, ids if client == "ids" else texts, out, client)
    result = tmp / f"bench_{tag}.json"
    argv = bench_argv(live.info.base_url, live.arm.model.local_dir(), live.arm.model.served_name,
                      write_dataset(tmp / f"prompts_{tag}.jsonl", texts), len(texts), out, result,
                      {"cache_salt": client})
    b = bench_run(argv, result)
    assert b.completed == len(texts), f"bench completed {b.completed} of {len(texts)}"
    return {"ttft": b.ttft_p50_s, "tpot": b.tpot_p50_s, "cpu": b.cpu_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", default="cpu-smoke")
    parser.add_argument("--workload", default="long_prefix_cpu")
    parser.add_argument("--requests", type=int, default=16, help="requests per client per round")
    parser.add_argument("--rounds", type=int, default=4, help="rounds; the clients' order rotates every round")
    parser.add_argument("--coarse-buckets", action="store_true", help="leave vLLM's default histogram buckets")
    args = parser.parse_args()

    arm = load_arm(args.arm)
    w = load_workload(args.workload)
    fine = not args.coarse_buckets and supports_custom_buckets()
    if fine:
        server = arm.server.model_copy(update={"args": [*arm.server.args, "--custom-histogram-buckets",
                                                        json.dumps(FINE_BUCKETS, separators=(",", ":"))]})
        arm = arm.model_copy(update={"server": server})
    tmp = Path(tempfile.mkdtemp(prefix="bench-long-prefix-"))
    live = launch(arm, tmp / arm.name)
    try:
        n = 1 + args.rounds * args.requests
        raw = build_prompts(w.model_copy(update={"requests_per_level": n}), token_space(arm, w)).measured
        same = asyncio.run(canonical(live.info.base_url, arm.model.served_name, raw[w.concurrency[0]]))
        harness_run(live, same.ids[:1], w.output_tokens, "warm-up")  # compile and first-request warm-up
        one = {c: client_run(c, live, same.ids[:1], same.texts[:1], w.output_tokens, tmp, f"{c}_1") for c in CLIENTS}
        rounds = []
        for r in range(args.rounds):
            lo, hi = 1 + r * args.requests, 1 + (r + 1) * args.requests
            order = CLIENTS[r % 3:] + CLIENTS[:r % 3]
            got = {}
            for c in order:
                m0 = fetch_metrics(live.info.base_url)
                got[c] = client_run(c, live, same.ids[lo:hi], same.texts[lo:hi], w.output_tokens, tmp, f"{c}_{r}")
                got[c]["srv"] = server_p50(m0, fetch_metrics(live.info.base_url))
            rounds.append((order, got))
    finally:
        live.server.stop()
    report(arm.name, w, args.requests, live.info.vllm_version, fine, same, rounds, one)


def report(arm: str, w, requests: int, version: str | None, fine: bool, same, rounds: list, one: dict) -> None:
    print(f"arm {arm}, workload {w.name} ({w.prefix_tokens}+{w.suffix_tokens} prompt ids, {w.output_tokens} out, "
          f"greedy, ignore_eos), {requests} requests at c1 per client per round, vLLM {version}")
    print(f"prompts: the workload's ids -> server text -> ids: {same.original.describe()}; canonical ids: "
          f"{same.canonical.describe()}, text stable for {same.texts_stable}/{same.canonical.prompts}; "
          f"server histograms: {'1 % buckets (--custom-histogram-buckets)' if fine else 'vLLM default buckets'}")
    print(f"{'round':6}{'order':17}{'metric':10}{'ids':>9}{'text':>9}{'bench':>9}{'srv ids':>9}{'srv text':>9}"
          f"{'srv bnch':>9}{'ids/bnch':>9}{'text/bnch':>10}  srv(bench) p50 bucket")
    ratios: dict[str, list[float]] = {}
    for i, (order, got) in enumerate(rounds, start=1):
        for key in ("ttft", "tpot"):
            v = {c: got[c][key] for c in CLIENTS}
            s = {c: got[c]["srv"][key] for c in CLIENTS}
            for name, x in (("ids/bench", v["ids"] / v["bench"]), ("text/bench", v["text"] / v["bench"]),
                            *((f"{c}/srv({c})", v[c] / s[c]) for c in CLIENTS if s[c]),
                            ("srv(text)/srv(bench)", s["text"] / s["bench"] if s["bench"] else float("nan"))):
                ratios.setdefault(f"{key} {name}", []).append(x)
            bucket = got["bench"]["srv"][key + "_bucket"]
            print(f"{i:<6}{','.join(order):17}{key + ' p50':10}" + "".join(f"{v[c] * 1e3:9.3f}" for c in CLIENTS)
                  + "".join(f"{(s[c] or float('nan')) * 1e3:9.3f}" for c in CLIENTS)
                  + f"{v['ids'] / v['bench']:9.3f}{v['text'] / v['bench']:10.3f}  "
                  + (f"({bucket[0] * 1e3:.3f}, {bucket[1] * 1e3:.3f}] ms" if bucket else "n/a"))
    for name, values in ratios.items():
        print(f"{name:28} median {median(values):.3f}, range {min(values):.3f}-{max(values):.3f} "
              f"over {len(values)} rounds")
    h = [got[c] for _, got in rounds for c in ("ids", "text")]
    print(f"harness TPOT p50 to the end of the stream (the definition before this change) / to the last token chunk: "
          f"median {median(x['tpot_stream_end'] / x['tpot'] for x in h):.4f}; stream tail after the last token "
          f"chunk: median {median(x['tail'] for x in h) * 1e3:.3f} ms; prompt tokens as the server counted: "
          f"ids {median(got['ids']['prompt_tokens'] for _, got in rounds):.0f}, "
          f"text {median(got['text']['prompt_tokens'] for _, got in rounds):.0f}")
    tokens = (requests - 1) * w.output_tokens
    per_token = {c: median((got[c]["cpu"] - one[c]["cpu"]) / tokens for _, got in rounds) for c in CLIENTS}
    print("client CPU per streamed token (N-request minus 1-request run): "
          + ", ".join(f"{c} {per_token[c] * 1e6:.1f} us" for c in CLIENTS)
          + f" (harness ids / bench {per_token['ids'] / per_token['bench']:.2f})")


if __name__ == "__main__":
    main()
