"""The needle-retrieval circuit for the GPU tiny DeepseekV3 (MLA), in the attention geometry vLLM's MLA backends need
(kv_lora_rank 512, qk_rope_head_dim 64, qk_nope 128, v 128, 16 heads): server environment (torch, transformers).

The same circuit as circuit.py (read it first), but MLA shares parts among heads: the KV latent (512, one RMSNorm
over it), the rotary key k_pe (64, no norm) and the query latent (256, one RMSNorm). A circuit component in a shared
part would move the trained heads, so the model is *trained* with the circuit's room reserved (zero weights that
the optimizer cannot move, `reserve_for_circuit`): hidden dims [384, 512), heads 14 and 15, query-latent dims
[208, 256), KV-latent dims [432, 512) and the even RoPE pairs of k_pe (the trained heads keep the 16 odd pairs).
`install_mla_circuit` then fills that room; ordinary text computes exactly what the trained model computes.
- layer 0, head 14: previous-token head on the even k_pe pairs (constant q and k; kernel to 131072 positions); its
  value (CUR, through the KV latent) goes to PREV.
- layer 1, head 14: induction head on the nope dims: query CUR (query latent), key PREV (KV latent), value CUR; the
  sink key ORD as in circuit.py.
At ordinary tokens the circuit's latent components are ~1e-3 of the trained latent RMS (RMSNorm weights restore
them); at needle tokens they dominate the latent norms, which then divide by fixed values.

Two choices make it hold on a *trained* model, whose residual stream grows ~200x through its layers (the
GSM8K-trained tiny MLA) while the circuit's embedding-time features keep their size:
- the ordinary/needle switch is its own hidden dim ORD, set on ordinary tokens only: at needle tokens it is exactly
  zero in any precision, so the layer-1 sink and the lm_head's needle suppression (weights ~1/ORD's smallest share,
  over 1e6 on the trained model) meet no cancellation for bf16 to spoil (an earlier form, CONST minus the needle
  code, retrieved 0.0 on the trained model);
- the needle scale is NEEDLE_SCALE x the largest trained residual RMS at any norm's input, not at the embedding:
  at a needle token the trained heads still add their mean value (a zero query attends uniformly), and it must
  stay small beside the codes.
benchmarks/mla_circuit_probe.py --residual-growth G scales a random-init model's layer outputs by G, as training
does, and --train-steps N trains it on GSM8K first.

Measured on one H200 (benchmarks/mla_circuit_probe.py: a random-init model of this shape, room reserved, circuit
installed; transformers 5.17, SDPA, bf16): greedy copy accuracy 1.0 at 1000, 8192, 32768, 65536, 98304 and 122000
tokens (span 48, cue 16, depths 5/50/95 %); ordinary text identical (max |delta logprob| 0.0 on 8 prompts); the
previous-token head peaked at offset 2 instead: 0.01 at 1000, 0.0 at 32768. Kernel gap 0.22 of the peak to 131072.
On the GSM8K-trained model (make-tiny-model --arch deepseek_v3 --device cuda, one H200): 1.0 at 1000 to 122000
tokens, ordinary text identical 13/13 (docs/evidence/h200-long-context-2026-12-02c.md).
"""

from __future__ import annotations

import math

from harness.tinymodel.circuit import (
    CONST_EPS,
    LOGIT_UNIT,
    MATCH_UNIT,
    NEEDLE_SCALE,
    NO_FAULTS,
    ORDINARY_BIAS,
    PREV_GAP,
    PREV_RATIO,
    SINK_MIN,
    Faults,
    rope_theta,
)
from harness.tinymodel.needles import CODE_DIMS, code_dims
from harness.tinymodel.ropekernel import kernel_gap, kernel_weights, rope_frequencies

HIDDEN_RESERVED = 128  # the last hidden dims
HEADS_RESERVED = 2  # the last heads
Q_LATENT_RESERVED = 48
KV_LATENT_RESERVED = 80
LATENT_EPS = 1e-3  # circuit latent / trained latent RMS at ordinary tokens


