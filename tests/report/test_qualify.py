"""`qualify` end of run without a server: run.json gets end time, exit code and device; a baseline regression
turns pytest's 0 into 1 and reaches annotation.md and report.html. The suites are replaced by a fake that
writes a finished run's records (the real pipeline is covered by tests/test_e2e_cpu.py)."""

from __future__ import annotations

import json
import shutil

import pytest
from reportrun import make_run

from harness import cli
from harness.admission import RunArms
from harness.config.arms import load_arm


@pytest.fixture
def fake_qualify(tmp_path, arms_dir, monkeypatch):
    d, write = arms_dir
    write("cpu-ref", "extends: base\n")
    write("cpu-smoke", "extends: base\nreference: cpu-ref\n")
    monkeypatch.setattr(cli, "load_run_arms", lambda name, ref, sets: RunArms(load_arm(name, sets, d),
                                                                             load_arm("cpu-ref", (), d), []))
    monkeypatch.setattr(cli, "admit", lambda *a, **k: {})
    calls = []

    def run(tpot_scale: float, pytest_code: int = 0, baseline: str | None = None):
        def fake_suites(run_dir, args):
            calls.append(run_dir)
            src = make_run(tmp_path / "src", run_dir.name, tpot_scale=tpot_scale)
            for item in src.iterdir():
                if item.name != "run.json":
                    (shutil.copytree if item.is_dir() else shutil.copy)(item, run_dir / item.name)
            return pytest_code

        monkeypatch.setattr(cli, "run_suites", fake_suites)
        run_dir = tmp_path / f"run-{len(calls)}"
        argv = ["qualify", "--arm", "cpu-smoke", "--run-dir", str(run_dir)] + (["--baseline", baseline] if baseline else [])
        return cli.main(argv), run_dir

    run.calls = calls
    return run


def test_qualify_records_the_end_and_fails_on_a_baseline_regression(fake_qualify, capsys):
    code, base = fake_qualify(1.0)
    assert code == 0
    info = json.loads((base / "run.json").read_text())
    assert info["exit_code"] == 0 and info["finished"] and info["device"]["kind"] in ("cpu", "gpu")
    assert info["suites"] and info["workloads"]["long_prefix"]["seed"] == 0
    code, slow = fake_qualify(1.3, baseline=str(base))
    assert code == 1
    info = json.loads((slow / "run.json").read_text())
    assert (info["exit_code"], info["pytest_exit_code"], info["baseline"]) == (1, 0, str(base))
    note = (slow / "annotation.md").read_text()
    assert note.startswith("## DCP qualification FAILED: cpu-smoke vs cpu-ref (exit code 1)")
    assert "- **baseline regression**: cpu-smoke c1: TPOT p50" in note and str(slow / "report.html") in note
    assert "REGRESSION: cpu-smoke c1: TPOT p50" in (slow / "report.html").read_text()
    out = capsys.readouterr().out
    assert "### Baseline diff" in out and f"report:  {slow / 'report.html'}" in out


def test_qualify_against_an_equal_baseline_passes(fake_qualify, capsys):
    _, base = fake_qualify(1.0)
    code, again = fake_qualify(1.0, baseline=str(base))
    assert code == 0 and "baseline regression" not in (again / "annotation.md").read_text()
    capsys.readouterr()


def test_qualify_keeps_pytests_failure_code(fake_qualify, capsys):
    code, run = fake_qualify(1.0, pytest_code=1)
    assert code == 1 and json.loads((run / "run.json").read_text())["exit_code"] == 1
    capsys.readouterr()


def test_qualify_with_a_missing_baseline_fails_before_any_suite(fake_qualify, tmp_path, capsys):
    code, _ = fake_qualify(1.0, baseline=str(tmp_path / "no-such-run"))
    assert code != 0 and fake_qualify.calls == []
    assert "no results.jsonl there" in capsys.readouterr().err
