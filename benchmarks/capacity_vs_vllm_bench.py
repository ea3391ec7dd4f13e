"""Measurement truth for the capacity suite: the harness's level measurement against `vllm bench serve
--max-concurrency N` at the same levels, on the same prompts, on the same running server, for each arm named.

    .venv/bin/python benchmarks/capacity_vs_vllm_bench.py --arms cpu-smoke-kvcap,cpu-ref-kvcap [--rounds 4]
    python3 benchmarks/capacity_vs_vllm_bench.py --arms gpu-mla-kvcap,gpu-mla-ref-kvcap   (scripts/device_capacity.sh)

Per arm: one server, its capacity workload's prompts (harness/measure/capacity.py) made canonical through the
server's tokenizer (ids -> text -> ids', so the ids the harness sends are what the server makes of the text the bench
sends), one untimed warm-up request, then the workload's levels in order. At each level both clients send the same
rounds x level prompts with at most `level` in flight, greedy, ignore_eos, each with a cache_salt of its own (no
client reuses the other's KV), in an order that alternates by level. The harness side is the capacity suite's own
code (`run_level` + `level_fields`: output tokens/s, requests/s, TPOT/TTFT p50); the bench side is its saved result
(output_throughput, request_throughput, median_tpot_ms, median_ttft_ms). /metrics is sampled beside both, so each
client's KV-usage peak shows they loaded the server alike. The ramp stops as the suite's does: the harness's level
saturated (the suite's own rule) + the workload's levels_past_saturation.

Prints per level the harness/bench ratios of throughput and TPOT p50, and with two arms each client's
first/second-arm ratio (the comparison the capacity table makes). Writes --out JSON. Not part of `make test`: it
measures, it does not assert.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from histograms import FINE_BUCKETS, server_p50  # benchmarks/
from vllm_bench_client import bench_argv, bench_run, supports_custom_buckets, write_dataset

from harness.config.arms import load_arm
from harness.config.workloads import CapacityWorkload, load_workload, workload_for
from harness.measure.capacity import (
    LevelMetrics,
    build_capacity_prompts,
    level_fields,
    level_prompts,
    prompts_sha,
    served_gpus,
)
from harness.measure.loadgen import Endpoint, run_level
from harness.measure.metrics import fetch_metrics
from harness.measure.prompts import token_space
from harness.measure.telemetry import MetricsSampler, usage_between
from harness.measure.textbasis import canonical
from harness.serve.launch import LiveServer, launch

# harness: the suite's requests (token ids, top-2 logprobs as token ids: the outputs it checks); bare: the same client
# sending the bench's request shape (the text, no logprobs), which separates the client's measurement from what the
# suite asks the server to do; bench: vllm bench serve.
CLIENTS = ("harness", "bare", "bench")
BARE = {"logprobs": None, "return_tokens_as_token_ids": False}
FIGURES = (("tok_s", "out tok/s"), ("tpot_p50", "TPOT p50 ms"), ("ttft_p50", "TTFT p50 ms"), ("req_s", "req/s"),
           ("tpot_mean", "TPOT mean ms"), ("e2e_mean", "E2E mean ms"))


async def harness_level(live: LiveServer, w: CapacityWorkload, c: int, prompts: list, sampler: MetricsSampler,
                        sink: Path, client: str = "harness", label: str | None = None) -> dict:
    """The suite's own measurement of one level (run_level + level_fields, as harness.measure.capacity.ramp); `bare`
    sends the bench's request shape through the same code."""
    before = await sampler.scrape_once()
    shape = BARE if client == "bare" else {}
    run = await run_level(Endpoint.of(live), prompts, w.output_tokens, c, c, sink,
                          extra={"cache_salt": f"vs-bench-{label or client}-c{c}", **shape})
    after = await sampler.scrape_once()
    f = level_fields(w, c, run, LevelMetrics(sampler.points, before, after), served_gpus(live.arm),
                     prompts_sha(prompts), sink)
    return {"tok_s": f["output_tokens_per_s"], "req_s": f["requests_per_s"], "tpot_p50": f["tpot"].p50,
            "tpot_p99": f["tpot"].p99, "ttft_p50": f["ttft"].p50, "tpot_mean": f["tpot"].mean,
            "ttft_mean": f["ttft"].mean, "e2e_mean": e2e_mean(run), "failed": f["failed"], "requests": f["requests"],
            "errors": f["errors"][:5],
            "kv_peak": f["kv_usage"].peak if f["kv_usage"] else None, "preemptions": f["preemptions"],
            "saturated": f["saturated"], "saturation": f["saturation"]}


