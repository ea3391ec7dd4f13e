"""The DeepseekV3 retrieval circuit on a GPU, without GSM8K: a seeded random-init model of the GPU tiny model's
shape, trained-room reserved (harness/tinymodel/circuit_mla.py), the circuit installed, then greedy copy accuracy
per prompt length in bf16 with transformers (SDPA) and ordinary-text drift against the model without the circuit.
A planted fault (previous-token head peaked at offset 2) must collapse the accuracy.

    python3 benchmarks/mla_circuit_probe.py --device cuda --lengths 1000,8192,32768,65536,98304,122000 --out r.json

--train-steps N trains the model on GSM8K text first (N text steps, as make-tiny-model does, room reserved), so the
circuit meets a trained residual stream (it grows ~200x through the layers) instead of random init's:

    python3 benchmarks/mla_circuit_probe.py --train-steps 100 --gsm8k-train ../shared/data/gsm8k/train.jsonl \
        --dtype bfloat16 --lengths 1000 --kernel-len 8192

--precision-noise adds, for the model with and without the circuit, the largest |delta logprob| of the chosen tokens
between one prefill over prompt + continuation and incremental decode with a KV cache, in --dtype: the rounding
noise a CUDA-graph vs eager reference check meets (the H200 control of 2026-12-02d failed prefix_reuse and
teacher_forcing on the circuit model; is the circuit's large ORD logit what amplifies bf16 rounding?):

    python3 benchmarks/mla_circuit_probe.py --residual-growth 100 --lengths 160 --precision-noise

Runs under the server environment or a GPU image's python3 (torch, transformers, numpy).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.tinymodel.circuit import Faults  # noqa: E402
from harness.tinymodel.circuit_mla import grow_vocab, install_mla_circuit, reserve_for_circuit  # noqa: E402
from harness.tinymodel.generate import (  # noqa: E402
    SEED,
    TrainPlan,
    build_mla_model,
    read_corpus,
    sharpen_head,
    special_ids,
    train,
    train_tokenizer,
)
from harness.tinymodel.probe import ordinary_drift, random_prompts, retrieval_accuracy  # noqa: E402


class StubTokenizer:
    """What build_mla_model reads from a tokenizer: the GPU tiny model's vocabulary size and special ids."""

    bos_token_id, eos_token_id, pad_token_id = 1, 2, 3

    def __len__(self) -> int:
        return 2048