def circuit_pairs(rope_dim: int) -> list[int]:
    """The k_pe pairs the circuit owns: the even ones (a kernel over 16 pairs keeps a 0.16 gap to 131072)."""
    return list(range(0, rope_dim // 2, 2))


def reserved_masks(model) -> dict:
    """{parameter: 0/1 mask of the same shape}: 0 where the circuit's room is (kept zero while training)."""
    import torch

    c = model.config
    h0 = c.hidden_size - HIDDEN_RESERVED
    nh, nope, rope, v = c.num_attention_heads, c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
    qh, kvh = nope + rope, nope + v
    t_heads = nh - HEADS_RESERVED
    ql0, kl0 = c.q_lora_rank - Q_LATENT_RESERVED, c.kv_lora_rank - KV_LATENT_RESERVED
    pair_dims = [2 * j + k for j in circuit_pairs(rope) for k in (0, 1)]
    masks = {}

    def mask(p, fill):
        m = torch.ones_like(p)
        fill(m)
        masks[p] = m

    mask(model.model.embed_tokens.weight, lambda m: m[:, h0:].zero_())
    mask(model.lm_head.weight, lambda m: m[:, h0:].zero_())
    for layer in model.model.layers:
        a = layer.self_attn

        def q_b(m):
            m[:, ql0:] = 0
            m[t_heads * qh:] = 0
            for hh in range(t_heads):
                m[[hh * qh + nope + d for d in pair_dims]] = 0

        def kv_a(m):
            m[:, h0:] = 0
            m[kl0:c.kv_lora_rank] = 0
            m[[c.kv_lora_rank + d for d in pair_dims]] = 0

        def kv_b(m):
            m[:, kl0:] = 0
            m[t_heads * kvh:] = 0

        def o(m):
            m[h0:] = 0
            m[:, t_heads * v:] = 0

        mask(a.q_a_proj.weight, lambda m: (m[:, h0:].zero_(), m[ql0:].zero_()))
        mask(a.q_b_proj.weight, q_b)
        mask(a.kv_a_proj_with_mqa.weight, kv_a)
        mask(a.kv_b_proj.weight, kv_b)
        mask(a.o_proj.weight, o)
        mask(layer.mlp.gate_proj.weight, lambda m: m[:, h0:].zero_())
        mask(layer.mlp.up_proj.weight, lambda m: m[:, h0:].zero_())
        mask(layer.mlp.down_proj.weight, lambda m: m[h0:].zero_())
    return masks


def reserve_for_circuit(model) -> None:
    """Zero the circuit's room and keep it zero under training (its gradients are masked; AdamW without weight
    decay then never moves it)."""
    import torch

    def hook(m):
        on: dict = {}

        def apply(g):
            key = (g.device, g.dtype)
            if key not in on:
                on[key] = m.to(g.device, g.dtype)
            return g * on[key]
        return apply

    with torch.no_grad():
        for p, m in reserved_masks(model).items():
            p.mul_(m)
            p.register_hook(hook(m))


def grow_vocab(model, vocab_size: int) -> None:
    """Embedding and output head with vocab_size rows: the trained rows copied, the new ones zero (set later)."""
    import torch

    old_e, old_h = model.model.embed_tokens.weight.data, model.lm_head.weight.data
    e = torch.zeros(vocab_size, old_e.shape[1], dtype=old_e.dtype)
    h = torch.zeros(vocab_size, old_h.shape[1], dtype=old_h.dtype)
    e[:old_e.shape[0]], h[:old_h.shape[0]] = old_e, old_h
    model.model.embed_tokens = torch.nn.Embedding(vocab_size, e.shape[1], _weight=e)
    model.lm_head = torch.nn.Linear(h.shape[1], vocab_size, bias=False)
    model.lm_head.weight.data = h
    model.config.vocab_size = vocab_size


def install_mla_circuit(model, trained_vocab: int, needle_ids: list[int], faults: Faults = NO_FAULTS,
                        calibration: list[list[int]] | None = None, kernel_len: int | None = None) -> dict:
    """Fill the reserved room (model in float32, vocabulary already holding the needle rows). Returns what was set."""
    import numpy as np
    import torch

    cfg = model.config
    n_hidden, eps = cfg.hidden_size, cfg.rms_norm_eps
    h0 = n_hidden - HIDDEN_RESERVED
    CONST, CUR, PREV, RET = h0, h0 + 1, h0 + 1 + CODE_DIMS, h0 + 1 + 2 * CODE_DIMS
    ORD = RET + CODE_DIMS  # ordinary tokens only: exactly zero at needle tokens in any precision (nothing writes it)
    nh, nope, rope, vd = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    qh, kvh = nope + rope, nope + vd
    head = nh - HEADS_RESERVED  # the circuit's head in both layers
    ql0, kl0 = cfg.q_lora_rank - Q_LATENT_RESERVED, cfg.kv_lora_rank - KV_LATENT_RESERVED
    QC, QORD, QCUR = ql0, ql0 + 1, ql0 + 2  # query latent: layer 0 constant; layer 1 sink, code
    KCUR, KPREV, KORD = kl0, kl0 + CODE_DIMS, kl0 + 2 * CODE_DIMS  # KV latent: value code; key code, sink
    scale = 1 / math.sqrt(nope + rope)  # the softmax scale of every head
    layers = model.model.layers
    cur = slice(CUR, CUR + CODE_DIMS)
    with torch.no_grad():
        emb = model.model.embed_tokens.weight
        trained_emb = emb[:trained_vocab, :h0]
        # Ordinary tokens: CONST = ORD = CONST_EPS x the row's RMS over the full width, so both normalise to exactly
        # 1 at layer 0 whatever the token (norm weight 1/CONST_EPS).
        const = torch.sqrt((trained_emb.pow(2).sum(-1) / n_hidden + eps) / (1 / CONST_EPS ** 2 - 2 / n_hidden))
        emb[:trained_vocab, CONST] = const
        emb[:trained_vocab, ORD] = const
        for norm in (layers[0].input_layernorm, layers[1].input_layernorm, model.model.norm):
            norm.weight[CONST] = 1 / CONST_EPS
            norm.weight[ORD] = 1 / CONST_EPS
        # Calibrated on ordinary text before any circuit weight is set: what the trained model computes.
        lat = _latent_rms(model, calibration or [], h0, ORD, ql0, kl0)
        # Needle tokens dominate the residual stream at every layer, not only at the embedding: a trained model's
        # stream grows through its layers (the GSM8K-trained tiny MLA: ~200x by layer 1, largest RMS 7,958 on an
        # H200), and at a needle token the trained heads still add their mean value, which must stay small beside the
        # codes.
        c = NEEDLE_SCALE * lat["residual_max"]
        p = r = PREV_RATIO * c
        const_n = math.sqrt((2 * c * c / n_hidden + eps) / (1 / CONST_EPS ** 2 - 1 / n_hidden))
        for i, tid in enumerate(needle_ids):
            emb[tid].zero_()
            emb[tid, CONST] = const_n
            for k in code_dims(i):
                emb[tid, CUR + k] = c

        def needle_rms(*squares: float) -> float:
            return math.sqrt((sum(squares) + const_n ** 2) / n_hidden + eps)

        rms0, rms1 = needle_rms(2 * c * c), needle_rms(2 * c * c, 2 * p * p)
        rmsf = needle_rms(2 * c * c, 2 * p * p, 2 * r * r)
        for norm, rms in ((layers[0].input_layernorm, rms0), (layers[1].input_layernorm, rms1),
                          (model.model.norm, rmsf)):
            norm.weight[cur] = rms / c
            norm.weight[PREV:PREV + CODE_DIMS] = rms / p
            norm.weight[RET:RET + CODE_DIMS] = rms / r

        # Latent scales at ordinary tokens: LATENT_EPS x the smallest trained latent RMS seen on calibration text.
        q_small = [LATENT_EPS * lat[f"q{li}"] for li in range(2)]
        kv_small = LATENT_EPS * lat["kv1"]
        big = 1.0  # needle tokens: circuit latents of this size dominate the (near-zero) trained latents
        a0, a1 = layers[0].self_attn, layers[1].self_attn
        for a in (a0, a1):  # reserved latent dims never saw an input while training: their weights are at init
            a.q_a_layernorm.weight[ql0:] = 1.0
            a.kv_a_layernorm.weight[kl0:] = 1.0

        # Layer 0 query latent QC: tiny, from CONST (u_CONST = 1 at layer 0). Normalised, it is smallest at the
        # ordinary token with the largest trained latent RMS; the query (all keys' common factor) scales with it.
        a0.q_a_proj.weight[QC, CONST] = q_small[0]
        qc_min = q_small[0] / math.sqrt(lat["q0_max"] ** 2 + q_small[0] ** 2 / cfg.q_lora_rank + 1e-6)
        # KV latent KCUR (value): the CUR code, large.
        for k in range(CODE_DIMS):
            a0.kv_a_proj_with_mqa.weight[KCUR + k, CUR + k] = big
            a1.kv_a_proj_with_mqa.weight[KCUR + k, CUR + k] = big
        # Normalised KCUR at a needle token of layer 0 (trained latent ~0): big / rms of its latent.
        kcur0 = 1 / math.sqrt(2 / cfg.kv_lora_rank + eps)
        # k_pe pairs (even) from CONST: the kernel; q_rot from QC with the phase of the peak offset.
        freqs_all = rope_frequencies(rope_theta(cfg), rope)
        pairs = circuit_pairs(rope)
        freqs = freqs_all[pairs]
        max_len = kernel_len or cfg.max_position_embeddings
        w = kernel_weights(freqs, max_len)
        gap, at = kernel_gap(w, freqs, max_len)
        peak = PREV_GAP / gap / qc_min  # q scale at the smallest query
        amp = np.sqrt(w * peak / scale)
        qrow = head * qh + nope
        for jj, j in enumerate(pairs):
            ph = faults.prev_offset * freqs[jj]
            a0.q_b_proj.weight[qrow + 2 * j, QC] = amp[jj] * math.cos(ph)
            a0.q_b_proj.weight[qrow + 2 * j + 1, QC] = -amp[jj] * math.sin(ph)
            a0.kv_a_proj_with_mqa.weight[cfg.kv_lora_rank + 2 * j, CONST] = amp[jj]
        # Value: head 14's v = KCUR code (unit per dim at a needle), o_proj -> PREV (p per unit).
        vrow = head * kvh + nope
        for k in range(CODE_DIMS):
            a0.kv_b_proj.weight[vrow + k, KCUR + k] = 1 / kcur0
            a0.o_proj.weight[PREV + k, head * vd + k] = p

        # Layer 1: query latent QCUR (code, large) and QORD (sink, tiny); KV latent KPREV (code, large), KORD (tiny).
        for k in range(CODE_DIMS):
            a1.q_a_proj.weight[QCUR + k, CUR + k] = big
            a1.kv_a_proj_with_mqa.weight[KPREV + k, PREV + k] = big
        a1.q_a_proj.weight[QORD, ORD] = q_small[1]
        a1.kv_a_proj_with_mqa.weight[KORD, ORD] = kv_small
        # Normalised codes at a needle token inside a span: q latent holds 2 big dims, KV latent 4 (KCUR, KPREV).
        qcode = 1 / math.sqrt(2 / cfg.q_lora_rank + eps)
        kcode = 1 / math.sqrt(4 / cfg.kv_lora_rank + eps)
        unit = math.sqrt(MATCH_UNIT / scale)
        qrow, krow = head * qh, head * kvh
        for k in range(CODE_DIMS):
            a1.q_b_proj.weight[qrow + k, QCUR + k] = unit / qcode
            a1.kv_b_proj.weight[krow + k, KPREV + k] = unit / kcode
            a1.kv_b_proj.weight[vrow + k, KCUR + k] = 1 / kcode
            a1.o_proj.weight[RET + k, head * vd + k] = r
        # Sink: ORD . ORD >= SINK_MIN at ordinary tokens: normalised QORD >= q_small/q1_max, KORD >= kv_small/kv1_max.
        ord_min = lat["ord1"]  # smallest normalised ORD at layer 1 on ordinary text
        q_ord = ord_min * q_small[1] / lat["q1_max"]
        k_ord = ord_min * kv_small / lat["kv1_max"]
        sink = math.sqrt(SINK_MIN / scale / (q_ord * k_ord))
        a1.q_b_proj.weight[qrow + CODE_DIMS, QORD] = sink
        a1.kv_b_proj.weight[krow + CODE_DIMS, KORD] = sink

        # lm_head: RET's code scores the retrieved needle; ORD pushes every needle down at ordinary tokens (at
        # needle tokens ORD is exactly zero, so no large weight meets a cancellation that bf16 would spoil).
        bias = ORDINARY_BIAS / lat["ordf"]
        for i, tid in enumerate(needle_ids):
            row = model.lm_head.weight[tid]
            row.zero_()
            for k in code_dims(i):
                row[RET + k] = LOGIT_UNIT
            row[ORD] = -bias
    return {"reserved": {"hidden": HIDDEN_RESERVED, "heads": HEADS_RESERVED, "q_latent": Q_LATENT_RESERVED,
                         "kv_latent": KV_LATENT_RESERVED, "k_pe_pairs": pairs},
            "prev_token_gap": {"fraction_of_peak": round(gap, 4), "at_offset": at, "logits": PREV_GAP,
                               "checked_to": max_len},
            # 4 significant digits: on the trained model ordf is ~1e-5, which rounding to 4 places shows as 0.0
            "needle_scale": c, "latent_rms": {k: float(f"{v:.4g}") for k, v in lat.items()}}


def _latent_rms(model, calibration: list[list[int]], h0: int, ord_dim: int, ql0: int, kl0: int) -> dict[str, float]:
    """Over ordinary calibration text: the smallest and largest trained query-latent RMS per layer, the KV latent's
    in layer 1, the smallest normalised ORD at layer 1 and at the final norm, and the largest RMS of the trained
    residual stream at any norm's input (float32)."""
    import torch

    if not calibration:
        raise ValueError("install_mla_circuit needs ordinary calibration text")
    got: dict[str, list[torch.Tensor]] = {}
    hooks = []

    def grab(name):
        def hook(module, args, out=None):
            got.setdefault(name, []).append((out if out is not None else args[0]).detach().float()[0])
        return hook

    for li, layer in enumerate(model.model.layers):
        hooks.append(layer.self_attn.q_a_proj.register_forward_hook(grab(f"q{li}")))
        hooks.append(layer.self_attn.kv_a_proj_with_mqa.register_forward_hook(grab(f"kv{li}")))
    hooks.append(model.model.layers[0].input_layernorm.register_forward_pre_hook(grab("x0")))
    hooks.append(model.model.layers[1].input_layernorm.register_forward_pre_hook(grab("x1")))
    hooks.append(model.model.norm.register_forward_pre_hook(grab("xf")))
    try:
        with torch.no_grad():
            for ids in calibration:
                model(input_ids=torch.tensor([ids]))
    finally:
        for hk in hooks:
            hk.remove()

    def rms(name, width):
        x = torch.cat(got[name])[:, :width]
        return x.pow(2).mean(-1).sqrt()

    def ord_share(name, norm):
        x = torch.cat(got[name])
        return x[:, ord_dim] * norm.weight[ord_dim] / torch.sqrt(x.pow(2).mean(-1) + model.config.rms_norm_eps)

    cfg = model.config
    q0, q1 = rms("q0", cfg.q_lora_rank), rms("q1", cfg.q_lora_rank)
    kv1 = rms("kv1", cfg.kv_lora_rank)
    out = {"q0": q0.min(), "q0_max": q0.max(), "q1": q1.min(), "q1_max": q1.max(), "kv1": kv1.min(),
           "kv1_max": kv1.max(), "ord1": ord_share("x1", model.model.layers[1].input_layernorm).min(),
           "ordf": ord_share("xf", model.model.norm).min(),
           "residual_max": max(rms(name, h0).max() for name in ("x0", "x1", "xf"))}
    return {k: float(v) for k, v in out.items()}
