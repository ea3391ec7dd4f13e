"""The controls behind the float32 anchor's bound (harness/calibrate/anchor.py FP32_BOUND): how far executions of the
same weights that agree in exact arithmetic land from float32, and from each other.

    .venv/bin/python benchmarks/anchor_controls.py --outputs REFS/cpu-ref-KEY.json --run RUN_DIR [--model DIR]

The reference's stored continuations of RUN_DIR's reference-check prompts are scored by transformers in float32 (eager
attention: the anchor), in float32 with sdpa attention (float32 in another order), and in bf16 with eager and with sdpa
attention (two bf16 executions in other reduction orders, what a GPU reference and its DCP candidate are). Printed:
each one's mean |logprob - float32| over every position, and the bf16 pair's ratio, with the cluster standard error of
its excess (requests as units), as judge_fp32 computes them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.calibrate.anchor import fp32_distance
from harness.config.arms import load_arm
from harness.config.paths import server_python
from harness.measure.prompts import token_space
from harness.records.manifest import read_manifest
from harness.records.schema import TeacherForcedComparison
from harness.records.started import recorded_workload
from harness.refcheck.prompts.check_prompts import build_check_prompts
from harness.refcheck.store.fp32_scores import job, read_outputs

VARIANTS = (("float32", "sdpa"), ("bfloat16", "eager"), ("bfloat16", "sdpa"))


def scored(python: str, model: Path, requests: dict, dtype: str, attention: str, out: Path) -> dict[str, list[float]]:
    import subprocess

    job_file = out.with_suffix(".job.json")
    job_file.write_text(json.dumps({"requests": [{"id": i, "prompt": r["prompt"], "tokens": r["tokens"]}
                                                 for i, r in requests.items()]}))
    subprocess.run([python, "-m", "harness.tinymodel.teacher_score", "--model", str(model), "--job", str(job_file),
                    "--out", str(out), "--dtype", dtype, "--attention", attention], check=True)
    return json.loads(out.read_text())["scores"]


def as_candidate(scores: dict[str, list[float]]) -> list[TeacherForcedComparison]:
    return [TeacherForcedComparison(request=i, prompt_tokens=0, exact=True, first_divergence=None,
                                    candidate_tokens=len(v), reference_tokens=len(v), finite=True, max_drift=None,
                                    candidate_logprobs=v) for i, v in scores.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", type=Path, required=True)
    parser.add_argument("--run", type=Path, required=True, help="a run whose run.json recorded the prompts")
    parser.add_argument("--model", type=Path, default=Path("models/tiny-llama"))
    parser.add_argument("--arm", default="cpu-smoke")
    parser.add_argument("--work", type=Path, default=Path("/tmp/anchor-controls"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(args.run)
    w = recorded_workload(manifest, manifest.pairs[0].candidate, "reference_checks", args.run / "run.json")
    prompts = build_check_prompts(w, token_space(load_arm(args.arm), w)).all()
    requests = job(prompts, read_outputs(args.outputs))
    python = server_python()
    fp32 = scored(python, args.model, requests, "float32", "eager", args.work / "float32-eager.json")
    runs = {f"{d}-{a}": scored(python, args.model, requests, d, a, args.work / f"{d}-{a}.json") for d, a in VARIANTS}
    for name, scores in runs.items():
        d = fp32_distance(1, as_candidate(scores), fp32, fp32)
        print(f"{name}: mean |logprob - float32 eager| {d.candidate:.4g} over {d.positions} positions")
    # the bf16 pair: sdpa as the candidate, eager as the reference (and the other way round)
    for cand, ref in (("bfloat16-sdpa", "bfloat16-eager"), ("bfloat16-eager", "bfloat16-sdpa")):
        d = fp32_distance(1, as_candidate(runs[cand]), runs[ref], fp32)
        print(f"{cand} against {ref}: {d.candidate:.4g} vs {d.reference:.4g}, ratio {d.candidate / d.reference:.4f}, "
              f"excess {d.excess:.3g}, standard error {d.standard_error:.2g}")


if __name__ == "__main__":
    main()
