"""Under CI=true an unexpected skip fails the run, an allowlisted one does not, and outside CI a skip stays a skip:
pytest runs in a subprocess on a tiny test file with the real plugin (tests/ci_skips.py) and a scratch allowlist."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ci_skips import ALLOWLIST, load_allowlist

TESTS = Path(__file__).resolve().parent

PLANTED = """
    import pytest

    def test_runs():
        assert True

    @pytest.mark.skipif(True, reason="planted: no widget here")
    def test_skipped_by_mark():
        pass

    @pytest.fixture
    def gadget():
        pytest.skip("planted: no gadget either")

    def test_skipped_in_setup(gadget):
        pass
"""


def run_pytest(tmp_path: Path, allowlist: str, ci: str | None, body: str = PLANTED) -> subprocess.CompletedProcess:
    (tmp_path / "test_planted.py").write_text(textwrap.dedent(body))
    (tmp_path / "allow.yaml").write_text(textwrap.dedent(allowlist))
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env |= {"PYTHONPATH": str(TESTS), "HARNESS_CI_SKIP_ALLOWLIST": str(tmp_path / "allow.yaml")}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "ci_skips", "-p", "no:cacheprovider", "-rA",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_planted.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def summary(proc: subprocess.CompletedProcess) -> str:
    # A skip happens in the setup phase, so a skip turned failure is counted as an error
    return proc.stdout.strip().splitlines()[-1].strip("= ").rsplit(" in ", 1)[0]


def test_a_planted_unexpected_skip_fails_the_run_under_ci_with_its_reason(tmp_path):
    proc = run_pytest(tmp_path, "[]", ci="true")
    assert proc.returncode == 1 and summary(proc) == "1 passed, 2 errors", proc.stdout
    assert "unexpected skip under CI=true: test_planted.py::test_skipped_by_mark: planted: no widget here" in proc.stdout
    assert "test_planted.py::test_skipped_in_setup: planted: no gadget either" in proc.stdout


def test_an_allowlisted_skip_stays_a_skip_and_only_it(tmp_path):
    proc = run_pytest(tmp_path, """
        - test: "test_planted.py::test_skipped_by_*"
          reason: no widget
          why: the planted test says why
    """, ci="true")
    assert proc.returncode == 1 and summary(proc) == "1 passed, 1 skipped, 1 error", proc.stdout
    assert "unexpected skip under CI=true: test_planted.py::test_skipped_in_setup" in proc.stdout


def test_the_allowlist_must_match_the_reason_too(tmp_path):
    proc = run_pytest(tmp_path, """
        - {test: "test_planted.py::*", reason: "some other reason", why: "a different skip"}
    """, ci="true")
    assert proc.returncode == 1 and summary(proc) == "1 passed, 2 errors", proc.stdout


def test_outside_ci_a_skip_stays_a_skip(tmp_path):
    for ci in (None, "false"):
        proc = run_pytest(tmp_path, "[]", ci=ci)
        assert proc.returncode == 0 and summary(proc) == "1 passed, 2 skipped", proc.stdout


def test_a_module_level_skip_fails_too(tmp_path):
    body = """
        import pytest
        pytest.skip("planted: the whole module", allow_module_level=True)

        def test_never():
            pass
    """
    proc = run_pytest(tmp_path, "[]", ci="true", body=body)
    assert proc.returncode != 0 and "unexpected skip under CI=true: test_planted.py: planted: the whole module" \
        in proc.stdout, proc.stdout


def test_an_entry_without_why_is_refused_naming_the_file_and_entry(tmp_path):
    proc = run_pytest(tmp_path, """
        - {test: "a::b", reason: "r", why: "fine"}
        - {test: "test_planted.py::*", reason: "planted"}
    """, ci="true")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert f"{tmp_path / 'allow.yaml'}: entry 2 needs exactly the fields test, reason and why" in proc.stderr
    assert "missing ['why']" in proc.stderr


def test_the_shipped_allowlist_is_valid_and_every_entry_says_why():
    entries = load_allowlist(ALLOWLIST)
    assert all(len(e.why.split()) >= 5 for e in entries), [e for e in entries if len(e.why.split()) < 5]


def test_the_harness_tests_load_the_plugin(pytestconfig):
    import ci_skips

    for hook in ("pytest_runtest_makereport", "pytest_make_collect_report", "pytest_configure"):
        impls = getattr(pytestconfig.pluginmanager.hook, hook).get_hookimpls()
        assert getattr(ci_skips, hook) in [i.function for i in impls], hook


def test_an_allowlist_that_is_no_list_is_refused(tmp_path):
    (tmp_path / "a.yaml").write_text("test: x\n")
    with pytest.raises(pytest.UsageError, match="a.yaml: the CI skip allowlist must be a YAML list"):
        load_allowlist(tmp_path / "a.yaml")
