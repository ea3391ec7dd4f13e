"""Generate the deterministic tiny Llama model the CPU arms serve.

Runs in the *server* environment (it needs torch, transformers and tokenizers,
which the harness environment does not carry):

    .venv-server/bin/python -m harness.tinymodel --out models/tiny-llama \
        --gsm8k-train ../shared/data/gsm8k/train.jsonl

No hub access: the byte-level BPE tokenizer is trained on the local GSM8K text and
the model is a small Llama trained for a few hundred steps on the same text, then
its output head is sharpened so greedy choices have a wide top-1/top-2 margin.
Near-uniform logits would make every cross-arm comparison a coin toss.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

SEED = 1234
VOCAB_SIZE = 2048
SEQ_LEN = 256
TRAIN_STEPS = 300
BATCH = 16
# Multiplies the output head after training: logits scale by this factor, which
# widens every top-1/top-2 gap by the same factor without changing greedy choices.
HEAD_SHARPEN = 4.0
# A bf16 forward pass perturbs log-probabilities by ~1e-2; demand 20x that.
MIN_MEDIAN_GAP = 0.2
SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]
PROBE_PROMPTS = [
    "Natalia sold clips to 48 of her friends in April,",
    "Weng earns $12 an hour for babysitting. Yesterday,",
    "Betty is saving money for a new wallet which costs $100.",
    "James writes a 3-page letter to 2 different friends twice a week.",
    "Albert is wondering how much pizza he can eat in one day.",
]


def read_corpus(train_jsonl: Path) -> list[str]:
    texts = []
    with train_jsonl.open() as f:
        for line in f:
            row = json.loads(line)
            texts.append(f"Question: {row['question']}\nAnswer: {row['answer']}\n\n")
    return texts


def train_tokenizer(texts: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=8192,
    )


def shared_config(tokenizer) -> dict:
    """Config fields every generated model shares: the trained tokenizer's vocabulary and special ids, and an untied
    output head (sharpen_head scales it alone)."""
    return {"vocab_size": len(tokenizer), "rope_theta": 10000.0, "tie_word_embeddings": False,
            "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id}


def build_model(tokenizer, arch: str = "llama"):
    if arch == "deepseek_v3":
        return build_mla_model(tokenizer)
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,  # vLLM's CPU attention refuses head_dim 16
        max_position_embeddings=8192,
        **shared_config(tokenizer),
    )
    torch.manual_seed(SEED)
    return LlamaForCausalLM(config)


def build_mla_model(tokenizer):
    """A small DeepseekV3 (MLA) for GPU arms: the attention geometry of the real thing (kv_lora_rank 512,
    qk_rope_head_dim 64, which vLLM's MLA backends require), dense MLPs, two layers."""
    import torch
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    config = DeepseekV3Config(
        hidden_size=512,
        intermediate_size=1024,
        moe_intermediate_size=256,
        num_hidden_layers=2,
        first_k_dense_replace=2,  # every layer dense: no experts to route
        n_routed_experts=8,
        n_shared_experts=1,
        num_experts_per_tok=2,
        n_group=1,
        topk_group=1,
        topk_method="noaux_tc",  # vLLM loads gate.e_score_correction_bias only with these
        scoring_func="sigmoid",
        num_attention_heads=16,
        num_key_value_heads=16,
        q_lora_rank=256,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
        max_position_embeddings=65536,
        **shared_config(tokenizer),
    )
    torch.manual_seed(SEED)
    return DeepseekV3ForCausalLM(config)


def train(model, tokenizer, texts: list[str], device: str = "cpu") -> float:
    import torch

    ids = tokenizer("".join(texts), add_special_tokens=False)["input_ids"]
    data = torch.tensor(ids, dtype=torch.long)
    model.to(device)
    gen = torch.Generator().manual_seed(SEED)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    model.train()
    loss = torch.tensor(float("nan"))
    for step in range(TRAIN_STEPS):
        starts = torch.randint(0, len(data) - SEQ_LEN - 1, (BATCH,), generator=gen)
        batch = torch.stack([data[s : s + SEQ_LEN] for s in starts.tolist()]).to(device)
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"  step {step:4d} loss {loss.item():.3f}", file=sys.stderr)
    model.eval()
    model.to("cpu")
    return float(loss.item())


def sharpen_head(model) -> None:
    import torch

    with torch.no_grad():
        model.lm_head.weight.mul_(HEAD_SHARPEN)


def median_top_gap(model, tokenizer, new_tokens: int = 32) -> float:
    """Median top-1 minus top-2 log-probability along greedy continuations, in bf16."""
    import torch

    gaps: list[float] = []
    m = model.to(torch.bfloat16)
    with torch.no_grad():
        for prompt in PROBE_PROMPTS:
            ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
            for _ in range(new_tokens):
                logits = m(input_ids=ids).logits[0, -1].float()
                top = torch.log_softmax(logits, dim=-1).topk(2).values
                gaps.append(float(top[0] - top[1]))
                ids = torch.cat([ids, logits.argmax().view(1, 1)], dim=1)
    return statistics.median(gaps)


def make_tiny_model(out: Path, train_jsonl: Path, arch: str = "llama", device: str = "cpu") -> dict:
    import torch

    torch.manual_seed(SEED)
    torch.set_num_threads(1)  # deterministic reductions
    texts = read_corpus(train_jsonl)
    tokenizer = train_tokenizer(texts)
    model = build_model(tokenizer, arch)
    final_loss = train(model, tokenizer, texts, device)
    sharpen_head(model)
    gap = median_top_gap(model, tokenizer)
    if gap < MIN_MEDIAN_GAP:
        raise SystemExit(
            f"tiny model is not peaked enough: median top-1/top-2 gap {gap:.3f} < {MIN_MEDIAN_GAP}"
        )
    out.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    summary = {
        "seed": SEED,
        "arch": arch,
        "trained_on": device,
        "train_steps": TRAIN_STEPS,
        "final_loss": round(final_loss, 4),
        "median_top_gap_bf16": round(gap, 4),
        "head_sharpen": HEAD_SHARPEN,
        "source": str(train_jsonl),
    }
    (out / "tiny_model.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--gsm8k-train", type=Path, required=True)
    parser.add_argument("--arch", choices=["llama", "deepseek_v3"], default="llama",
                        help="llama: the CPU pair's model; deepseek_v3: an MLA model for GPU arms")
    parser.add_argument("--device", default="cpu", help="where to train (cuda on a GPU machine: seconds)")
    args = parser.parse_args(argv)
    if not args.gsm8k_train.is_file():
        print(f"error: GSM8K train file not found: {args.gsm8k_train} "
              "(set HARNESS_GSM8K_DIR to the folder holding train.jsonl)", file=sys.stderr)
        return 2
    summary = make_tiny_model(args.out, args.gsm8k_train, args.arch, args.device)
    print(json.dumps(summary))
    return 0

