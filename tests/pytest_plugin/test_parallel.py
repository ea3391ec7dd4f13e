"""Parallel arms' plumbing: node ids without xdist's group suffix, waits that end when the awaited worker is done,
leases only for GPU arms."""

from __future__ import annotations

import threading
import time

from byhand import runpytest_by_hand

from harness.config.arms import load_arm
from harness.pytest_plugin import parallel
from harness.pytest_plugin.parallel import leased, mark_worker_done, wait_until
from harness.pytest_plugin.parallel import test_id as node_id


def test_test_id_strips_the_group_suffix_only():
    assert node_id("suites/test_kv_capacity.py::test_kv_capacity[cpu-ref]@cpu-ref") == \
        "suites/test_kv_capacity.py::test_kv_capacity[cpu-ref]"
    assert node_id("suites/test_long_prefix.py::test_long_prefix_tpot_vs_reference@cpu-smoke") == \
        "suites/test_long_prefix.py::test_long_prefix_tpot_vs_reference"
    assert node_id("suites/test_x.py::test_y[a@b]") == "suites/test_x.py::test_y[a@b]"  # an '@' inside the id stays


def test_wait_returns_when_ready(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "POLL_S", 0.01)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    flag = threading.Event()
    threading.Timer(0.1, flag.set).start()
    assert wait_until(flag.is_set, tmp_path) is True


def test_wait_gives_up_once_every_other_worker_is_done(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "POLL_S", 0.01)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")

    def other_finishes():
        monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")  # (same process: set, mark, restore)
        mark_worker_done(tmp_path)
        monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")

    t0 = time.monotonic()
    threading.Timer(0.1, other_finishes).start()
    assert wait_until(lambda: False, tmp_path) is False and time.monotonic() - t0 < 5
    assert (tmp_path / ".workers" / "gw0.done").is_file()


