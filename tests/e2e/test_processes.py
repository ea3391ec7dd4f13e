"""How the orphan tests find vLLM's engine core before they signal (tests/e2e/processes.py), on stand-in process
trees: a parent whose grandchild carries the engine core's title in its argv. No vLLM: these run in `make test-unit`
too."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest
from processes import is_engine_core, tree_with_engine_core

# A stand-in harness: it starts a "server" at once, which after `delay` s starts a process whose argv carries the
# title (in the environment until then: no argv above it names an engine core).
SERVER = "import os, subprocess, sys, time; time.sleep(float(sys.argv[1])); " \
         "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', os.environ['TITLE']]); time.sleep(60)"
PARENT = f"""
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", {SERVER!r}, sys.argv[1]])
time.sleep(60)
"""


@pytest.fixture
def harness():
    """start(delay, title): the stand-in's psutil.Process; its whole tree is killed at the end."""
    started: list[subprocess.Popen] = []

    def start(delay: float, title: str) -> psutil.Process:
        proc = subprocess.Popen([sys.executable, "-c", PARENT, str(delay)], env={**os.environ, "TITLE": title})
        started.append(proc)
        return psutil.Process(proc.pid)

    yield start
    for proc in started:
        try:
            for p in psutil.Process(proc.pid).children(recursive=True):
                p.kill()
        except psutil.NoSuchProcess:
            pass
        proc.kill()
        proc.wait()


def test_the_tree_comes_back_once_the_engine_core_runs_not_before(harness):
    root = harness(1.0, "VLLM::EngineCore")
    t0 = time.monotonic()
    tree = tree_with_engine_core(root, timeout=30, poll_s=0.05)
    assert time.monotonic() - t0 >= 0.9  # it waited for the grandchild
    cores = [p for p in tree if is_engine_core(p)]
    assert len(cores) == 1 and cores[0].parent().pid != root.pid  # a grandchild: found through the whole tree


def test_no_engine_core_fails_within_the_bound_naming_what_ran(harness):
    root = harness(0.0, "VLLM::APIServer")
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match=rf"no vLLM EngineCore process under {root.pid} \(5 s passed\); its "
                                             r"processes: \d+ python\S*: "):
        tree_with_engine_core(root, timeout=5, poll_s=0.05)
    assert time.monotonic() - t0 < 15


def test_a_harness_that_ends_first_fails_at_once():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    root = psutil.Process(proc.pid)
    proc.wait()  # reaped: the process is gone
    with pytest.raises(AssertionError, match=rf"under {root.pid} \(process {root.pid} ended\); its processes: none"):
        tree_with_engine_core(root, timeout=60)
