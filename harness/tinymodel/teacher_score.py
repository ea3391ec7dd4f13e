"""Float32 teacher-forced scores of given continuations: the anchor a first calibration is judged by.

Runs in the *server* environment (torch and transformers; the harness environment has neither), on CPU:

    .venv-server/bin/python -m harness.tinymodel.teacher_score --model models/tiny-llama --job JOB.json --out OUT.json

JOB.json: {"requests": [{"id": ..., "prompt": [token ids], "tokens": [token ids]}, ...]}. Each request's prompt + tokens
goes through the model once in float32 (transformers; sdpa attention, float32 throughout: 5e-7 nats from eager attention
on the tiny Llama, at half its time), and the
log-probability of every continuation token given what precedes it is written: OUT.json {"scores": {id: [logprob,
...]}, "dtype", "torch", "transformers"}. Neither arm under test produced these numbers, so each arm's distance to
them is a measure the build under test cannot shape (harness/calibrate/anchor.py). `--dtype bfloat16` scores the same
tokens in bf16 and `--attention eager` in another reduction order: the controls that state how far executions that agree
in exact arithmetic land from each other (docs/gates.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DTYPES = ("float32", "bfloat16")
ATTENTION = ("eager", "sdpa")


def score(model, prompt: list[int], tokens: list[int]) -> list[float]:
    """log p(tokens[i] | prompt + tokens[:i]) for every i, from one forward pass over prompt + tokens."""
    import torch

    ids = torch.tensor([prompt + tokens], dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    start = len(prompt) - 1  # the logits at position p predict token p + 1
    rows = logprobs[start:start + len(tokens)]
    return rows.gather(1, torch.tensor(tokens, dtype=torch.long)[:, None])[:, 0].tolist()


def load_model(model_dir: Path, dtype: str, attention: str = "sdpa"):
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, dtype),
                                                 attn_implementation=attention)
    return model.eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a local model directory (config.json, weights)")
    parser.add_argument("--job", type=Path, required=True, help="JSON: {requests: [{id, prompt, tokens}]}")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--attention", choices=ATTENTION, default="sdpa",
                        help="transformers' attention (eager: the same math in another order, a control)")
    args = parser.parse_args(argv)
    try:
        requests = json.loads(args.job.read_text())["requests"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"teacher_score: {args.job} is no job file ({exc!r}): give {{\"requests\": [{{id, prompt, tokens}}]}}",
              file=sys.stderr)
        return 2
    if not (args.model / "config.json").is_file():
        print(f"teacher_score: {args.model} holds no config.json: give a local model directory", file=sys.stderr)
        return 2
    import torch
    import transformers

    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = load_model(args.model, args.dtype, args.attention)
    scores = {str(r["id"]): score(model, list(r["prompt"]), list(r["tokens"])) for r in requests}
    args.out.write_text(json.dumps({"dtype": args.dtype, "attention": args.attention, "torch": torch.__version__,
                                    "transformers": transformers.__version__, "scores": scores}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
