"""The e2e session's grouping (tests/xdist_groups.py): which tests share a worker and in which order, and the one
full-pair run both workers read (made once however many processes ask at once; a failed maker leaves nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import xdist_groups as xg
from xdist_groups import NAMED, SHARED, group_of, member_rank, once_per_session

TESTS = Path(__file__).parent


def test_a_shared_fixtures_users_are_one_group_in_the_listed_order():
    assert group_of("tests/e2e/test_e2e_degeneration.py::test_x") == "reference_store"
    assert member_rank("tests/e2e/test_e2e_reference_checks.py::test_y") < \
        member_rank("tests/e2e/test_e2e_degeneration.py::test_x")  # the store's filler first
    kill, stop = "tests/e2e/test_e2e_engine_death.py::test_k", "tests/e2e/test_e2e_gsm8k.py::test_stopped"
    assert group_of(kill) == group_of(stop) == "cpu_ref_server" and member_rank(kill) < member_rank(stop)
    # a node id listed alone: that test, not its module
    capture = "tests/e2e/test_e2e_cpu.py::test_capture_computes_from_scratch_even_with_prefix_caching_on"
    assert group_of(capture) == "cpu_ref_server" and group_of("tests/e2e/test_e2e_cpu.py::test_other") == \
        "tests/e2e/test_e2e_cpu.py"
    # the full-pair run's users are groups of their own; its first user is named to be scheduled first
    assert group_of("tests/e2e/test_e2e_resume.py::test_r") == "tests/e2e/test_e2e_resume.py"
    assert group_of(NAMED["full_pair_run"][0]) == "full_pair_run" and "full_pair_run" not in SHARED
    assert member_rank("tests/e2e/test_e2e_resume.py::test_r") == 0


def test_e2e_groups_go_whole_and_first_and_unit_tests_one_by_one_after_them_slowest_first():
    resume, kill = "tests/e2e/test_e2e_resume.py::test_r", "tests/e2e/test_e2e_engine_death.py::test_k"
    unit, other_unit = "tests/judge/test_stats.py::test_a", "tests/judge/test_stats.py::test_b"
    assert xg.scope_of(resume) == "tests/e2e/test_e2e_resume.py" and xg.scope_of(kill) == "cpu_ref_server"
    assert xg.scope_of(unit) == unit and xg.scope_of(other_unit) == other_unit  # not the module: a test alone
    # the full-pair run before every other group; e2e before unit; a slow unit test before the others
    ids = [unit, xg.UNIT_SLOW_FIRST[1], resume, xg.UNIT_SLOW_FIRST[0], kill, NAMED["full_pair_run"][0]]
    assert sorted(ids, key=lambda n: xg.order_key(n, False)) == [
        NAMED["full_pair_run"][0], kill, resume, xg.UNIT_SLOW_FIRST[0], xg.UNIT_SLOW_FIRST[1], unit]
    # a test that stops the shared server after its group's other members
    stop = "tests/e2e/test_e2e_teacher_forcing.py::test_t"
    assert xg.order_key(stop, False) < xg.order_key(kill, True)


def test_the_e2e_marker_and_the_module_name_must_agree_and_a_whole_session_has_both_kinds():
    e2e, unit = "tests/e2e/test_e2e_cpu.py::test_a", "tests/e2e/test_processes.py::test_b"
    assert xg.astray([(e2e, True), (unit, False)]) == []
    assert xg.astray([(e2e, False), (unit, True)]) == [e2e, unit]  # planted: each on the wrong side
    assert xg.missing_kind([e2e, unit]) is None and xg.missing_kind([]) is None  # no tests at all: pytest's exit code 5
    assert xg.missing_kind([unit]) == "e2e" and xg.missing_kind([e2e]) == "unit"


def test_make_tests_session_refuses_a_selection_without_e2e_tests():
    """The check in tests/conftest.py, through pytest itself: --dist loadgroup (make test's session) over unit tests
    alone is a usage error, the same selection without it collects."""
    args = [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/test_xdist_groups.py"]
    alone = subprocess.run([*args, "--dist", "loadgroup"], cwd=TESTS.parent, capture_output=True, text=True,
                           timeout=120)
    assert alone.returncode == 4 and "selected no e2e tests" in alone.stdout + alone.stderr, alone.stdout + alone.stderr
    plain = subprocess.run(args, cwd=TESTS.parent, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stdout + plain.stderr


MAKER = textwrap.dedent("""
    import json, os, sys, time
    sys.path.insert(0, sys.argv[1])
    from pathlib import Path
    from xdist_groups import once_per_session
    work = Path(sys.argv[2])

    def produce():
        with open(work.parent / "made", "a") as f:
            f.write(f"{os.getpid()}\\n")
        time.sleep(1.0)  # long enough for the other caller to arrive while this one makes it
        return {"maker": os.getpid()}

    print(json.dumps(once_per_session(work, produce)))
""")


def test_the_run_is_made_once_for_callers_that_ask_at_once(tmp_path):
    work = tmp_path / "full-pair"
    procs = [subprocess.Popen([sys.executable, "-c", MAKER, str(TESTS), str(work)], stdout=subprocess.PIPE, text=True)
             for _ in range(3)]
    got = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    made = (tmp_path / "made").read_text().split()
    assert len(made) == 1 and all(g == {"maker": int(made[0])} for g in got), (made, got)


def test_a_maker_that_raised_stores_nothing_and_the_next_caller_makes_it(tmp_path):
    def broken() -> dict:
        raise RuntimeError("the qualify process timed out")

    with pytest.raises(RuntimeError):
        once_per_session(tmp_path / "w", broken)
    assert not (tmp_path / "w" / "result.json").exists()
    assert once_per_session(tmp_path / "w", lambda: {"code": 0}) == {"code": 0}
    assert once_per_session(tmp_path / "w", broken) == {"code": 0}  # stored: not made again
