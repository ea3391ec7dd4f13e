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


def pytest_collection_modifyitems(config, items):
    # The shared server's users move up to the first of them, so it never idles through other tests' servers (each
    # of those expects every core, and memory is shared); a test that stops it goes last among them.
    users = [i for i in items if "cpu_ref_server" in getattr(i, "fixturenames", ())]
    if not users:
        return
    first = items.index(users[0])
    stoppers = [i for i in users if i.get_closest_marker("stops_shared_server")]
    ordered = [i for i in users if i not in stoppers] + stoppers
    rest = [i for i in items if "cpu_ref_server" not in getattr(i, "fixturenames", ())]
    items[:] = rest[:first] + ordered + rest[first:]
