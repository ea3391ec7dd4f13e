import pytest
from startedruns import handed, shipped

from harness.pytest_plugin.session import HarnessSession


def session(tmp_path, reference="tp8") -> HarnessSession:
    return HarnessSession(shipped(tmp_path / "run", ["dcp8"], reference))


def test_pair_and_records_read_back_from_the_results_file(tmp_path):
    from harness.records.schema import KvCapacityRecord

    s = session(tmp_path)
    assert s.under_test("suites/test_x.py::test_y").pair() == ("dcp8", "tp8") and s.run_id == "run"
    s.writer.append(KvCapacityRecord(run_id="run", arm="dcp8", suite="kv_capacity", device="GPU", tokens=5,
                                     gib_per_worker=None, tp=8, dcp=8, source_line="x"))
    assert [r.tokens for r in s.records()] == [5]


def test_pair_skips_without_a_reference(tmp_path, arms_dir):
    d, write = arms_dir
    write("solo", "extends: base\n")
    from harness.config.arms import load_arm
    from harness.config.armset import ArmSet, Pair

    s = HarnessSession(handed(tmp_path / "run", [load_arm("solo", arms_dir=d)], ArmSet((Pair("solo", None),))))
    with pytest.raises(pytest.skip.Exception, match="names no reference arm"):
        s.under_test("suites/test_x.py::test_y").pair()


def test_reference_defaults_to_the_arms_own(tmp_path):
    assert session(tmp_path, reference=None).under_test("suites/test_x.py::test_y").reference == "tp8"  # dcp8.yaml's