async def bench_level(live: LiveServer, w: CapacityWorkload, c: int, texts: list[str], sampler: MetricsSampler,
                      tmp: Path, label: str = "bench") -> dict:
    """`vllm bench serve --max-concurrency c` over the same prompts as text; its own figures, our KV-usage view."""
    result = tmp / f"{label}_c{c}.json"
    argv = bench_argv(live.info.base_url, live.arm.model.local_dir(), live.arm.model.served_name,
                      write_dataset(tmp / f"prompts_c{c}.jsonl", texts), len(texts), w.output_tokens, result,
                      {"cache_salt": f"vs-bench-{label}-c{c}"}, concurrency=c)
    t0 = time.perf_counter_ns()
    b = await asyncio.to_thread(bench_run, argv, result)
    kv = usage_between(sampler.points, "kv_usage", t0, time.perf_counter_ns())
    d = b.raw
    return {"tok_s": d["output_throughput"], "req_s": d["request_throughput"], "tpot_p50": d["median_tpot_ms"] / 1e3,
            "tpot_p99": d["p99_tpot_ms"] / 1e3, "ttft_p50": d["median_ttft_ms"] / 1e3,
            "tpot_mean": d["mean_tpot_ms"] / 1e3, "ttft_mean": d["mean_ttft_ms"] / 1e3,
            "e2e_mean": d["mean_e2el_ms"] / 1e3,
            "failed": len(texts) - b.completed, "requests": len(texts), "kv_peak": kv.peak if kv else None}


async def arm_levels(live: LiveServer, w: CapacityWorkload, tmp: Path, on_level=lambda arm: None,
                     repeat: int = 1) -> dict:
    """The arm's levels; `on_level` gets the arm's record so far after each level (a call cut short keeps them).
    With `repeat` > 1 every client measures each level that many times (keys `bench#2`, ...; every other pass in
    reverse order, each with its own cache_salt): how far one client's figures move between two runs of the same
    requests on the same server, the floor under any agreement between two clients."""
    prompts = build_capacity_prompts(w, token_space(live.arm, w))
    same = await canonical(live.info.base_url, live.arm.model.served_name, prompts)
    longest = max(map(len, same.ids))
    if longest + w.output_tokens > live.arm.model.max_model_len:
        raise SystemExit(f"arm {live.arm.name}: a canonical prompt has {longest} tokens + {w.output_tokens} out > "
                         f"max_model_len {live.arm.model.max_model_len}; lower the workload's suffix_tokens")
    sampler = MetricsSampler(live.info.base_url, w.metrics_interval_s)
    task = asyncio.ensure_future(sampler.run())
    levels, past, t0 = [], None, time.monotonic()
    try:
        await run_level(Endpoint.of(live), same.ids[:1], w.output_tokens, 1, 0,
                        extra={"cache_salt": "vs-bench-warm-up"})
        for i, c in enumerate(w.concurrency):
            ids, texts = level_prompts(w, same.ids, c), level_prompts(w, same.texts, c)
            got = {}
            order = CLIENTS[i % 3:] + CLIENTS[:i % 3]  # rotates every level
            runs = [(client, client + (f"#{p + 1}" if p else ""))
                    for p in range(repeat) for client in (order if p % 2 == 0 else order[::-1])]
            for client, key in runs:
                m0 = await asyncio.to_thread(fetch_metrics, live.info.base_url)
                got[key] = (await bench_level(live, w, c, texts, sampler, tmp, key) if client == "bench" else
                            await harness_level(live, w, c, ids if client == "harness" else texts, sampler,
                                                tmp / f"{key}_c{c}.jsonl", client, key))
                # The server's own medians over this client's requests: the arbiter when the clients disagree.
                srv = server_p50(m0, await asyncio.to_thread(fetch_metrics, live.info.base_url))
                got[key].update(srv_tpot_p50=srv["tpot"], srv_ttft_p50=srv["ttft"],
                                srv_tpot_p50_bucket=srv["tpot_bucket"], srv_ttft_p50_bucket=srv["ttft_bucket"],
                                srv_tpot_mean=srv["tpot_mean"], srv_ttft_mean=srv["ttft_mean"],
                                srv_e2e_mean=srv["e2e_mean"])
            levels.append({"concurrency": c, "first": order[0], **got})
            on_level(record(live, w, same, levels))
            print(f"  {live.arm.name} c{c} ({time.monotonic() - t0:.0f} s): " + "; ".join(
                f"{k} {v['tok_s']:.1f} tok/s TPOT p50 {v['tpot_p50'] * 1e3:.3f} ms" for k, v in got.items()),
                  flush=True)
            past = 0 if got["harness"]["saturated"] and past is None else past + 1 if past is not None else None
            if past is not None and past >= w.levels_past_saturation:
                break
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return record(live, w, same, levels)


