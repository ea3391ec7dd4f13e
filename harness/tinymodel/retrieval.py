"""Give the trained tiny Llama its needle-retrieval circuit and measure it (server environment).

Steps: round the trained weights to bf16 (what the model dir held before the circuit; the CPU arms serve it in
float32), widen it (circuit.widen_llama), add the needle tokens and set the circuit, then check ordinary text
(PROBE_PROMPTS and random-token prompts: greedy continuations identical, log-probabilities within DRIFT_MAX) and
measure greedy copy accuracy per prompt length in float32. The widened model is saved in float32: bf16 would round
the re-scaled trained norm weights (x sqrt(2/3)) and move ordinary outputs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from harness.tinymodel.circuit import (
    NO_FAULTS,
    Faults,
    add_needle_vocab,
    install_llama_circuit,
    one_kv_head_per_query_head,
    widen_llama,
)
from harness.tinymodel.probe import PROBE_PROMPTS, ordinary_drift, random_prompts, retrieval_accuracy

RETRIEVAL_LENGTHS = (512, 1024, 2048, 4000)  # the CPU long_context grid (max_model_len 4096)
DRIFT_MAX = 1e-3  # largest |delta log-probability| on ordinary text allowed (float32 reassociation: ~1e-5)
MIN_RETRIEVAL = 0.9
# The GPU long_context grids' lengths (long_context_gpu.yaml, long_context_gpu_120k.yaml).
MLA_LENGTHS = (1000, 8192, 16600, 32768, 65536, 98304, 122000)
# Where the CPU generator measures the MLA circuit (float32 on two cores: 16600 tokens already take minutes); the
# device measures every MLA_LENGTHS in bf16 before a run (harness/tinymodel/verify.py).
CPU_MLA_LENGTHS = (1000, 8192)


def rebuilt(model, dtype):
    """A fresh model of the same class and config holding `model`'s weights in `dtype`, in eval mode. Not
    model.to(dtype): that also casts the rotary inv_freq buffer, and a bf16 round trip (median_top_gap's) leaves
    RoPE frequencies off by up to 0.4%, which servers (computing them in float32) do not share."""
    state = model.state_dict()
    fresh = type(model)(model.config)
    fresh.load_state_dict(state)
    return fresh.to(dtype).eval()


def add_llama_retrieval(model, tokenizer, texts: list[str], special: set[int], quick: bool = False,
                        faults: Faults = NO_FAULTS):
    """(widened model, tokenizer with needles, summary for tiny_model.json); SystemExit when ordinary text moved or
    retrieval is below MIN_RETRIEVAL at some length (not in quick mode)."""
    import torch

    base = rebuilt(model.to(torch.bfloat16), torch.float32)
    trained_vocab = base.config.vocab_size
    ordinary = [i for i in range(trained_vocab) if i not in special]
    tokenizer, needles = add_needle_vocab(tokenizer)
    vocab = -(-len(tokenizer) // 64) * 64
    wide = widen_llama(base, vocab).eval()
    calibration = [tokenizer(t, add_special_tokens=False)["input_ids"][:256] for t in texts[:8]]
    calibration += random_prompts(ordinary, 4, 256, seed=1)
    circuit = install_llama_circuit(wide, trained_vocab, needles, faults, calibration)
    wide = one_kv_head_per_query_head(wide)  # measured and saved as vLLM serves it
    probes = [tokenizer(p)["input_ids"] for p in PROBE_PROMPTS] + random_prompts(ordinary, 8, 64)
    drift = ordinary_drift(base, wide, probes)
    lengths = (256,) if quick else RETRIEVAL_LENGTHS
    accuracy = retrieval_accuracy(wide, ordinary, needles, lengths)
    summary = {"needle_tokens": needles, "retrieval_accuracy": accuracy,
               "retrieval": {"method": "hand-set previous-token + induction heads on reserved needle tokens "
                                       "(harness/tinymodel/circuit.py)",
                             "measured": "transformers, float32, greedy; span 24, cue 8, depths 0.05/0.5/0.95",
                             "ordinary_text": drift, **circuit}}
    if not quick:
        if drift["greedy_identical"] != drift["prompts"] or drift["max_abs_delta_logprob"] > DRIFT_MAX:
            raise SystemExit(f"the retrieval circuit moved ordinary text: {drift}")
        low = {n: a for n, a in accuracy.items() if a < MIN_RETRIEVAL}
        if low:
            raise SystemExit(f"retrieval below {MIN_RETRIEVAL} at {low}")
    return wide, tokenizer, summary


@dataclass(frozen=True)
class MlaCircuitOptions:
    """How add_mla_retrieval builds and checks the MLA circuit."""
    quick: bool = False  # toy sizes (the --quick determinism plan): one short length, no verdict
    lengths: tuple[int, ...] = MLA_LENGTHS  # where retrieval accuracy is measured
    faults: Faults = NO_FAULTS
    strict: bool = True  # falling short is fatal; False (--keep-weak-retrieval): the model without the circuit


def add_mla_retrieval(model, tokenizer, texts: list[str], special: set[int], device: str = "cpu",
                      options: MlaCircuitOptions = MlaCircuitOptions()):
    """The DeepseekV3 model (trained with the circuit's room reserved: circuit_mla.reserve_for_circuit) with the
    needle tokens and the circuit, in float32 on CPU; retrieval measured in bf16 on `device` (transformers, SDPA),
    ordinary text against the model without the circuit (bf16 on `device`). Returns (model, tokenizer, summary);
    the caller saves it in bf16."""
    import torch

    from harness.tinymodel.circuit_mla import grow_vocab, install_mla_circuit

    quick, lengths, faults, strict = options.quick, options.lengths, options.faults, options.strict

    base = rebuilt(model.to("cpu"), torch.float32)
    trained_vocab = base.config.vocab_size
    ordinary = [i for i in range(trained_vocab) if i not in special]
    plain_tokenizer = tokenizer
    tokenizer, needles = add_needle_vocab(tokenizer)
    wide = copy.deepcopy(base)
    grow_vocab(wide, -(-len(tokenizer) // 64) * 64)
    calibration = [tokenizer(t, add_special_tokens=False)["input_ids"][:256] for t in texts[:8]]
    calibration += random_prompts(ordinary, 4, 256, seed=1)
    circuit = install_mla_circuit(wide, trained_vocab, needles, faults, calibration,
                                  kernel_len=8192 if quick else None)
    probes = [tokenizer(p)["input_ids"] for p in PROBE_PROMPTS] + random_prompts(ordinary, 8, 64)
    # bf16 where the arms serve it (a GPU); float32 on CPU, whose bf16 matmuls take minutes (the --quick test).
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    for m in (base, wide):
        m.config._attn_implementation = "sdpa"  # no (L x L) score matrix at long lengths
        m.to(device, dtype)
    drift = ordinary_drift(base, wide, probes[:2] if quick else probes, new_tokens=4 if quick else 16)
    accuracy = (retrieval_accuracy(wide, ordinary, needles, (96,), depths=(0.5,), span=24, cue=8) if quick
                else retrieval_accuracy(wide, ordinary, needles, lengths, span=48, cue=16))
    for m in (base, wide):
        m.to("cpu")
    summary = {"needle_tokens": needles, "retrieval_accuracy": accuracy,
               "retrieval": {"method": "hand-set previous-token + induction heads on reserved needle tokens, in "
                                       "room reserved while training (harness/tinymodel/circuit_mla.py)",
                             "measured": f"transformers, {str(dtype)[6:]} on {device}, greedy; span 48, cue 16, "
                                         "depths 0.05/0.5/0.95",
                             "ordinary_text": drift, **circuit}}
    if not quick:
        problems = circuit_problems(drift, accuracy)
        if problems and strict:
            raise SystemExit("; ".join(problems) + " (--keep-weak-retrieval saves the model without the circuit)")
        if problems:
            # --keep-weak-retrieval: the trained model without the circuit (a circuit that does not retrieve only
            # adds needle-scale weights that amplify bf16 noise: measured on one H200, a clean CUDA-graph control
            # drifted by up to 89 nats on needle prompts), no needle tokens, and tiny_model.json says why.
            return base, plain_tokenizer, {"retrieval_accuracy_of_circuit": accuracy, "retrieval_problems": problems,
                                           "retrieval": {**summary["retrieval"], "installed": False}}
    return wide, tokenizer, summary


def circuit_problems(drift: dict, accuracy: dict) -> list[str]:
    """Why an MLA circuit falls short of a retrieving tiny model: ordinary text moved, or retrieval below
    MIN_RETRIEVAL at some length."""
    problems = []
    if drift["greedy_identical"] != drift["prompts"]:
        problems.append(f"the retrieval circuit moved ordinary text: {drift}")
    low = {n: a for n, a in accuracy.items() if a < MIN_RETRIEVAL}
    if low:
        problems.append(f"retrieval below {MIN_RETRIEVAL} at {low}")
    return problems