def test_a_session_of_no_suite_files_is_no_run_and_writes_nothing(pytester, tmp_path):
    """Plain `pytest tests` must not litter reports/ with empty runs: a session that runs no suite files admits
    nothing, writes no run.json and has no harness session."""
    pytester.makeconftest('pytest_plugins = ["harness.pytest_plugin"]\n')
    pytester.makepyfile(test_any="def test_passes(request):\n    assert request.config.stash.get("
                        "__import__('harness.pytest_plugin.session', fromlist=['x']).SESSION_KEY, None) is None\n")
    result = pytester.runpytest_inprocess("--arm", "dcp8", "--run-dir", str(tmp_path / "run"), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert not (tmp_path / "run").exists()


def test_a_dead_server_makes_the_arms_remaining_tests_not_run_with_the_cause(tmp_path):
    from types import SimpleNamespace

    from harness.config.errors import HarnessError
    from harness.records.schema import ServerRecord

    state = {"death": None, "stopped": 0}
    server = SimpleNamespace(death=lambda: state["death"], stop=lambda: state.__setitem__("stopped", 1),
                             log_path=tmp_path / "server.log")
    arm = SimpleNamespace(name="dcp8", attention=SimpleNamespace(expected=None))
    s = session(tmp_path)
    s.servers._servers["dcp8"] = SimpleNamespace(arm=arm, server=server)
    s.servers.using("dcp8", "long_prefix")  # alive: remembered as the user
    state["death"] = "exit -9"
    for _ in range(2):  # the next test, and every one after it, reads the same cause
        with pytest.raises(HarnessError, match=r"not run: server of arm 'dcp8' died \(exit -9\) during long_prefix"):
            s.servers.using("dcp8", "kv_capacity")
    with pytest.raises(HarnessError, match="died"):
        s.servers.server("dcp8")  # no relaunch of a dead arm within the run
    died = [r for r in s.records() if isinstance(r, ServerRecord)]
    assert [(r.status, r.reason) for r in died] == [("failed", "died (exit -9) during long_prefix")]
    assert state["stopped"] == 1


def test_a_server_found_dead_after_its_last_test_fails_the_run_with_the_cause(tmp_path):
    """Killed between tests or after them: release (served_arm's teardown) and the end-of-run check both record it
    and say so; a server alive at release is stopped without a word."""
    from types import SimpleNamespace

    from harness.config.errors import HarnessError
    from harness.records.schema import ServerRecord

    def fake(name, death):
        state = {"stopped": 0}
        server = SimpleNamespace(death=lambda: death, stop=lambda: state.__setitem__("stopped", state["stopped"] + 1),
                                 log_path=tmp_path / f"{name}.log")
        arm = SimpleNamespace(name=name, attention=SimpleNamespace(expected=None))
        return SimpleNamespace(arm=arm, server=server), state

    s = session(tmp_path)
    alive, alive_state = fake("tp8", None)
    dead, dead_state = fake("dcp8", "exit -9")
    s.servers._servers.update(tp8=alive, dcp8=dead)
    s.servers.using("tp8", "kv_capacity")
    s.servers._using["dcp8"] = "kv_capacity"  # its last test passed; it died afterwards
    s.servers.release("tp8")
    assert alive_state["stopped"] == 1 and not s.records()
    with pytest.raises(HarnessError, match=r"server of arm 'dcp8' died \(exit -9\) after its last use, by kv_capacity"):
        s.servers.release("dcp8")
    assert dead_state["stopped"] >= 1
    died = [r for r in s.records() if isinstance(r, ServerRecord)]
    assert [(r.arm, r.status, r.reason) for r in died] == [("dcp8", "failed", "died (exit -9) after its last use, by kv_capacity")]

    s2 = session(tmp_path / "end")
    dead2, _ = fake("dcp8", "exit -9")
    alive2, _ = fake("tp8", None)
    s2.servers._servers.update(dcp8=dead2, tp8=alive2)
    (message,) = s2.servers.deaths()
    assert "'dcp8' died (exit -9) after its last use, by start-up" in message and "tp8" in s2.servers._servers


@pytest.mark.parametrize("death, code", [(None, 0), ("exit -9", 1)])
def test_a_server_dead_at_the_end_of_a_passing_run_sets_exit_status_1(pytester, tmp_path, death, code):
    """The plugin's session-finish hook: every test passed, yet the candidate's server had died -> exit 1. The run is
    handed to pytest as a value, as qualify hands it."""
    pytester.makeconftest(f'''
from types import SimpleNamespace
from harness.pytest_plugin.session import SESSION_KEY
pytest_plugins = ["harness.pytest_plugin"]

def pytest_sessionstart(session):
    server = SimpleNamespace(death=lambda: {death!r}, stop=lambda: None, log_path="server.log")
    arm = SimpleNamespace(name="dcp8", attention=SimpleNamespace(expected=None))
    session.config.stash[SESSION_KEY].servers._servers["dcp8"] = SimpleNamespace(arm=arm, server=server)
''')
    pytester.makepyfile(test_any="def test_passes():\n    assert True\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", plugins=[shipped(tmp_path / "run", ["dcp8"])])
    assert result.ret == code
    died = "FAILED: server of arm 'dcp8' died (exit -9) after its last use" in result.stdout.str()
    assert died == (death is not None)


def test_a_skip_is_recorded_by_its_reason_and_a_failure_by_its_text():
    from types import SimpleNamespace

    from harness.pytest_plugin.recording import failure_text

    skip = SimpleNamespace(skipped=True, longrepr=("/w/suites/test_x.py", 33, "Skipped: arm 'a' has dcp 1"),
                           longreprtext="('/w/suites/test_x.py', 33, \"Skipped: arm 'a' has dcp 1\")")
    assert failure_text(skip) == "arm 'a' has dcp 1"  # the outcome says skipped; the message says why
    failed = SimpleNamespace(skipped=False, longrepr="E   assert 1 == 2", longreprtext="x" * 5000 + "E assert 1 == 2")
    assert failure_text(failed).endswith("E assert 1 == 2") and len(failure_text(failed)) == 4000


def test_spec_decode_skips_say_why_for_each_arm_through_the_cli(tmp_path):
    """The real CLI and plugin on the CPU pair (no drafter: every spec_decode test skips, no server starts): the
    reference's skip says why the reference has no run, the candidate's why the suite does not apply, and the
    report lists each once as 'skipped: <why>'."""
    import json
    import subprocess
    import sys

    from harness.config.paths import REPO_ROOT

    run = tmp_path / "run"
    out = subprocess.run([sys.executable, "-m", "harness", "qualify", "--arm", "cpu-smoke", "--suites", "spec_decode",
                          "--run-dir", str(run), "--no-vllm-check"], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    got = {r["test"].split("::")[-1]: r["message"] for r in map(json.loads, (run / "results.jsonl").open())
           if r["kind"] == "outcome" and r["outcome"] == "skipped"}
    candidate = "arm 'cpu-smoke' has no speculative section: spec_decode measures draft arms (e.g. cpu-spec)"
    assert got == {"test_spec_decode[cpu-smoke]": candidate, "test_spec_decode_vs_reference": candidate,
                   "test_spec_decode[cpu-ref]": "arm 'cpu-ref' is the reference: spec_decode runs it only as the "
                   "no-drafter baseline of a candidate with a speculative section, and candidate 'cpu-smoke' has none"}
    annotation = (run / "annotation.md").read_text()
    assert f"- spec_decode x cpu-ref: skipped: {got['test_spec_decode[cpu-ref]']}" in annotation
    assert "Skipped:" not in annotation
