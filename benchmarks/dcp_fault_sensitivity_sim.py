"""How visible is a DCP combine fault end to end on the tiny MLA model? A CPU simulation to choose the GPU model.

The GPU runs (docs/evidence/h200x2-dcp-mutations-2026-11-30.md) could not see DCP rank 1's LSE offset by +0.1 end to
end: on near-uniform attention both ranks' partial outputs are similar averages, so re-weighting them moves little,
out' - out = (w1' - w1)(o1 - o0). This script trains the GPU tiny model's architecture briefly on CPU (the same
`harness.tinymodel.generate` code, a smaller plan), then, for query sharpening factors S (q_b_proj scaled by S, an
exact power-of-two in bf16: attention logits scale by S), scores every position of a fixed prompt set three ways:

- reference (TP): one partition of the KV, attention in fp32 from bf16 q/k/v, output rounded to bf16;
- candidate (DCP, clean): KV interleaved over `world` ranks (token j on rank j % world), each rank's partial output
  rounded to bf16 as the kernel writes it, LSE in fp32, combined in fp32 (vLLM's cp_lse_ag_out_rs math);
- candidate (DCP, fault): the same with rank 1's LSE offset by `--offset` before the combine.

It prints, per S, the teacher-forced |delta logprob| of the reference's own tokens for clean and faulty DCP against
TP (mean, p99), the paired shift and its z statistic, and the model's median top-1/top-2 gap (confidence).
Run in the server environment (torch + transformers):

    PYTHONPATH=. .venv-server/bin/python benchmarks/dcp_fault_sensitivity_sim.py \
        --gsm8k-train ../shared/data/gsm8k/train.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import AttentionInterface

from harness.tinymodel.generate import (
    SEED,
    TrainPlan,
    build_mla_model,
    make_deterministic,
    read_corpus,
    sharpen_head,
    special_ids,
    train,
    train_tokenizer,
)

MODE = {"world": 1, "offset": 0.0}


def dcp_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Attention with the KV split over MODE['world'] interleaved ranks and merged by LSE, as DCP does."""
    q, k, v = query.float(), key.float(), value.float()
    scores = torch.matmul(q, k.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask.float()
    world = MODE["world"]
    if world == 1:
        out = torch.softmax(scores, dim=-1) @ v
        return out.to(query.dtype).transpose(1, 2).contiguous(), None
    n = scores.shape[-1]
    owner = torch.arange(n) % world
    partial, lses = [], []
    for r in range(world):
        s = scores.masked_fill((owner != r).view(1, 1, 1, n), float("-inf"))
        lse = torch.logsumexp(s, dim=-1, keepdim=True)  # -inf where the rank holds no visible key
        w = torch.exp(s - torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse)))
        o = (w @ v).to(query.dtype).float()  # the kernel writes its partial output in bf16
        if r == 1:
            lse = lse + MODE["offset"]
        partial.append(o)
        lses.append(lse)
    lse_all = torch.stack(lses)
    total = torch.logsumexp(lse_all, dim=0)
    out = sum(torch.exp(lse_all[r] - total) * partial[r] for r in range(world))
    return out.to(query.dtype).transpose(1, 2).contiguous(), None


AttentionInterface.register("dcp_sim", dcp_attention)


def prompt_set(tokenizer, texts: list[str], n_text: int, n_random: int, random_len: int) -> list[list[int]]:
    rng = random.Random(f"sim-{SEED}")
    allowed = [i for i in range(len(tokenizer)) if i not in special_ids(tokenizer)]
    held_out = texts[-n_text:]
    prompts = [tokenizer(t, add_special_tokens=False)["input_ids"][:256] for t in held_out]
    prompts += [rng.choices(allowed, k=random_len) for _ in range(n_random)]
    return prompts


def greedy(model, ids: list[int], new: int) -> list[int]:
    MODE.update(world=1, offset=0.0)
    with torch.no_grad():
        x = torch.tensor([ids])
        for _ in range(new):
            nxt = model(input_ids=x).logits[0, -1].argmax().view(1, 1)
            x = torch.cat([x, nxt], dim=1)
    return x[0].tolist()