def record(live: LiveServer, w: CapacityWorkload, same, levels: list[dict]) -> dict:
    lengths = [len(ids) for ids in same.ids]
    return {"arm": live.arm.name, "workload": w.name, "prompt_tokens": [min(lengths), max(lengths)],
            "round_trip": same.original.describe(), "canonical": same.canonical.describe(),
            "vllm_version": live.info.vllm_version, "levels": levels}


def e2e_mean(run) -> float | None:
    """Mean end-to-end latency (send to last byte) of the level's completed requests, in seconds."""
    done = [s.latency_ns for s in run.samples if s.ok]
    return sum(done) / len(done) * 1e-9 if done else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def scaled(figures: dict, key: str) -> float | None:
    """Times in ms, rates as they are."""
    x = figures.get(key)
    return x * 1e3 if x is not None and key.removeprefix("srv_").startswith(("tpot", "ttft", "e2e")) else x


def worst_of(ratios: list[float]) -> str:
    """The ratio farthest from 1, and how far."""
    worst = max(ratios, key=lambda r: abs(r - 1))
    return f"worst {worst:.3f} ({100 * (worst - 1):+.1f} %)"


def within_5(ratios: list[float]) -> str:
    return f"{sum(abs(r - 1) <= 0.05 for r in ratios)}/{len(ratios)}"


def fmt(x: float | None, spec: str = ".3f") -> str:
    return format(x, spec) if x is not None else "n/a"


def report(arms: list[dict]) -> list[str]:
    """Pure: per arm, the harness/bench and bare/bench tables (the suite's requests, then the bench's request shape
    through the harness's client), the worst ratio per figure; with two arms, each client's first/second ratio."""
    lines = []
    for a in arms:
        for mine in ("harness", "bare"):
            if all(mine in lv for lv in a["levels"]):
                lines += client_table(a, mine)
        lines += server_table(a)
        lines += server_normalized(a)
        lines += repeatability(a)
    if len(arms) == 2:
        lines += arm_ratios(*arms)
    return lines


def resolved(figures: dict, key: str) -> bool:
    """Whether the server's median of `key` is known to within 5 %: its histogram bucket is at most 5 % of it wide.
    vLLM's default TPOT buckets start at (0, 10 ms], so without --custom-histogram-buckets (vLLM 0.25.0 has none) a
    2-3 ms median is interpolated to 5 ms whatever it is; such a median arbitrates nothing. A file written before
    the buckets were kept reads unresolved too."""
    value, bucket = figures.get("srv_" + key), figures.get(f"srv_{key}_bucket")
    return value is not None and bucket is not None and bucket[1] - bucket[0] <= 0.05 * value