def test_own_marker_does_not_end_the_wait(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    mark_worker_done(tmp_path)
    assert not parallel.others_done(tmp_path)


def test_gpu_arms_get_leased_gpus_cpu_arms_none(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_GPUS", "0,1")
    monkeypatch.setenv("HARNESS_LEASE_DIR", str(tmp_path))
    cpu = load_arm("cpu-ref")
    assert leased(cpu) == (cpu, None)
    gpu = load_arm("dcp8", geometry=False).model_copy(update={"parallelism": load_arm("gpu-mla-ref", geometry=False)
                                                              .parallelism})
    a, lease_a = leased(gpu)
    b, lease_b = leased(gpu)
    assert (a.gpus, b.gpus) == ([0], [1])
    lease_a.release()
    lease_b.release()


def test_parallel_run_then_resume_through_the_cli_without_a_server(tmp_path):
    """The real CLI and pytest-xdist on a suite that starts no server on the CPU pair (dcp_ops skips at dcp 1): two
    workers, records without xdist's '@group' suffix, both workers' done markers; then --resume of the finished run runs
    nothing (no new outcome), exits 0 and is listed in run.json."""
    import json
    import subprocess
    import sys

    from harness.config.paths import REPO_ROOT

    run = tmp_path / "run"
    base = [sys.executable, "-m", "harness", "qualify", "--arm", "cpu-smoke", "--no-vllm-check"]
    first = subprocess.run([*base, "--suites", "dcp_ops", "--run-dir", str(run), "--parallel"], cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    outcomes = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines() if '"outcome"' in x]
    assert [o["test"] for o in outcomes] == ["suites/test_dcp_ops.py::test_dcp_ops"]
    assert sorted(p.name for p in (run / ".workers").iterdir()) == ["gw0.done", "gw1.done"]
    again = subprocess.run([*base, "--resume", str(run)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    lines = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert all(r["attempt"] == 0 for r in lines)  # nothing ran again
    assert json.loads((run / "run.json").read_text())["resumed"][0]["exit_code_before"] == 0


def test_a_test_belongs_to_its_served_arm_else_the_candidate():
    from harness.pytest_plugin.parallel import arm_of

    arms = ("cpu-smoke", "cpu-ref")
    assert arm_of("suites/test_kv_capacity.py::test_kv_capacity[cpu-ref]", arms, "cpu-smoke") == "cpu-ref"
    assert arm_of("suites/test_kv_capacity.py::test_kv_capacity[cpu-smoke]@cpu-smoke", arms, "cpu-smoke") == \
        "cpu-smoke"
    assert arm_of("suites/test_long_prefix.py::test_long_prefix_tpot_vs_reference", arms, "cpu-smoke") == "cpu-smoke"
    assert arm_of("suites/test_x.py::test_y[other]", arms, "cpu-smoke") == "cpu-smoke"
    # several candidates: a candidate's own comparison carries its name
    three = ("cpu-smoke", "cpu-spec", "cpu-ref")
    assert arm_of("suites/test_long_prefix.py::test_long_prefix_tpot_vs_reference[cpu-spec]", three, "cpu-smoke") == \
        "cpu-spec"


def test_the_scheduler_the_outcome_record_and_the_candidate_under_test_use_one_rule(tmp_path):
    """Which arm a test belongs to is answered once (HarnessSession.arm_of): the xdist scheduler's scope, the arm an
    OutcomeRecord names and the candidate a test runs for all come from it."""
    from types import SimpleNamespace

    from startedruns import shipped

    from harness.pytest_plugin.grouping import ArmScheduling
    from harness.pytest_plugin.recording import outcome_record
    from harness.pytest_plugin.session import HarnessSession

    s = HarnessSession(shipped(tmp_path / "run", ["cpu-smoke", "cpu-spec"]))
    scheduler = ArmScheduling.__new__(ArmScheduling)
    scheduler.session = s
    ids = {"suites/test_kv_capacity.py::test_kv_capacity[cpu-ref]": "cpu-ref",
           "suites/test_gsm8k.py::test_gsm8k_vs_reference[cpu-spec]": "cpu-spec",
           "suites/test_kv_capacity.py::test_kv_capacity[cpu-smoke]@cpu-smoke": "cpu-smoke"}
    for nodeid, arm in ids.items():
        assert scheduler._split_scope(nodeid) == arm
        item = SimpleNamespace(nodeid=nodeid, module=SimpleNamespace(__name__="test_x"))
        report = SimpleNamespace(when="call", outcome="passed", passed=True, duration=0.1)
        assert outcome_record(item, report, "run", s.arm_of(nodeid)).arm == arm
        test = s.under_test(nodeid)
        assert test.arm == arm and test.candidate == ("cpu-smoke" if arm == "cpu-ref" else arm)  # its first candidate
        assert test.reference == "cpu-ref"


def test_a_serial_run_orders_tests_reference_first_then_arm_by_arm():
    from harness.pytest_plugin.grouping import order_by_arm

    keys = [("A", 0), ("A", 1), ("R", 1), ("B", 2), ("A", 2), ("B", 1), ("R", 1), ("B", 0)]
    order = order_by_arm(keys, ["R", "A", "B"])
    assert [keys[i] for i in order] == [("R", 1), ("R", 1), ("A", 0), ("A", 1), ("A", 2), ("B", 0), ("B", 1), ("B", 2)]
    assert order[:2] == [2, 6]  # stable: the command line's file order within an arm and phase


def test_a_parallel_run_loads_the_arms_server_before_waiting_for_another_workers_capture():
    from types import SimpleNamespace

    # seen on the 2-core CI machine: the candidate's worker waited for the reference's outputs first and only then
    # loaded its own server, so the two loads never overlapped
    from harness.pytest_plugin.grouping import order_by_arm, phase

    needs = SimpleNamespace(fixturenames=["reference_outputs", "candidate"])
    served = SimpleNamespace(fixturenames=["served_arm"])
    other = SimpleNamespace(fixturenames=["candidate"])
    items = [needs, served, other]
    serial = order_by_arm([("A", phase(i)) for i in items], ["A"])
    parallel = order_by_arm([("A", phase(i, parallel=True)) for i in items], ["A"])
    assert [items[k] for k in serial] == [needs, served, other]
    assert [items[k] for k in parallel] == [served, needs, other]


NAME_ONLY_CONFTEST = '''
import pytest
pytest_plugins = ["harness.pytest_plugin"]

@pytest.fixture(scope="session")
def served_arm(request):  # the arm's name instead of its server: these tests are about where tests run
    return request.param
'''


def where_tests_ran(pytester, tmp_path, monkeypatch, suite: str, *args: str) -> list[list[str]]:
    """Run `suite` (as suites/test_a.py, each test appending a line to $WHERE) under real xdist with the harness's
    plugin, by hand (tests/byhand.py: the server environment's answers from the user's cache); the lines, split."""
    from harness.config.paths import REPO_ROOT

    pytester.makeconftest(NAME_ONLY_CONFTEST)
    (pytester.mkdir("suites") / "test_a.py").write_text(suite)
    where = tmp_path / "where.txt"
    monkeypatch.setenv("WHERE", str(where))
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))  # this checkout's harness, wherever the environment points
    result = runpytest_by_hand(pytester, "suites", "--parallel-arms", *args, "--run-dir", str(tmp_path / "run"),
                               "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    return [line.split() for line in where.read_text().splitlines()]


def test_each_arms_tests_run_in_one_worker_of_their_own(pytester, tmp_path, monkeypatch):
    """Real xdist controller and workers under --parallel-arms: every test of an arm (its served_arm tests, and the
    candidate's comparison) runs on one worker, the two arms on two. (`--dist loadgroup` spread one arm over both under
    pytest 9.2: each worker then started that arm's server.)"""
    ran = where_tests_ran(pytester, tmp_path, monkeypatch, '''
import os

def note(arm):
    with open(os.environ["WHERE"], "a") as f:
        f.write(f"{arm} {os.environ['PYTEST_XDIST_WORKER']}\\n")

def test_one(served_arm): note(served_arm)
def test_two(served_arm): note(served_arm)
def test_three(served_arm): note(served_arm)
def test_vs_reference(): note("cpu-smoke")
''', "-n", "2", "--arm", "cpu-smoke")
    workers = {arm: {w for a, w in ran if a == arm} for arm, _ in ran}
    assert sorted(a for a, _ in ran) == ["cpu-ref"] * 3 + ["cpu-smoke"] * 4
    assert len(workers["cpu-smoke"]) == len(workers["cpu-ref"]) == 1, ran
    assert workers["cpu-smoke"] != workers["cpu-ref"], ran


def test_two_candidates_and_their_shared_reference_each_run_in_one_worker(pytester, tmp_path, monkeypatch):
    """`--arms cpu-smoke,cpu-spec` (both against cpu-ref) under --parallel-arms with three workers: the shared
    reference's tests run once, on one worker; each candidate's served tests and its own comparison on another."""
    ran = where_tests_ran(pytester, tmp_path, monkeypatch, '''
import os

def note(arm, what):
    with open(os.environ["WHERE"], "a") as f:
        f.write(f"{arm} {what} {os.environ['PYTEST_XDIST_WORKER']}\\n")

def test_one(served_arm): note(served_arm, "served")
def test_two(served_arm): note(served_arm, "served")
def test_vs_reference(request, under_test):
    note(request.node.callspec.params["_for_candidate"], "vs-" + under_test.pair()[1])
''', "-n", "3", "--arms", "cpu-smoke,cpu-spec")
    assert sorted((a, w) for a, w, _ in ran) == sorted(
        [("cpu-ref", "served")] * 2 + [(c, "served") for c in ("cpu-smoke", "cpu-spec") for _ in range(2)]
        + [("cpu-smoke", "vs-cpu-ref"), ("cpu-spec", "vs-cpu-ref")])
    workers = {arm: {w for a, _, w in ran if a == arm} for arm, _, _ in ran}
    assert all(len(w) == 1 for w in workers.values()), ran
    assert len({next(iter(w)) for w in workers.values()}) == 3, ran


def test_under_refresh_a_waiting_worker_takes_only_this_runs_capture_not_the_old_store(tmp_path, monkeypatch):
    # --refresh-reference --parallel: the store holds the previous outputs under the same key until the reference's
    # worker has re-captured them; the candidate's worker read those at once and compared against stale outputs
    from startedruns import shipped

    from harness.pytest_plugin import references
    from harness.pytest_plugin.session import HarnessSession
    from harness.refcheck.store.reference_store import StoredOutputs

    old = StoredOutputs("cpu-ref", "key", tmp_path / "old.json", {}, reused=True)
    monkeypatch.setattr(references.store, "load", lambda *a: old)
    monkeypatch.setattr(references, "installed_vllm_version", lambda python: "0.0-test")
    run = tmp_path / "run"
    waiting = HarnessSession(shipped(run, ["cpu-smoke"], refresh_reference=True, parallel=True)).references
    assert waiting.outputs("cpu-ref", "cpu-smoke", capture_missing=False) is None  # the old store is not this run's capture
    references.refreshed_marker(run, "cpu-ref").parent.mkdir(parents=True)
    references.refreshed_marker(run, "cpu-ref").write_text("saved")  # what the capturing worker writes after save
    assert waiting.outputs("cpu-ref", "cpu-smoke", capture_missing=False) is old
    plain = HarnessSession(shipped(tmp_path / "run2", ["cpu-smoke"], parallel=True)).references
    assert plain.outputs("cpu-ref", "cpu-smoke", capture_missing=False) is old  # without refresh the store is the answer
