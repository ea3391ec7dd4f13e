"""Measure a carried tiny MLA model where it will be served (server environment, a GPU): needle retrieval at every
GPU grid length in bf16 (float32 on CPU) and the median top-1/top-2 gap, refused (exit 3, one line) when retrieval falls below
MIN_RETRIEVAL or the gap below MIN_MEDIAN_GAP. The CPU generator measures retrieval in float32 up to
CPU_MLA_LENGTHS only; this is the bf16, full-length check of the same files, run by keep_model before a device run.

    python -m harness.tinymodel.verify models/tiny-mla [--device cuda] [--lengths 1000,8192] > verify.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from harness.tinymodel.generate import MIN_MEDIAN_GAP, quality, quality_line
from harness.tinymodel.retrieval import MIN_RETRIEVAL, MLA_LENGTHS


def ordinary_ids(summary: dict, vocab: int, special: set[int]) -> list[int]:
    """The filler vocabulary: every id below the first needle that is no special token (pure)."""
    first = min(summary.get("needle_tokens") or [vocab])
    return [i for i in range(first) if i not in special]


def verdict(accuracy: dict[str, float], gap: float) -> list[str]:
    """Why the model is unfit to judge with (pure; empty: fit)."""
    out = []
    low = {n: a for n, a in accuracy.items() if a < MIN_RETRIEVAL}
    if low:
        out.append(f"retrieval below {MIN_RETRIEVAL} at {low}")
    if not accuracy:
        out.append("no retrieval measured (no needle tokens in tiny_model.json)")
    if gap < MIN_MEDIAN_GAP:
        out.append(f"median top-1/top-2 gap {gap:.3f} < {MIN_MEDIAN_GAP}")
    return out


def measure(model_dir: Path, device: str, lengths: tuple[int, ...]) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.tinymodel.probe import retrieval_accuracy

    t0 = time.monotonic()
    summary = json.loads((model_dir / "tiny_model.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16  # bf16 matmuls on CPU take minutes
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="sdpa")
    model.to(device).eval()
    filler = ordinary_ids(summary, model.config.vocab_size, set(tokenizer.all_special_ids))
    accuracy = retrieval_accuracy(model, filler, summary.get("needle_tokens") or [], lengths, span=48, cue=16)
    gap = median_gap_on(model, tokenizer, device)
    measured = {**summary, "retrieval_accuracy": accuracy, "median_top_gap_bf16": round(gap, 4)}
    return {"model": str(model_dir), "device": device, "dtype": str(dtype)[6:], "lengths": list(lengths),
            "quality": quality(measured), "problems": verdict(accuracy, gap),
            "seconds": round(time.monotonic() - t0, 1), "torch": torch.__version__}


def median_gap_on(model, tokenizer, device: str) -> float:
    """generate.median_top_gap for a model already on `device` in bf16 (that one builds its prompts on CPU)."""
    import statistics

    import torch

    from harness.tinymodel.probe import PROBE_PROMPTS

    gaps: list[float] = []
    with torch.no_grad():
        for prompt in PROBE_PROMPTS:
            ids = tokenizer(prompt, return_tensors="pt")["input_ids"].to(device)
            for _ in range(32):
                logits = model(input_ids=ids).logits[0, -1].float()
                top = torch.log_softmax(logits, dim=-1).topk(2).values
                gaps.append(float(top[0] - top[1]))
                ids = torch.cat([ids, logits.argmax().view(1, 1)], dim=1)
    return statistics.median(gaps)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--lengths", default=",".join(map(str, MLA_LENGTHS)))
    args = parser.parse_args(argv)
    if not (args.model_dir / "tiny_model.json").is_file():
        print(f"error: {args.model_dir}/tiny_model.json not found: carry the generated model", file=sys.stderr)
        return 2
    result = measure(args.model_dir, args.device, tuple(int(n) for n in args.lengths.split(",")))
    print(json.dumps(result))
    line = f"verify {args.model_dir.name} on {args.device}: {quality_line(result['quality'])}"
    if result["problems"]:
        print(f"error: {line}: refused: {'; '.join(result['problems'])}", file=sys.stderr)
        return 3
    print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
