"""The run goes to pytest as a value: qualify's pytest argv restates nothing of the run, and each process reads
run.json at most once -- qualify's and a by-hand run's not at all for a new run (admission writes it), a resume's once
(admission), an xdist worker's never (its controller sends the value)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from byhand import runpytest_by_hand
from startedruns import shipped

from harness.config.paths import REPO_ROOT
from harness.qualify import suites as qualify_suites

RUN_OPTIONS = ("--arm", "--arms", "--reference", "--run-dir", "--set", "--resume", "--refresh-reference",
               "--parallel-arms")

# Counts, in each process (the controller and every xdist worker import this conftest), the reads of a run.json:
# written at the process's end to $READS/<worker id or "main">.
COUNTING_CONFTEST = '''
import os
import pathlib

import pytest

pytest_plugins = ["harness.pytest_plugin"]
READS = []


@pytest.fixture(scope="session")
def served_arm(request):  # the arm's name instead of its server: no server starts
    return request.param

_read_text = pathlib.Path.read_text


def read_text(self, *args, **kwargs):
    if self.name == "run.json":
        READS.append(str(self))
    return _read_text(self, *args, **kwargs)


pathlib.Path.read_text = read_text


def pytest_unconfigure(config):
    pathlib.Path.read_text = _read_text  # an in-process session leaves the caller's Path as it was
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    pathlib.Path(os.environ["READS"], name).write_text(str(len(READS)))
'''

SUITE = '''
def test_one(served_arm):
    pass


def test_two(harness_session):
    assert harness_session.run.arm_set.candidates == ["cpu-smoke"]
'''


def reads(directory: Path) -> dict[str, int]:
    counts = {p.name: int(p.read_text()) for p in directory.iterdir()}
    for p in directory.iterdir():
        p.unlink()
    return counts


@pytest.fixture
def counted(pytester, tmp_path, monkeypatch):
    pytester.makeconftest(COUNTING_CONFTEST)
    (pytester.mkdir("suites") / "test_handover_probe.py").write_text(SUITE)  # a name no test module has
    counts = tmp_path / "reads"
    counts.mkdir()
    monkeypatch.setenv("READS", str(counts))
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    # this test may itself run in an xdist worker: its id must not name the inner sessions' main process
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    return pytester, counts


def test_qualifys_pytest_argv_carries_no_run_and_its_session_reads_no_run_json(counted, tmp_path, monkeypatch):
    """qualify's run-suites step on a recorded run, in this process: the suites see the run handed over, and no
    run.json is read (the value is the run)."""
    pytester, counts = counted
    run = shipped(tmp_path / "run", ["cpu-smoke"], parallel=True)
    run = type(run)(run.run_dir, run.manifest.model_copy(update={"suites": ["handover_probe"]}), run.arms, run.arm_set,
                    parallel=True)
    monkeypatch.setattr(qualify_suites, "SUITES_DIR", pytester.path / "suites")
    argv = qualify_suites.pytest_argv(run)
    assert not [a for a in argv if a.split("=")[0] in RUN_OPTIONS] and argv[argv.index("-n") + 1] == "2"
    serial = type(run)(run.run_dir, run.manifest, run.arms, run.arm_set)
    assert qualify_suites.run_suites(serial) == 0
    assert reads(counts) == {"main": 0}
    outcomes = [json.loads(line) for line in (run.run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(r["test"].rpartition("::")[2] for r in outcomes if r["kind"] == "outcome") == [
        "test_one[cpu-ref]", "test_one[cpu-smoke]", "test_two"]


def test_by_hand_each_process_reads_run_json_at_most_once(counted, tmp_path):
    """pytest by hand under xdist (--parallel-arms -n 2): the controller admits and records the run, its workers get
    it from the controller: none reads run.json. A resume reads it once, in admission."""
    pytester, counts = counted
    run_dir = tmp_path / "run"
    first = runpytest_by_hand(pytester, "suites", "-p", "no:cacheprovider", "--arm", "cpu-smoke", "--run-dir",
                              str(run_dir), "--parallel-arms", "-n", "2")
    first.assert_outcomes(passed=3)
    assert reads(counts) == {"main": 0, "gw0": 0, "gw1": 0}
    (run_dir / "results.jsonl").write_text("")  # nothing recorded: the resume runs every test again
    resumed = runpytest_by_hand(pytester, "suites", "-p", "no:cacheprovider", "--resume", "--run-dir", str(run_dir))
    resumed.assert_outcomes(passed=3)
    assert reads(counts) == {"main": 1}