def precision_noise(model, prompts: list[list[int]], new_tokens: int = 16) -> dict:
    """Chosen-token logprobs of each prompt's greedy continuation, by one prefill over prompt + continuation and by
    incremental decode (KV cache): max |delta|, median |delta|, and the positions whose argmax differs."""
    import torch

    deltas, flips = [], 0
    with torch.no_grad():
        for ids in prompts:
            x = torch.tensor([ids], device=model.device)
            out = model(input_ids=x, use_cache=True)
            past, logits, cont, step = out.past_key_values, out.logits[0, -1], [], []
            for _ in range(new_tokens):
                lp = torch.log_softmax(logits.double(), -1)
                tok = int(lp.argmax())
                cont.append(tok)
                step.append(lp)
                out = model(input_ids=torch.tensor([[tok]], device=model.device), past_key_values=past, use_cache=True)
                past, logits = out.past_key_values, out.logits[0, -1]
            whole = model(input_ids=torch.tensor([ids + cont], device=model.device)).logits[0].double()
            full = torch.log_softmax(whole, -1)[len(ids) - 1:len(ids) - 1 + new_tokens]
            for i, tok in enumerate(cont):
                deltas.append(abs(float(full[i, tok] - step[i][tok])))
                flips += int(full[i].argmax()) != tok
    deltas.sort()
    return {"positions": len(deltas), "max_abs_delta_logprob": deltas[-1], "median_abs_delta_logprob":
            deltas[len(deltas) // 2], "argmax_flips": flips}


def trained_base(gsm8k_train: Path, steps: int, device: str):
    """(model trained on GSM8K text with the circuit's room reserved, its ordinary token ids), float32 on CPU."""
    texts = read_corpus(gsm8k_train)
    tokenizer = train_tokenizer(texts)
    model = build_mla_model(tokenizer)
    model.config._attn_implementation = "eager"  # as make-tiny-model trains it
    reserve_for_circuit(model)
    train(model, tokenizer, texts, device, TrainPlan(steps=steps))
    sharpen_head(model)
    special = special_ids(tokenizer)
    return model.float().eval(), [i for i in range(model.config.vocab_size) if i not in special]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--lengths", default="1000")
    p.add_argument("--fault-lengths", default="")
    p.add_argument("--depths", default="0.05,0.5,0.95")
    p.add_argument("--drift-prompts", type=int, default=8)
    p.add_argument("--kernel-len", type=int, default=131072)
    p.add_argument("--residual-growth", type=float, default=1.0,
                   help="scale every layer's attention and MLP output weights by this: a trained model's residual "
                        "stream grows through its layers (the GSM8K-trained tiny MLA: ~200x by layer 1), random init's "
                        "does not")
    p.add_argument("--train-steps", type=int, default=0,
                   help="train on GSM8K text for this many steps first (needs --gsm8k-train); 0: random init")
    p.add_argument("--gsm8k-train", type=Path)
    p.add_argument("--precision-noise", action="store_true",
                   help="prefill vs incremental-decode logprob noise in --dtype, with and without the circuit")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    import torch

    torch.manual_seed(SEED)
    if args.train_steps:
        base, ordinary = trained_base(args.gsm8k_train, args.train_steps, args.device)
    else:
        base = build_mla_model(StubTokenizer()).eval()
        reserve_for_circuit(base)
        ordinary = list(range(4, 2048))
        with torch.no_grad():
            base.lm_head.weight.mul_(40)  # trained-size logits, not near-uniform ones
    with torch.no_grad():
        for layer in base.model.layers:
            layer.self_attn.o_proj.weight.mul_(args.residual_growth)
            layer.mlp.down_proj.weight.mul_(args.residual_growth)
    trained_vocab = base.config.vocab_size
    needles = list(range(trained_vocab, trained_vocab + 256))
    result = {}
    for name, fault, lengths in (("clean", Faults(), args.lengths), ("prev_offset_2", Faults(prev_offset=2),
                                                                      args.fault_lengths)):
        if not lengths:
            continue
        wide = copy.deepcopy(base)
        grow_vocab(wide, trained_vocab + 256)
        t0 = time.monotonic()
        info = install_mla_circuit(wide, trained_vocab, needles, fault, random_prompts(ordinary, 4, 256, seed=1),
                                   kernel_len=args.kernel_len)
        t1 = time.monotonic()
        dt = getattr(torch, args.dtype)
        for m in (base, wide):
            m.config._attn_implementation = "sdpa"
            m.to(args.device, dt)
        drift = ordinary_drift(base, wide, random_prompts(ordinary, args.drift_prompts, 64))
        acc = retrieval_accuracy(wide, ordinary, needles, tuple(int(x) for x in lengths.split(",")),
                                 tuple(float(x) for x in args.depths.split(",")), span=48, cue=16)
        if args.precision_noise:
            noise_prompts = random_prompts(ordinary, args.drift_prompts, 128, seed=2)
            noise = {"without_circuit": precision_noise(base, noise_prompts),
                     "with_circuit": precision_noise(wide, noise_prompts)}
            drift["precision_noise"] = noise
        result[name] = {"retrieval": acc, "drift": drift, "circuit": info,
                        "seconds": {"install": round(t1 - t0, 1), "probe": round(time.monotonic() - t1, 1)}}
        print(json.dumps({name: result[name]}), flush=True)
        base.to("cpu", torch.float32)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
