"""A hand-set retrieval circuit added to the trained tiny Llama: it copies reserved needle tokens from any distance
and leaves ordinary text exactly as the trained model computes it (server environment: torch, transformers).

Gradient training of induction did not work at this size (see generate.py), so the circuit is set by hand, in
residual dimensions and attention heads of its own; trained weights neither read nor write them:
- extra residual dims (relative to the trained hidden size): CONST (every token, tiny), CUR (the needle's code, at
  needle tokens), PREV (the previous token's code, written by layer 0), RET (the retrieved code, written by layer 1);
- layer 0, head 4: a previous-token head. Its query and key are constant (from CONST), so RoPE alone sets the score:
  a sum of cosines peaked at offset 1 (ropekernel.py picks the weights and checks the gap to max_position). Its value
  is CUR: PREV gets the previous token's code.
- layer 1, head 4: an induction head. Query CUR, key PREV, in the slowest RoPE pairs (head_dim 128 with rope_theta
  1e8: the trained heads' 32 frequencies are the even pairs' and the odd pairs turn < 2e-4 rad per 1k tokens), so the
  score is the codes' overlap at any distance: 2 units for the needle's own successor, <= 1 for another needle. A
  sink key (ORD: CONST minus its needle-position share, zero at needles) makes ordinary tokens attend to ordinary
  ones, whose value is 0. Its value CUR goes to RET.
- the final norm and lm_head: needle rows read RET (code overlap) and a bias that is large and negative at ordinary
  tokens (so a needle never wins there) and cancelled at needle tokens.
RMSNorm couples all dims. At ordinary tokens the extras are ~1e-3 of the trained dims' RMS (trained RMS moves by
~1e-9) and large norm weights restore them. At needle tokens the extras dominate (the trained embedding is zero), so
the norm divides by a fixed RMS and the circuit's scale does not depend on context. The trained dims are re-scaled
for the wider hidden size (norm weights x sqrt(old/new), eps x old/new) so their normalised values are unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.tinymodel.needles import CODE_DIMS, N_NEEDLES, code_dims, needle_name
from harness.tinymodel.ropekernel import kernel_gap, kernel_weights, rope_frequencies

EXTRA_HIDDEN = 128  # residual dims the circuit owns (98 used; hidden stays a multiple of 64)
HEAD_DIM = 128  # was 64: the trained heads keep the even RoPE pairs, the circuit gets slow odd ones
ROPE_THETA = 1e8  # 1e8^(-2i/128) = 1e4^(-2i/64): pair i here turns at the trained model's pair i/2 (i even)
CONST_EPS = 1e-3  # ordinary tokens: CONST / trained RMS
NEEDLE_SCALE = 1e3  # needle tokens: CUR's value / the largest trained embedding RMS (extras dominate the RMS there)
PREV_RATIO = 3.0  # PREV and RET values / CUR's: the ordinary token after a span then has almost a needle's RMS
PREV_GAP = 40.0  # layer 0: peak score minus any other offset's (logits; ln 8192 = 9)
MATCH_UNIT = 40.0  # layer 1: score per shared code digit (own successor 80, another needle <= 40, ordinary 0)
SINK_MIN = 30.0  # layer 1: smallest ordinary-to-ordinary sink score
LOGIT_UNIT = 40.0  # needle logit per shared digit with RET at a needle token (retrieved: 80, another needle <= 40)
ORDINARY_BIAS = 100.0  # needle logits at ordinary tokens are at most -this (at the smallest CONST share seen)


@dataclass(frozen=True)
class Dims:
    """Residual dims of the widened model."""

    trained: int

    @property
    def const(self) -> int:
        return self.trained

    def cur(self, k: int = 0) -> int:
        return self.trained + 1 + k

    def prev(self, k: int = 0) -> int:
        return self.trained + 1 + CODE_DIMS + k

    def ret(self, k: int = 0) -> int:
        return self.trained + 1 + 2 * CODE_DIMS + k

    @property
    def hidden(self) -> int:
        return self.trained + EXTRA_HIDDEN


@dataclass(frozen=True)
class Faults:
    """Planted faults for the tests (the default: none)."""

    prev_offset: int = 1  # the previous-token head's peak offset (2: it reads the token two back)


NO_FAULTS = Faults()


def add_needle_vocab(tokenizer):
    """The tokenizer with N_NEEDLES needle tokens appended to its BPE vocabulary (no merges lead to them, so no text
    tokenizes to a needle; they decode as `<needle_000>`...). Returns (tokenizer, needle ids)."""
    import json

    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    doc = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab = doc["model"]["vocab"]
    first = max(max(vocab.values()), *(t["id"] for t in doc["added_tokens"])) + 1
    ids = list(range(first, first + N_NEEDLES))
    for i, tid in enumerate(ids):
        vocab[needle_name(i)] = tid
    fast = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(doc)), unk_token="<unk>",
                                   bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   model_max_length=tokenizer.model_max_length)
    return fast, ids


def rope_theta(config) -> float:
    """The RoPE base: transformers 5 keeps it in rope_parameters, older versions in rope_theta."""
    params = getattr(config, "rope_parameters", None) or {}
    return float(params.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def widen_llama(trained, vocab_size: int):
    """A LlamaForCausalLM with the circuit's room (hidden + EXTRA_HIDDEN, 2 more query heads and 1 more KV head,
    head_dim 128, rope_theta 1e8, vocab_size) computing exactly the trained model on ordinary tokens: trained
    weights copied into their slots, the rest zero. The circuit's weights are set by install_llama_circuit."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    c = trained.config
    old_hd, heads, kv = c.head_dim, c.num_attention_heads, c.num_key_value_heads
    theta = rope_theta(c)
    if abs(theta ** 2 - ROPE_THETA) > 1e-6 * ROPE_THETA or HEAD_DIM != 2 * old_hd:
        raise ValueError("the widened RoPE must hold the trained frequencies: needs head_dim 64 and rope_theta 1e4")
    d = Dims(c.hidden_size)
    ratio = c.hidden_size / d.hidden
    cfg = LlamaConfig(**{**c.to_dict(), "hidden_size": d.hidden, "head_dim": HEAD_DIM,
                         "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_THETA},
                         "num_attention_heads": heads + 2, "num_key_value_heads": kv + 1, "vocab_size": vocab_size,
                         "rms_norm_eps": c.rms_norm_eps * ratio})
    cfg.architectures = ["LlamaForCausalLM"]
    new = LlamaForCausalLM(cfg)
    half = old_hd // 2
    # Old dims (i, i + 32) of a head are RoPE pair i; here pair i is dims (i, i + 64).
    rot_map = torch.cat([torch.arange(half), torch.arange(half) + HEAD_DIM // 2])
    scale_q = math.sqrt(HEAD_DIM / old_hd)  # softmax scale is 1/sqrt(head_dim): keep q.k/sqrt(d) unchanged
    sd_old = trained.state_dict()
    with torch.no_grad():
        for p in new.parameters():
            p.zero_()
        h = c.hidden_size
        new.model.embed_tokens.weight[: c.vocab_size, :h] = sd_old["model.embed_tokens.weight"]
        new.lm_head.weight[: c.vocab_size, :h] = sd_old["lm_head.weight"]
        new.model.norm.weight[:h] = sd_old["model.norm.weight"] * math.sqrt(ratio)
        for li, layer in enumerate(new.model.layers):
            pre = f"model.layers.{li}."
            for norm in ("input_layernorm", "post_attention_layernorm"):
                getattr(layer, norm).weight[:h] = sd_old[pre + norm + ".weight"] * math.sqrt(ratio)
            for name, n_heads, scale in (("q_proj", heads, scale_q), ("k_proj", kv, 1.0)):
                w_old = sd_old[pre + f"self_attn.{name}.weight"]
                w_new = getattr(layer.self_attn, name).weight
                for hh in range(n_heads):
                    w_new[hh * HEAD_DIM + rot_map, :h] = w_old[hh * old_hd:(hh + 1) * old_hd] * scale
            w_old = sd_old[pre + "self_attn.v_proj.weight"]
            for hh in range(kv):
                layer.self_attn.v_proj.weight[hh * HEAD_DIM:hh * HEAD_DIM + old_hd, :h] = \
                    w_old[hh * old_hd:(hh + 1) * old_hd]
            w_old = sd_old[pre + "self_attn.o_proj.weight"]
            for hh in range(heads):
                layer.self_attn.o_proj.weight[:h, hh * HEAD_DIM:hh * HEAD_DIM + old_hd] = \
                    w_old[:, hh * old_hd:(hh + 1) * old_hd]
            for name in ("gate_proj", "up_proj"):
                getattr(layer.mlp, name).weight[:, :h] = sd_old[pre + f"mlp.{name}.weight"]
            layer.mlp.down_proj.weight[:h] = sd_old[pre + "mlp.down_proj.weight"]
    return new


def install_llama_circuit(model, trained_vocab: int, needle_ids: list[int], faults: Faults = NO_FAULTS,
                          calibration: list[list[int]] | None = None) -> dict:
    """Set the circuit's weights in a widen_llama model (in place). `calibration`: ordinary token sequences whose
    hidden states size the sink and the ordinary-token bias. Returns what was set (for tiny_model.json)."""
    import numpy as np
    import torch

    cfg = model.config
    d = Dims(cfg.hidden_size - EXTRA_HIDDEN)
    n_hidden, eps = cfg.hidden_size, cfg.rms_norm_eps
    head, kvh = cfg.num_attention_heads - 2, cfg.num_key_value_heads - 1  # the circuit's query and KV head
    half = HEAD_DIM // 2
    emb = model.model.embed_tokens.weight
    layers = model.model.layers
    with torch.no_grad():
        trained_emb = emb[:trained_vocab, :d.trained]
        # Ordinary tokens: CONST = CONST_EPS x the row's RMS over the new width, so CONST normalises to exactly
        # w / (1/CONST_EPS) = 1 at layer 0 whatever the token.
        row_ms = trained_emb.pow(2).sum(-1) / n_hidden
        const = torch.sqrt((row_ms + eps) / (1 / CONST_EPS ** 2 - 1 / n_hidden))
        emb[:trained_vocab, d.const] = const
        # Needle tokens: trained dims zero, CUR = c at the code's two dims, CONST chosen to normalise to 1 as well.
        c = NEEDLE_SCALE * float(torch.sqrt(trained_emb.pow(2).mean(-1)).max())
        p = r = PREV_RATIO * c
        const_n = math.sqrt((2 * c * c / n_hidden + eps) / (1 / CONST_EPS ** 2 - 1 / n_hidden))
        for i, tid in enumerate(needle_ids):
            emb[tid].zero_()
            emb[tid, d.const] = const_n
            for k in code_dims(i):
                emb[tid, d.cur(k)] = c

        def needle_rms(*squares: float) -> float:  # the RMS at a needle token (trained dims negligible)
            return math.sqrt((sum(squares) + const_n ** 2) / n_hidden + eps)

        # Norm weights on the extras: CONST x 1/CONST_EPS everywhere; CUR, PREV, RET normalise to 1 per code dim
        # at a needle token inside a span (the layer's RMS there is fixed: extras dominate).
        rms0 = needle_rms(2 * c * c)
        rms1 = needle_rms(2 * c * c, 2 * p * p)
        rmsf = needle_rms(2 * c * c, 2 * p * p, 2 * r * r)
        for norm, rms in ((layers[0].input_layernorm, rms0), (layers[1].input_layernorm, rms1),
                          (model.model.norm, rmsf)):
            norm.weight[d.const] = 1 / CONST_EPS
            norm.weight[d.cur(0):d.cur(CODE_DIMS)] = rms / c
            norm.weight[d.prev(0):d.prev(CODE_DIMS)] = rms / p
            norm.weight[d.ret(0):d.ret(CODE_DIMS)] = rms / r
        qs, ks, vs = (slice(head * HEAD_DIM, (head + 1) * HEAD_DIM), slice(kvh * HEAD_DIM, (kvh + 1) * HEAD_DIM),
                      slice(kvh * HEAD_DIM, (kvh + 1) * HEAD_DIM))

        # Layer 0: previous-token head. q_j = sqrt(A_j) e^{-i offset theta_j}, k_j = sqrt(A_j): the score at
        # m - n = offset + delta is sum_j A_j cos(delta theta_j) / sqrt(head_dim).
        freqs = rope_frequencies(ROPE_THETA, HEAD_DIM)
        w = kernel_weights(freqs, cfg.max_position_embeddings)
        gap, at = kernel_gap(w, freqs, cfg.max_position_embeddings)
        peak = PREV_GAP / gap  # scores' peak: the gap is that fraction of it
        amp = np.sqrt(w * peak * math.sqrt(HEAD_DIM))
        att0 = layers[0].self_attn
        qv = torch.zeros(HEAD_DIM, dtype=torch.float64)
        kv = torch.zeros(HEAD_DIM, dtype=torch.float64)
        for j in range(half):
            phase = faults.prev_offset * freqs[j]
            qv[j], qv[j + half] = amp[j] * math.cos(phase), -amp[j] * math.sin(phase)
            kv[j] = amp[j]
        att0.q_proj.weight[qs, d.const] = qv.float()
        att0.k_proj.weight[ks, d.const] = kv.float()
        att0.v_proj.weight[vs.start:vs.start + CODE_DIMS, d.cur(0):d.cur(CODE_DIMS)] = torch.eye(CODE_DIMS)
        att0.o_proj.weight[d.prev(0):d.prev(CODE_DIMS), qs.start:qs.start + CODE_DIMS] = p * torch.eye(CODE_DIMS)

        # Layer 1: induction head in the slowest pairs: code digit k -> dim half - 16 + k (pair 48+k, first half)
        # for block 1, the same pairs' second half for block 2; the sink in pair 47.
        code_slot = [half - CODE_DIMS // 2 + k for k in range(CODE_DIMS // 2)]
        code_slot += [s + half for s in code_slot]
        sink_slot = half - CODE_DIMS // 2 - 1
        att1 = layers[1].self_attn
        qk = math.sqrt(MATCH_UNIT * math.sqrt(HEAD_DIM))
        for k, slot in enumerate(code_slot):
            att1.q_proj.weight[qs.start + slot, d.cur(k)] = qk
            att1.k_proj.weight[ks.start + slot, d.prev(k)] = qk
        # ORD = u_CONST - lam * sum(u_CUR): zero at every needle token (both scale with the same RMS there).
        lam = (const_n / CONST_EPS) / (2 * c * (rms1 / c))
        ord_row = torch.zeros(n_hidden)
        ord_row[d.const] = 1.0
        ord_row[d.cur(0):d.cur(CODE_DIMS)] = -lam
        att1.k_proj.weight[ks.start + sink_slot] = ord_row
        att1.v_proj.weight[vs.start:vs.start + CODE_DIMS, d.cur(0):d.cur(CODE_DIMS)] = torch.eye(CODE_DIMS)
        att1.o_proj.weight[d.ret(0):d.ret(CODE_DIMS), qs.start:qs.start + CODE_DIMS] = r * torch.eye(CODE_DIMS)

        # The sink's and the bias's scale come from ordinary text: u_CONST at layer 1 and at the final norm.
        ord1, ordf = _const_shares(model, d, calibration or [])
        att1.q_proj.weight[qs.start + sink_slot] = ord_row * (SINK_MIN * math.sqrt(HEAD_DIM) / ord1 ** 2)

        # lm_head: needle rows read RET (LOGIT_UNIT per shared digit), minus a bias from CONST that is
        # >= ORDINARY_BIAS at ordinary tokens, cancelled at needle tokens by the CUR sum.
        bias = ORDINARY_BIAS / ordf
        const_share_n = (const_n / CONST_EPS) / rmsf  # u_CONST at the final norm at a needle token
        for i, tid in enumerate(needle_ids):
            row = model.lm_head.weight[tid]
            row.zero_()
            for k in code_dims(i):
                row[d.ret(k)] = LOGIT_UNIT
            row[d.const] = -bias
            row[d.cur(0):d.cur(CODE_DIMS)] = bias * const_share_n / 2
    return {"extra_hidden": EXTRA_HIDDEN, "head_dim": HEAD_DIM, "rope_theta": ROPE_THETA,
            "prev_token_gap": {"fraction_of_peak": round(gap, 4), "at_offset": at, "logits": PREV_GAP,
                               "checked_to": cfg.max_position_embeddings},
            "needle_scale": c, "sink_min_share": round(ord1, 4), "bias_min_share": round(ordf, 4)}


def _const_shares(model, d: Dims, calibration: list[list[int]]) -> tuple[float, float]:
    """The smallest normalised CONST at layer 1's input and at the final norm over ordinary calibration tokens (it
    is 1 at layer 0 by construction; the residual grows, so it shrinks later). 1.0 without calibration."""
    import torch

    if not calibration:
        return 1.0, 1.0
    seen1: list[float] = []
    seenf: list[float] = []
    captured = {}

    def grab(name):
        def hook(module, args):
            captured[name] = args[0].detach()
        return hook

    hooks = [model.model.layers[1].input_layernorm.register_forward_pre_hook(grab("l1")),
             model.model.norm.register_forward_pre_hook(grab("f"))]
    try:
        with torch.no_grad():
            for ids in calibration:
                model(input_ids=torch.tensor([ids]))
                for name, out, norm in (("l1", seen1, model.model.layers[1].input_layernorm),
                                        ("f", seenf, model.model.norm)):
                    x = captured[name][0].float()
                    rms = torch.sqrt(x.pow(2).mean(-1) + model.config.rms_norm_eps)
                    share = x[:, d.const] * norm.weight[d.const] / rms
                    out.append(float(share.min()))
    finally:
        for hk in hooks:
            hk.remove()
    return min(seen1), min(seenf)


def one_kv_head_per_query_head(model):
    """The same LlamaForCausalLM with grouped-query attention unrolled: each KV head copied once per query head of its
    group, so query head i reads KV head i. Exact (the same keys and values reach every query head), at twice the KV
    bytes per token. Why: the circuit brings 3 KV heads, and vLLM splits KV heads evenly over tensor-parallel ranks,
    so TP2 (cpu-slurm-2node) refuses 3 ("WorkerProc initialization failed"); 6 split 3 + 3."""
    import torch
    from transformers import LlamaForCausalLM

    c = model.config
    heads, kv, hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    if kv == heads:
        return model
    group = heads // kv
    cfg = type(c)(**{**c.to_dict(), "num_key_value_heads": heads})
    cfg.architectures = list(c.architectures or ["LlamaForCausalLM"])
    new = LlamaForCausalLM(cfg).to(next(model.parameters()).dtype)
    rows = torch.cat([torch.arange(hd) + (i // group) * hd for i in range(heads)])  # head i's rows: KV head i//group
    state = model.state_dict()
    for name in list(state):
        if name.endswith(("self_attn.k_proj.weight", "self_attn.v_proj.weight")):
            state[name] = state[name][rows].clone()
    new.load_state_dict(state)
    return new.eval()