def token_logprobs(model, seq: list[int], world: int, offset: float) -> torch.Tensor:
    """log p(seq[i+1] | seq[:i+1]) for every i, under the given partitioning."""
    MODE.update(world=world, offset=offset)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([seq])).logits[0, :-1].float()
    lp = torch.log_softmax(logits, dim=-1)
    return lp.gather(1, torch.tensor(seq[1:]).view(-1, 1)).squeeze(1)


def top_gap(model, seq: list[int]) -> list[float]:
    MODE.update(world=1, offset=0.0)
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor([seq])).logits[0].float(), dim=-1)
    top = lp.topk(2, dim=-1).values
    return (top[:, 0] - top[:, 1]).tolist()


def measure(model, seqs: list[list[int]], start: int, world: int, offset: float) -> dict:
    clean, fault, gaps = [], [], []
    for seq in seqs:
        ref = token_logprobs(model, seq, 1, 0.0)
        c = (token_logprobs(model, seq, world, 0.0) - ref).abs()[start:]
        f = (token_logprobs(model, seq, world, offset) - ref).abs()[start:]
        clean += c.tolist()
        fault += f.tolist()
        gaps += top_gap(model, seq)[start:]
    diffs = [b - a for a, b in zip(clean, fault, strict=True)]
    sd = statistics.stdev(diffs) if len(diffs) > 1 else 0.0
    z = statistics.fmean(diffs) / (sd / len(diffs) ** 0.5) if sd else 0.0  # paired z (no scipy in this env)
    q = lambda xs, f: sorted(xs)[min(len(xs) - 1, int(f * len(xs)))]  # noqa: E731
    return {"positions": len(clean), "clean_mean": statistics.fmean(clean), "clean_p99": q(clean, 0.99),
            "fault_mean": statistics.fmean(fault), "fault_p99": q(fault, 0.99),
            "shift_over_clean": statistics.fmean(diffs) / max(statistics.fmean(clean), 1e-12),
            "paired_z": z, "median_top_gap": statistics.median(gaps)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gsm8k-train", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--scales", default="1,2,4,8")
    ap.add_argument("--offset", type=float, default=0.1)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--random-len", type=int, default=384)
    ap.add_argument("--new", type=int, default=32, help="greedy tokens the reference continues each prompt with")
    ap.add_argument("--out", type=Path, default=None, help="write the table as JSON here too")
    args = ap.parse_args(argv)

    make_deterministic("cpu")
    torch.set_num_threads(1)
    t0 = time.monotonic()
    texts = read_corpus(args.gsm8k_train, 2000)
    tokenizer = train_tokenizer(texts)
    model = build_mla_model(tokenizer)
    model.config._attn_implementation = "eager"
    plan = TrainPlan(steps=args.steps, seq_len=128, batch=8, corpus_rows=2000)
    loss = train(model, tokenizer, texts[:-16], "cpu", plan)
    sharpen_head(model)
    model.to(torch.bfloat16)
    model.config._attn_implementation = "dcp_sim"
    print(f"trained {args.steps} steps in {time.monotonic() - t0:.0f} s, loss {loss:.3f}", file=sys.stderr)

    base_q = [layer.self_attn.q_b_proj.weight.detach().clone() for layer in model.model.layers]
    prompts = prompt_set(tokenizer, texts, 8, 8, args.random_len)
    rows = []
    for s in [float(x) for x in args.scales.split(",")]:
        with torch.no_grad():
            for layer, w in zip(model.model.layers, base_q, strict=True):
                layer.self_attn.q_b_proj.weight.copy_(w * s)
        seqs = [greedy(model, p, args.new) for p in prompts]
        for kind, part in (("text", seqs[:8]), ("random", seqs[8:])):
            row = {"S": s, "prompts": kind, **measure(model, part, 16, args.world, args.offset)}
            rows.append(row)
            print(json.dumps({k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
