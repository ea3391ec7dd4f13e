"""Generate the deterministic tiny Llama model the CPU arms serve.

Runs in the *server* environment (it needs torch, transformers and tokenizers,
which the harness environment does not carry):

    .venv-server/bin/python -m harness.tinymodel --out models/tiny-llama \
        --gsm8k-train ../shared/data/gsm8k/train.jsonl

No hub access: the byte-level BPE tokenizer is trained on the local GSM8K text and
the model is a small Llama trained for a few hundred steps on the same text, then
its output head is sharpened so greedy choices have a wide top-1/top-2 margin.
Near-uniform logits would make every cross-arm comparison a coin toss.

The GPU model (`--arch deepseek_v3`) is also trained on copy-from-far-back sequences (harness/tinymodel/copytask.py,
interleaved with the GSM8K steps), so its attention over long contexts is sharp and content-dependent, and it is
trained deterministically (deterministic algorithms, CUBLAS_WORKSPACE_CONFIG, TF32 off, fixed seeds and data order):
every device run gets the same weights, whose sha256 goes into tiny_model.json, and the stored reference is reused.

The CPU model retrieves by hand-set weights instead (harness/tinymodel/circuit.py): reserved needle tokens, copied
from any distance by a previous-token and an induction head that ordinary text never activates; tiny_model.json
lists them (`needle_tokens`) with greedy copy accuracy per prompt length (`retrieval_accuracy`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.tinymodel.copytask import copy_prompt, copy_sequence
from harness.tinymodel.pin import generator_hash, sha256_file
from harness.tinymodel.probe import PROBE_PROMPTS

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
TRAIN_THREADS = 2


@dataclass(frozen=True)
class TrainPlan:
    """What one generation trains: GSM8K text steps, interleaved with copy-task steps when copy_steps > 0."""

    steps: int = TRAIN_STEPS  # GSM8K text steps
    seq_len: int = SEQ_LEN
    batch: int = BATCH
    copy_steps: int = 0  # copy-from-far-back steps, one after each text step while any remain
    copy_len: int = 2048
    copy_batch: int = 8
    copy_span: int = 64
    lr: float = 3e-3
    corpus_rows: int | None = None  # None: every GSM8K train row (tokenizer and text)
    probe_lengths: tuple[int, ...] = ()  # copy accuracy measured at these prompt lengths after training
    min_median_gap: float = MIN_MEDIAN_GAP
    gap_tokens: int = 32  # greedy tokens per probe prompt for the median top-1/top-2 gap (no KV cache: quadratic)


PLANS = {
    "llama": TrainPlan(),
    # The GPU model is made on CPU (float32, TRAIN_THREADS threads, deterministic), once, and carried to every GPU
    # kind: trained on a GPU it depended on the kind (H100 31849f3b..., H200 4d59b71b...). On CI's two cores a
    # 256 x 16 step of this model takes ~20 s, so the CPU plan is short: 60 steps of 128 x 8 GSM8K tokens (time in
    # docs/gpu-runs.md, One model everywhere). No copy task: 300 copy steps on a GPU left copy accuracy at 0-0.006
    # (the task does not train at this size); retrieval comes from the hand-set circuit (retrieval.py), which the
    # generator measures and refuses below MIN_RETRIEVAL.
    "deepseek_v3": TrainPlan(steps=60, seq_len=128, batch=8),
}
PLANS["deepseek_v3_mtp"] = PLANS["deepseek_v3"]  # the same target, plus a trained MTP layer (harness/tinymodel/mtp.py)
# Determinism check on CPU (tests): the same code path at toy sizes.
QUICK = TrainPlan(steps=3, seq_len=32, batch=2, copy_steps=3, copy_len=96, copy_batch=2, copy_span=16,
                  corpus_rows=200, probe_lengths=(96,), min_median_gap=0.0, gap_tokens=4)

def read_corpus(train_jsonl: Path, rows: int | None = None) -> list[str]:
    texts = []
    with train_jsonl.open() as f:
        for i, line in enumerate(f):
            if rows is not None and i >= rows:
                break
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
    if arch.startswith("deepseek_v3"):
        return build_mla_model(tokenizer, mtp=arch.endswith("_mtp"))
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


def build_mla_model(tokenizer, mtp: bool = False):
    """A small DeepseekV3 (MLA) for GPU arms: the attention geometry of the real thing (kv_lora_rank 512,
    qk_rope_head_dim 64, which vLLM's MLA backends require), dense MLPs, two layers. With `mtp`, the config also
    declares one MTP layer (index 2), kept dense by first_k_dense_replace."""
    import torch
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    config = DeepseekV3Config(
        hidden_size=512,
        intermediate_size=1024,
        moe_intermediate_size=256,
        num_hidden_layers=2,
        first_k_dense_replace=3 if mtp else 2,  # every layer dense (the MTP layer too): no experts to route
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
        max_position_embeddings=131072,  # the real 120k workload (114k + 6k + 400 out) fits
        **({"num_nextn_predict_layers": 1} if mtp else {}),
        **shared_config(tokenizer),
    )
    torch.manual_seed(SEED)
    return DeepseekV3ForCausalLM(config)


def make_deterministic(device: str) -> None:
    """Same weights on every run of the same hardware and software: deterministic kernels, no TF32, fixed seeds.
    CUBLAS_WORKSPACE_CONFIG must be set before cuBLAS starts (before the first CUDA matmul)."""
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    random.seed(SEED)
    torch.manual_seed(SEED)


def special_ids(tokenizer) -> set[int]:
    return set(tokenizer.all_special_ids)


def train(model, tokenizer, texts: list[str], device: str = "cpu", plan: TrainPlan = PLANS["llama"]) -> float:
    """GSM8K text steps, each followed by a copy step while copy steps remain; batches drawn from seeded
    generators in a fixed order. On CUDA the forward runs under bf16 autocast (deterministic as well)."""
    import torch

    ids = tokenizer("".join(texts), add_special_tokens=False)["input_ids"]
    data = torch.tensor(ids, dtype=torch.long)
    allowed = [i for i in range(len(tokenizer)) if i not in special_ids(tokenizer)]
    copy_rng = random.Random(f"copy-train-{SEED}")
    model.to(device)
    gen = torch.Generator().manual_seed(SEED)
    opt = torch.optim.AdamW(model.parameters(), lr=plan.lr, weight_decay=0.0)
    model.train()
    loss = torch.tensor(float("nan"))

    def step(batch) -> torch.Tensor:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.startswith("cuda")):
            out = model(input_ids=batch, labels=batch).loss
        opt.zero_grad()
        out.backward()
        opt.step()
        return out

    for i in range(plan.steps):
        starts = torch.randint(0, len(data) - plan.seq_len - 1, (plan.batch,), generator=gen)
        loss = step(torch.stack([data[s : s + plan.seq_len] for s in starts.tolist()]).to(device))
        if i < plan.copy_steps:
            seqs = [copy_sequence(copy_rng, allowed, plan.copy_len, plan.copy_span).tokens
                    for _ in range(plan.copy_batch)]
            copy_loss = step(torch.tensor(seqs, dtype=torch.long).to(device))
        if i % 50 == 0:
            extra = f" copy loss {copy_loss.item():.3f}" if i < plan.copy_steps else ""
            print(f"  step {i:4d} loss {loss.item():.3f}{extra}", file=sys.stderr)
    for _ in range(plan.steps, plan.copy_steps):  # copy steps beyond the text steps
        seqs = [copy_sequence(copy_rng, allowed, plan.copy_len, plan.copy_span).tokens for _ in range(plan.copy_batch)]
        step(torch.tensor(seqs, dtype=torch.long).to(device))
    model.eval()
    model.to("cpu")
    return float(loss.item())


def copy_probe(model, tokenizer, lengths: tuple[int, ...], device: str = "cpu", span: int = 96, cue: int = 16,
               per_length: int = 2) -> dict[str, float]:
    """Teacher-forced copy accuracy in bf16 at each prompt length: the fraction of the span's continuation that
    the model predicts as its argmax when the span sits 32 tokens into the context (as in the GPU prompt set)."""
    import torch

    allowed = [i for i in range(len(tokenizer)) if i not in special_ids(tokenizer)]
    rng = random.Random(f"copy-probe-{SEED}")
    m = model.to(device=device, dtype=torch.bfloat16)
    result = {}
    with torch.no_grad():
        for n in lengths:
            s = min(span, max(4, n // 4))
            c = min(cue, s // 2)
            hits = total = 0
            for _ in range(per_length):
                prompt, expected = copy_prompt(rng, allowed, n, s, c, min(32, n // 8))
                ids = torch.tensor([prompt + expected[:-1]], device=device)
                pred = m(input_ids=ids).logits[0, len(prompt) - 1:].argmax(-1).tolist()
                hits += sum(p == e for p, e in zip(pred, expected, strict=True))
                total += len(expected)
            result[str(n)] = round(hits / total, 4)
    model.to("cpu")
    return result


def weights_sha256(model) -> str:
    """sha256 over every tensor (name, dtype, shape, bytes) in name order: the same weights hash the same."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.detach().cpu().contiguous().reshape(-1).view(__import__("torch").uint8).numpy().tobytes())
    return h.hexdigest()


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


def fresh_and_trained(tokenizer, texts: list[str], arch: str, device: str, plan: TrainPlan):
    """A freshly seeded model trained by `plan` (rebuilt from the seed on a retry)."""
    model = build_model(tokenizer, arch)
    if arch.startswith("deepseek_v3"):
        model.config._attn_implementation = "eager"  # plain matmul + softmax: deterministic backward (not SDPA's)
    if arch == "deepseek_v3":  # trained around the retrieval circuit's room (harness/tinymodel/circuit_mla.py)
        from harness.tinymodel.circuit_mla import reserve_for_circuit

        reserve_for_circuit(model)
    return model, train(model, tokenizer, texts, device, plan)


def make_tiny_model(out: Path, train_jsonl: Path, arch: str = "llama", device: str = "cpu",
                    plan: TrainPlan | None = None, strict_retrieval: bool = True, circuit: bool = True) -> dict:
    import torch

    plan = plan or PLANS[arch]
    make_deterministic(device)
    # A fixed thread count, not the machine's: CPU kernels split their reductions by thread count, so the same count
    # gives the same weights. 2, not 1: the CPU training took 613 s on one thread of CI's two cores.
    torch.set_num_threads(TRAIN_THREADS)
    t0 = time.monotonic()
    texts = read_corpus(train_jsonl, plan.corpus_rows)
    tokenizer = train_tokenizer(texts)
    t1 = time.monotonic()
    determinism = "strict"
    try:
        model, final_loss = fresh_and_trained(tokenizer, texts, arch, device, plan)
    except RuntimeError as exc:
        if "deterministic" not in str(exc):
            raise
        # An op without a deterministic kernel in this torch build: train anyway (warn only) and say so; the
        # weights hash in tiny_model.json then tells whether two runs still agree.
        determinism = f"warn_only ({str(exc).splitlines()[0][:200]})"
        print(f"  deterministic algorithms refused an op; retrying warn-only: {exc}", file=sys.stderr)
        torch.use_deterministic_algorithms(True, warn_only=True)
        model, final_loss = fresh_and_trained(tokenizer, texts, arch, device, plan)
    t2 = time.monotonic()
    sharpen_head(model)
    gap = median_top_gap(model, tokenizer, plan.gap_tokens)
    if gap < plan.min_median_gap:
        raise SystemExit(
            f"tiny model is not peaked enough: median top-1/top-2 gap {gap:.3f} < {plan.min_median_gap}"
        )
    copy = copy_probe(model, tokenizer, plan.probe_lengths, device) if plan.probe_lengths else {}
    retrieval = {}
    if arch == "llama":  # the CPU model: a hand-set needle-retrieval circuit on top, saved in float32
        from harness.tinymodel.retrieval import add_llama_retrieval

        model, tokenizer, retrieval = add_llama_retrieval(model, tokenizer, texts, special_ids(tokenizer),
                                                          quick=plan is QUICK)
    elif arch == "deepseek_v3" and not circuit:  # a control: the same trained weights, the circuit left out
        retrieval = {"retrieval": {"installed": False, "why": "built with --without-retrieval-circuit (a control of "
                                                              "the circuit: the same trained weights without it)"}}
        model.to(torch.bfloat16)
    elif arch == "deepseek_v3":  # the GPU model: the same circuit in MLA's geometry, served in bf16
        from harness.tinymodel.retrieval import MlaCircuitOptions, add_mla_retrieval

        from harness.tinymodel.retrieval import CPU_MLA_LENGTHS, MLA_LENGTHS

        options = MlaCircuitOptions(quick=plan is QUICK, strict=strict_retrieval,
                                    lengths=CPU_MLA_LENGTHS if device == "cpu" else MLA_LENGTHS)
        model, tokenizer, retrieval = add_mla_retrieval(model, tokenizer, texts, special_ids(tokenizer), device,
                                                        options)
        model.to(torch.bfloat16)
    else:
        model.to(torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    mtp_summary = {}
    if arch.endswith("_mtp"):
        from harness.tinymodel.mtp import MTP_STEPS, save_mtp, train_mtp

        quick = plan is QUICK  # the --quick determinism plan: toy sizes
        layer, mtp_loss, mtp_acc = train_mtp(model, tokenizer, texts, device, steps=plan.steps if quick else MTP_STEPS,
                                             seq_len=plan.seq_len, batch=plan.batch)
        mtp_summary = {"mtp": {"final_loss": round(mtp_loss, 4), "next_next_token_accuracy": round(mtp_acc, 4),
                               "tensors": save_mtp(out, model, layer)}}
    summary = {
        "seed": SEED,
        "arch": arch,
        "trained_on": device,
        "train_steps": plan.steps,
        "copy_steps": plan.copy_steps,
        "plan": asdict(plan),
        "final_loss": round(final_loss, 4),
        "median_top_gap_bf16": round(gap, 4),
        "copy_accuracy_bf16": copy,
        "head_sharpen": HEAD_SHARPEN,
        "weights_sha256": weights_sha256(model),
        "tokenizer_sha256": hashlib.sha256((out / "tokenizer.json").read_bytes()).hexdigest(),
        "deterministic": determinism,
        "torch": torch.__version__,
        "seconds": {"tokenizer_and_init": round(t1 - t0, 1), "train": round(t2 - t1, 1),
                    "total": round(time.monotonic() - t0, 1)},
        "source": str(train_jsonl),
        "source_sha256": sha256_file(train_jsonl),
        "threads": TRAIN_THREADS,
        "generator_sha256": generator_hash(),
        **retrieval,
        **mtp_summary,
    }
    summary["quality"] = quality(summary)
    (out / "tiny_model.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"tiny model {arch}: {quality_line(summary['quality'])}", file=sys.stderr)
    return summary


def quality(summary: dict) -> dict:
    """The few numbers that say whether a tiny model is fit to judge with (pure; run.json records them per arm):
    the weights hash, the needle-retrieval (greedy copy) accuracy, its smallest value and the lengths measured, and
    the median top-1/top-2 log-probability gap (how peaked greedy choices are)."""
    retrieval = summary.get("retrieval_accuracy") or {}
    return {"weights_sha256": summary.get("weights_sha256"), "retrieval_accuracy": retrieval,
            "retrieval_min": min(retrieval.values()) if retrieval else None,
            "median_top_gap": summary.get("median_top_gap_bf16"), "trained_on": summary.get("trained_on")}


def quality_line(q: dict) -> str:
    """One line of quality(): what generate and the device's verify print."""
    sha = (q.get("weights_sha256") or "?")[:16]
    return (f"weights {sha}, retrieval min {q.get('retrieval_min')} over {sorted(q.get('retrieval_accuracy') or {}, key=int)}"
            f" tokens, median top-2 gap {q.get('median_top_gap')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--gsm8k-train", type=Path, required=True)
    parser.add_argument("--arch", choices=["llama", "deepseek_v3", "deepseek_v3_mtp"], default="llama",
                        help="llama: the CPU pair's model; deepseek_v3: an MLA model for GPU arms; deepseek_v3_mtp: "
                             "the same with a trained MTP layer (the `mtp` speculative arms)")
    parser.add_argument("--device", default="cpu", help="where to train (cuda on a GPU machine: seconds)")
    parser.add_argument("--quick", action="store_true", help="toy sizes (the determinism test), not a usable model")
    parser.add_argument("--keep-weak-retrieval", action="store_true",
                        help="deepseek_v3: when its retrieval circuit falls short (moved ordinary text, or accuracy "
                             "< 0.9 at some length), save the trained model without the circuit and without needle "
                             "tokens instead of refusing; tiny_model.json's retrieval_problems says why")
    parser.add_argument("--without-retrieval-circuit", action="store_true",
                        help="deepseek_v3: save the trained model without the retrieval circuit (a control: does "
                             "the circuit change the model's bf16 noise?); tiny_model.json says it is not installed")
    args = parser.parse_args(argv)
    if args.without_retrieval_circuit and args.arch != "deepseek_v3":
        print(f"error: --without-retrieval-circuit is for --arch deepseek_v3, not {args.arch}", file=sys.stderr)
        return 2
    if not args.gsm8k_train.is_file():
        print(f"error: GSM8K train file not found: {args.gsm8k_train} "
              "(set HARNESS_GSM8K_DIR to the folder holding train.jsonl)", file=sys.stderr)
        return 2
    summary = make_tiny_model(args.out, args.gsm8k_train, args.arch, args.device, QUICK if args.quick else None,
                              strict_retrieval=not args.keep_weak_retrieval,
                              circuit=not args.without_retrieval_circuit)
    print(json.dumps(summary))
    return 0

