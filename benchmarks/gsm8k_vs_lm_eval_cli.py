"""GSM8K: the suite's evaluation vs lm-eval's own CLI on the same server, task file and limit; wall times.

    .venv/bin/python benchmarks/gsm8k_vs_lm_eval_cli.py [--arm cpu-smoke] [--limit 200] [--concurrency 4]

Prints exact_match (both filters), Correct/N and wall time for each, and whether every greedy answer matched.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.config.arms import load_arm
from harness.measure.gsm8k import evaluate, filter_scores, make_model, score_samples, select_task
from harness.serve.launch import launch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", default="cpu-smoke")
    parser.add_argument("--limit", type=int, default=200, help="questions (1319 = the whole test set)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-gen-toks", type=int, default=48)
    args = parser.parse_args()

    arm = load_arm(args.arm)
    tmp = Path(tempfile.mkdtemp(prefix="bench-gsm8k-"))
    live = launch(arm, tmp / arm.name)
    try:
        source = select_task(tmp / "task")
        lm = make_model(live.info.base_url, arm.model.served_name, args.concurrency, 3, arm.timeouts.request_s,
                        args.max_gen_toks, live.server.check_alive)
        ev = evaluate(lm, source, 5, args.limit, tmp / "suite")
        model_args = (f"base_url={live.info.base_url}/v1/completions,model={arm.model.served_name},"
                      f"tokenizer_backend=none,tokenized_requests=False,num_concurrent={args.concurrency},"
                      f"max_gen_toks={args.max_gen_toks},max_retries=3")
        cli = [str(Path(sys.executable).parent / "lm_eval"), "--model", "local-completions", "--model_args",
               model_args, "--tasks", source.task, "--include_path", str(source.include_path), "--num_fewshot", "5",
               "--limit", str(args.limit), "--output_path", str(tmp / "cli"), "--log_samples"]
        t0 = time.monotonic()
        done = subprocess.run(cli, capture_output=True, text=True, env={**os.environ, "HF_DATASETS_OFFLINE": "1"})
        cli_wall = time.monotonic() - t0
        if done.returncode != 0:
            raise SystemExit(done.stderr[-3000:])
    finally:
        live.server.stop()
    results = json.loads(next((tmp / "cli").rglob("results_*.json")).read_text())
    cli_samples = [json.loads(x) for x in next((tmp / "cli").rglob("samples_*.jsonl")).read_text().splitlines()]
    ours, theirs = filter_scores(ev.results, source.task), filter_scores(results, source.task)
    s_ours, s_cli = score_samples(ev.samples), score_samples(cli_samples)
    same = ({(s["doc_id"], s["filter"]): s["resps"] for s in ev.samples}
            == {(s["doc_id"], s["filter"]): s["resps"] for s in cli_samples})
    print(f"arm {arm.name}, task {source.task}, limit {args.limit}, 5-shot, concurrency {args.concurrency}, "
          f"vLLM {live.info.vllm_version}")
    print(f"{'':18}{'strict-match':>14}{'flexible':>12}{'Correct/N':>12}{'errors':>8}{'wall s':>9}")
    for name, scores, sc, errors, wall in (("harness suite", ours, s_ours, ev.request_errors, ev.wall_s),
                                           ("lm-eval CLI", theirs, s_cli, 0, cli_wall)):
        print(f"{name:18}{scores['strict-match'][0]:14.4f}{scores['flexible-extract'][0]:12.4f}"
              f"{sc.correct['strict-match']:>7}/{sc.n:<4}{errors:8}{wall:9.1f}")
    print(f"every greedy answer identical: {same}; exact_match equal: {ours == theirs}")


if __name__ == "__main__":
    main()
