"""Measure a generated model with transformers (server environment): greedy needle retrieval per prompt length, and
whether ordinary text is computed as by the model without the circuit."""

from __future__ import annotations

import random

from harness.tinymodel.copytask import copy_accuracy
from harness.tinymodel.needles import needle_copy_prompt

# GSM8K openings: the ordinary text whose greedy continuation a circuit or a retraining must leave alone.
PROBE_PROMPTS = [
    "Natalia sold clips to 48 of her friends in April,",
    "Weng earns $12 an hour for babysitting. Yesterday,",
    "Betty is saving money for a new wallet which costs $100.",
    "James writes a 3-page letter to 2 different friends twice a week.",
    "Albert is wondering how much pizza he can eat in one day.",
]

DEPTHS = (0.05, 0.5, 0.95)


def greedy(model, ids: list[int], n: int) -> list[int]:
    """n greedy tokens after `ids` (KV cache, one token a step)."""
    import torch

    out = []
    with torch.no_grad():
        dev = model.device
        res = model(input_ids=torch.tensor([ids], device=dev), use_cache=True)
        for _ in range(n):
            nxt = int(res.logits[0, -1].argmax())
            out.append(nxt)
            res = model(input_ids=torch.tensor([[nxt]], device=dev), past_key_values=res.past_key_values,
                        use_cache=True)
    return out


def retrieval_accuracy(model, filler: list[int], needles: list[int], lengths: tuple[int, ...],
                       depths: tuple[float, ...] = DEPTHS, span: int = 24, cue: int = 8,
                       seed: int = 0) -> dict[str, float]:
    """Greedy copy accuracy per prompt length, averaged over `depths` (the span starts at that fraction of the room
    before the cue), as the long_context grid builds its prompts."""
    result = {}
    for n in lengths:
        scores = []
        for depth in depths:
            rng = random.Random(f"retrieval-{seed}-{n}-{depth!r}")
            at = round(depth * (n - cue - span))
            prompt, expected = needle_copy_prompt(rng, filler, needles, n, span, cue, at)
            scores.append(copy_accuracy(greedy(model, prompt, len(expected)), expected))
        result[str(n)] = round(sum(scores) / len(scores), 4)
    return result


def ordinary_drift(base, widened, prompts: list[list[int]], new_tokens: int = 16) -> dict:
    """Greedy continuations of `prompts` by both models, and the largest |log-probability difference| over the base
    vocabulary along the base model's continuation."""
    import torch

    vocab = base.config.vocab_size
    same = 0
    worst = 0.0
    with torch.no_grad():
        for ids in prompts:
            a, b = greedy(base, ids, new_tokens), greedy(widened, ids, new_tokens)
            same += a == b
            full = torch.tensor([ids + a], device=base.device)
            la = torch.log_softmax(base(input_ids=full).logits[0].double(), -1)
            lb = torch.log_softmax(widened(input_ids=full).logits[0].double(), -1)[:, :vocab]
            worst = max(worst, float((la - lb).abs().max()))
    return {"prompts": len(prompts), "greedy_identical": same, "max_abs_delta_logprob": worst}


def random_prompts(allowed: list[int], count: int, length: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(f"ordinary-{seed}")
    return [rng.choices(allowed, k=length) for _ in range(count)]