def server_cell(figures: dict, key: str) -> str:
    """client/server; where the server's median is unresolved, its bucket in brackets instead."""
    bucket = figures.get(f"srv_{key}_bucket")
    if resolved(figures, key):
        server = fmt(scaled(figures, "srv_" + key))
    elif bucket is not None:
        server = f"({bucket[0] * 1e3:g},{bucket[1] * 1e3:g}]"
    else:
        server = "?"
    return f"{fmt(scaled(figures, key))}/{server}"


def server_table(a: dict) -> list[str]:
    """Each client's TPOT/TTFT p50 beside the server's own median over the same requests (vLLM's histograms): a
    client that agrees with the server but not with another client measured the same work differently; clients whose
    server-side medians differ asked the server for different work. Only medians the server resolves to 5 % are
    compared; the others show the bucket they fell in."""
    levels = [lv for lv in a["levels"] if all("srv_tpot_p50" in lv.get(c, {}) for c in CLIENTS)]
    if not levels:
        return []
    lines = [f"arm {a['arm']}: client p50 / the server's own p50 over the same requests (ms; (lo,hi]: the server's "
             "bucket where it is wider than 5 %, ?: bucket not recorded)",
             f"{'level':>6}" + "".join(f" {c + ' TPOT':>22}" for c in CLIENTS) + "".join(f" {c + ' TTFT':>24}"
                                                                                  for c in CLIENTS)]
    for lv in levels:
        cells = [server_cell(lv[c], k) for k in ("tpot_p50", "ttft_p50") for c in CLIENTS]
        lines.append(f"{'c' + str(lv['concurrency']):>6}" + "".join(f" {x:>22}" for x in cells[:3])
                     + "".join(f" {x:>24}" for x in cells[3:]))
    for k, label in (("tpot_p50", "TPOT p50"), ("ttft_p50", "TTFT p50")):
        for c in CLIENTS:
            rs = [r for lv in levels if resolved(lv[c], k) and (r := ratio(lv[c][k], lv[c]["srv_" + k])) is not None]
            unresolved = sum(not resolved(lv[c], k) for lv in levels)
            if rs:
                lines.append(f"  {label} {c}/server: {worst_of(rs)}; within 5 % at {within_5(rs)}"
                             + (f"; {unresolved} more levels unresolved" if unresolved else ""))
            else:
                lines.append(f"  {label} {c}/server: no level's server median resolved to 5 % (no arbiter)")
    # _sum/_count: exact at any bucket. E2E does not depend on the client's TTFT/TPOT split; it includes what the
    # server does before the request reaches its engine (HTTP, and tokenizing a text prompt), so it reads a little high.
    for k, label in (("tpot_mean", "TPOT mean"), ("ttft_mean", "TTFT mean"), ("e2e_mean", "E2E mean")):
        for c in CLIENTS:
            rs = [r for lv in levels if (r := ratio(lv[c].get(k), lv[c].get("srv_" + k))) is not None]
            if rs:
                lines.append(f"  {label} {c}/server: {worst_of(rs)}; within 5 % at {within_5(rs)}")
    return lines


MEANS = (("tpot_mean", "TPOT mean"), ("e2e_mean", "E2E mean"))


# Figure -> (the server's figure over the same requests, whether it moves inversely). Throughput has no server-side
# counterpart of its own; at a fixed number in flight, Little's law makes it the inverse of the mean E2E latency.
SERVER_COUNTERPART = {"tok_s": ("srv_e2e_mean", True), "tpot_mean": ("srv_tpot_mean", False),
                      "e2e_mean": ("srv_e2e_mean", False)}


def server_ratio(mine: dict, bench: dict, key: str) -> float | None:
    srv, inverse = SERVER_COUNTERPART[key]
    return ratio(bench.get(srv), mine.get(srv)) if inverse else ratio(mine.get(srv), bench.get(srv))


def server_normalized(a: dict) -> list[str]:
    """Two clients' ratio of a figure beside the server's own ratio over each client's requests. Two runs of the same
    prompts load the server differently (at 2 ms steps, where prefills fall among the decodes moves TPOT by tens of
    percent between runs); the server records that difference too, so client ratio / server ratio is what the
    clients themselves disagree by."""
    lines = []
    for mine in ("harness", "bare"):
        rows = [lv for lv in a["levels"] if mine in lv and "bench" in lv]
        for k, label in (("tok_s", "out tok/s"), *MEANS):
            triples = [(lv["concurrency"], ratio(lv[mine].get(k), lv["bench"].get(k)),
                        server_ratio(lv[mine], lv["bench"], k)) for lv in rows]
            triples = [(c, x, y) for c, x, y in triples if x is not None and y is not None]
            if not triples:
                continue
            residual = [x / y for _, x, y in triples]
            lines.append(f"arm {a['arm']}: {label} {mine}/bench, client ratio / the server's ratio over the same "
                         "requests = what the clients disagree by: " + "; ".join(
                             f"c{c} {x:.3f}/{y:.3f} = {x / y:.3f}" for c, x, y in triples))
            lines.append(f"  {label} {mine}/bench after the server's own difference: {worst_of(residual)}; "
                         f"within 5 % at {within_5(residual)}")
    return lines


def repeatability(a: dict) -> list[str]:
    """Each client's second measurement of a level against its first (--repeat): the run-to-run spread of the same
    requests on the same server, as the client and as the server saw it."""
    lines = []
    for client in CLIENTS:
        rows = [lv for lv in a["levels"] if client in lv and client + "#2" in lv]
        if not rows:
            continue
        lines.append(f"arm {a['arm']}: {client}#2 / {client} (the same client and requests, measured again):")
        for k, label in (*FIGURES[:2], *MEANS):
            rs = [(lv["concurrency"], ratio(lv[client + "#2"].get(k), lv[client].get(k))) for lv in rows]
            srv = [(lv["concurrency"], ratio(lv[client + "#2"].get("srv_" + k), lv[client].get("srv_" + k)))
                   for lv in rows] if k in dict(MEANS) else []
            cells = [f"c{c} {fmt(r)}" + (f" (server {fmt(dict(srv)[c])})" if srv else "") for c, r in rs]
            known = [r for _, r in rs if r is not None]
            lines.append(f"  {label}: " + "; ".join(cells)
                         + (f"; {worst_of(known)}, within 5 % at {within_5(known)}" if known else ""))
    return lines


def client_table(a: dict, mine: str) -> list[str]:
    """One client against the bench, level by level (h: `mine`, b: the bench)."""
    lines = []
    lines.append(f"arm {a['arm']} (workload {a['workload']}, prompts {a['prompt_tokens'][0]}-"
                 f"{a['prompt_tokens'][1]} tokens after the round trip: {a['round_trip']}; vLLM "
                 f"{a['vllm_version']})")
    lines.append(f"{'level':>6} {'first':>8}" + "".join(f" {label + ' h':>15} {'b':>9} {'h/b':>6}"
                                                       for _, label in FIGURES)
                 + f" {'KV peak h/b':>11} {'failed h/b':>10}  saturation (" + mine + ")")
    for lv in a["levels"]:
        h, b = lv[mine], lv["bench"]
        lines.append(f"{'c' + str(lv['concurrency']):>6} {lv['first']:>8}"
                     + "".join(f" {fmt(scaled(h, k)):>15} {fmt(scaled(b, k)):>9} {fmt(ratio(h.get(k), b.get(k))):>6}"
                               for k, _ in FIGURES)
                     + f" {fmt(h['kv_peak'], '.2f') + '/' + fmt(b['kv_peak'], '.2f'):>11}"
                     + f" {str(h['failed']) + '/' + str(b['failed']):>10}  {h['saturation'] or 'not saturated'}")
    for k, label in FIGURES:
        rs = [r for lv in a["levels"] if (r := ratio(lv[mine].get(k), lv["bench"].get(k))) is not None]
        if rs:
            lines.append(f"  {label} {mine}/bench: {worst_of(rs)} over {len(rs)} levels; within 5 % at {within_5(rs)}")
    return lines


def arm_ratios(first: dict, second: dict) -> list[str]:
    """The comparison the capacity table makes (first arm / second at each level), as each client measured it."""
    theirs = {lv["concurrency"]: lv for lv in second["levels"]}
    lines = [f"{first['arm']} / {second['arm']} at the same level, each client's own figures:"]
    for lv in first["levels"]:
        other = theirs.get(lv["concurrency"])
        if other is None:
            continue
        lines.append(f"  c{lv['concurrency']}: " + "; ".join(
            f"{label}: " + ", ".join(f"{client} {fmt(ratio(lv[client][k], other[client][k]))}"
                                      for client in CLIENTS if client in lv and client in other)
            for k, label in FIGURES[:2]))
    return lines


async def measure(arm_name: str, rounds: int | None, max_level: int | None, tmp: Path,
                  metrics_interval: float | None = None, on_level=lambda arm: None, repeat: int = 1) -> dict:
    arm = load_arm(arm_name)
    w = load_workload(workload_for(arm, "capacity"), kind=CapacityWorkload)
    update = {"rounds": rounds} if rounds else {}
    if metrics_interval:
        update["metrics_interval_s"] = metrics_interval
    if max_level:
        update["concurrency"] = [c for c in w.concurrency if c <= max_level]
    w = w.model_copy(update=update)
    if supports_custom_buckets():  # 1 % buckets: the server's medians to within 1 % (benchmarks/histograms.py)
        server = arm.server.model_copy(update={"args": [*arm.server.args, "--custom-histogram-buckets",
                                                        json.dumps(FINE_BUCKETS, separators=(",", ":"))]})
        arm = arm.model_copy(update={"server": server})
    live = await asyncio.to_thread(launch, arm, tmp / arm.name)
    try:
        return await arm_levels(live, w, tmp / arm.name, on_level, repeat)
    finally:
        live.server.stop()


def positive_int(text: str) -> int:
    """argparse type: a count of at least 1 (checked before any server starts)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of at least 1")
    return int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", default="cpu-smoke-kvcap,cpu-ref-kvcap", help="comma-separated; each on its own")
    parser.add_argument("--rounds", type=int, help="requests per level = rounds x level (default: the workload's)")
    parser.add_argument("--max-level", type=int, help="leave out the workload's levels above this")
    parser.add_argument("--metrics-interval", type=float,
                        help="seconds between /metrics scrapes (default: the workload's), scraped on the harness "
                             "clients' event loop: what the suite's own sampling costs its measurement")
    parser.add_argument("--repeat", type=positive_int, default=1,
                        help="measure each level this many times with every client (the same requests on the same "
                             "server): each client's repeatability, the floor under agreement between clients")
    parser.add_argument("--out", type=Path, help="write every figure here as JSON")
    parser.add_argument("--report-from", type=Path, nargs="+", metavar="JSON",
                        help="measure nothing: report the arms of earlier --out files (e.g. one device call per arm, "
                             "candidate's file first)")
    args = parser.parse_args()
    if args.report_from:
        arms = [a for f in args.report_from for a in json.loads(f.read_text())["arms"]]
    else:
        tmp = Path(tempfile.mkdtemp(prefix="bench-capacity-"))
        arms = []

        def keep(arm: dict) -> None:  # level by level (the arm is not in `arms` yet): a call cut short keeps them
            if args.out:
                args.out.write_text(json.dumps({"arms": [*arms, arm]}, indent=1))

        for name in args.arms.split(","):
            arms.append(asyncio.run(measure(name, args.rounds, args.max_level, tmp, args.metrics_interval, keep,
                                            args.repeat)))
    print("\n".join(report(arms)))
    if args.out:
        args.out.write_text(json.dumps({"arms": arms}, indent=1))


if __name__ == "__main__":
    main()
