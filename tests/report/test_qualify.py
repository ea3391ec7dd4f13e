"""`qualify` end of run without a server: run.json gets end time, exit code and device; a baseline regression
turns pytest's 0 into 1 and reaches annotation.md and report.html. The suites are replaced by a fake that
writes a finished run's records (the real pipeline is covered by tests/test_e2e_cpu.py)."""

from __future__ import annotations

import json
import shutil

import pytest
from reportrun import SUITES, make_run

from harness import cli
from harness.admission import admitting
from harness.admission.arms import RunArms
from harness.admission.record import record_run_start
from harness.config.arms import load_arm
from harness.config.armset import ArmSet, Pair
from harness.qualify import pipeline


def run_arms(name: str, sets, arms_dir) -> RunArms:
    """The candidate (--set applied) against cpu-ref, from the scratch arms directory."""
    return RunArms(ArmSet((Pair(name, "cpu-ref"),)), {name: load_arm(name, sets, arms_dir),
                                                     "cpu-ref": load_arm("cpu-ref", (), arms_dir)})


def render_here(run_dir, baseline, code) -> int:
    return cli.main(["report", "--run", str(run_dir), "--exit-code", str(code), *(["--baseline", baseline]
                                                                                    if baseline else [])])


@pytest.fixture
def fake_qualify(tmp_path, arms_dir, monkeypatch):
    d, write = arms_dir
    write("cpu-ref", "extends: base\n")
    write("cpu-smoke", "extends: base\nreference: cpu-ref\n")
    monkeypatch.setattr(admitting, "load_run_arms", lambda names, ref, sets: run_arms(names[0], sets, d))
    monkeypatch.setattr(admitting, "check_shared_workloads", lambda *a: None)
    monkeypatch.setattr(admitting, "admit", lambda *a, **k: {})
    # Rendered in this process, so the tests' patches of the report stack apply (qualify renders in a fresh one:
    # test_qualify_renders_in_a_fresh_process below)
    monkeypatch.setattr(pipeline, "render_in_fresh_process", render_here)
    calls = []

    def run(tpot_scale: float, pytest_code: int = 0, baseline: str | None = None):
        def fake_suites(run):
            run_dir = run.run_dir
            calls.append(run_dir)
            src = make_run(tmp_path / "src", run_dir.name, tpot_scale=tpot_scale)
            for item in src.iterdir():
                if item.name != "run.json":
                    (shutil.copytree if item.is_dir() else shutil.copy)(item, run_dir / item.name)
            return pytest_code

        monkeypatch.setattr(pipeline, "run_suites", fake_suites)
        run_dir = tmp_path / f"run-{len(calls)}"
        argv = ["qualify", "--arm", "cpu-smoke", "--run-dir", str(run_dir), "--suites", ",".join(SUITES)] + (
            ["--baseline", baseline] if baseline else [])  # the suites make_run records
        return cli.main(argv), run_dir

    run.calls = calls
    return run


def test_qualify_records_the_end_and_fails_on_a_baseline_regression(fake_qualify, capsys, monkeypatch):
    from enforced import enforce_every_arm

    code, base = fake_qualify(1.0)
    assert code == 0
    info = json.loads((base / "run.json").read_text())
    assert info["exit_code"] == 0 and info["finished"] and info["device"]["kind"] in ("cpu", "gpu")
    assert info["suites"] and info["workloads"]["long_prefix"]["seed"] == 0
    shown = fake_qualify(2.5, baseline=str(base))[1]  # beyond the CPU pair's +100% effect size ...
    assert json.loads((shown / "run.json").read_text())["exit_code"] == 0  # ... shown, not enforced (tpot_not_enforced)
    assert "### Baseline regressions, not enforced" in (shown / "annotation.md").read_text()
    enforce_every_arm(monkeypatch)
    code, slow = fake_qualify(2.5, baseline=str(base))
    assert code == 1
    info = json.loads((slow / "run.json").read_text())
    assert (info["exit_code"], info["pytest_exit_code"], info["baseline"]) == (1, 0, str(base))
    note = (slow / "annotation.md").read_text()
    assert note.startswith("## DCP qualification FAILED: cpu-smoke vs cpu-ref (exit code 1)")
    assert "- **baseline regression**: cpu-smoke c1: TPOT p50" in note and str(slow / "report.html") in note
    assert "REGRESSION: cpu-smoke c1: TPOT p50" in (slow / "report.html").read_text()
    out = capsys.readouterr().out
    assert "### Baseline diff" in out and f"report: {slow / 'report.html'}" in out


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


SECRETS = ("s3cr3t-one", "s3cr3t-two", "s3cr3t-three", "s3cr3t-four", "s3cr3t-five")


def test_secrets_are_redacted_in_run_json_report_annotation_and_log(tmp_path, arms_dir, monkeypatch, capfd):
    """Secrets given every way the issue lists -- `--set server.env.X=`, `--set=server.env.X=`, a `--set` mapping,
    launcher.slurm_args and speculative.extra -- reach neither run.json, the report, the annotation nor harness.log."""
    d, write = arms_dir
    write("cpu-ref", "extends: base\n")
    write("cpu-smoke", "extends: base\nreference: cpu-ref\nlauncher: {slurm_args: ['--export=HF_TOKEN=s3cr3t-four']}"
                       "\nspeculative: {method: dspark, model: d, num_speculative_tokens: 2, "
                       "extra: {hf_token: s3cr3t-five}}\n")
    sets = ["--set", "server.env.HF_TOKEN=s3cr3t-one", "--set=server.env.VLLM_API_KEY=s3cr3t-two",
            "--set", "server.env={HUB_TOKEN: s3cr3t-three}"]
    monkeypatch.setattr(admitting, "load_run_arms", lambda names, ref, s: run_arms(names[0], s, d))
    monkeypatch.setattr(admitting, "check_shared_workloads", lambda *a: None)
    monkeypatch.setattr(admitting, "admit", lambda *a, **k: {})
    monkeypatch.setattr(pipeline, "run_suites", lambda run: 0)
    run_dir = tmp_path / "run"
    argv = ["qualify", "--arm", "cpu-smoke", "--run-dir", str(run_dir), *sets]
    monkeypatch.setattr("sys.argv", ["python -m harness", *argv])
    cli.main(argv)
    out = capfd.readouterr()  # the report is rendered in a fresh process: its output too
    written = {p.name: p.read_text() for p in run_dir.rglob("*") if p.is_file()}
    assert {"run.json", "report.html", "annotation.md", "harness.log"} <= set(written)
    leaks = {name: s for name, text in {**written, "stdout": out.out, "stderr": out.err}.items()
             for s in SECRETS if s in text}
    assert not leaks, leaks
    info = json.loads(written["run.json"])
    assert "server.env.HF_TOKEN=<redacted>" in info["argv"] and "--set=server.env.VLLM_API_KEY=<redacted>" in info["argv"]
    assert info["arms"]["cpu-smoke"]["launcher"]["slurm_args"] == ["--export=HF_TOKEN=<redacted>"]
    assert info["arms"]["cpu-smoke"]["speculative"]["extra"]["hf_token"] == "<redacted>"


def test_qualify_renders_in_a_fresh_process_whatever_the_suites_left_half_imported(fake_qualify, monkeypatch,
                                                                                    capfd):
    """CI saw a Ctrl-C land inside an import during the suites: rendering in the same process then failed with
    `partially initialized module 'pandas'`, exit 1 and no report. Planted here: a broken pandas in this process,
    and the report stack not yet imported. The report is rendered in a fresh interpreter all the same."""
    import sys
    import types

    monkeypatch.setattr(pipeline, "render_in_fresh_process", REAL_RENDER)  # the fixture renders in this process
    monkeypatch.setitem(sys.modules, "pandas", types.ModuleType("pandas"))  # what the interrupted import left
    for name in [m for m in sys.modules if m.startswith("harness.report")]:
        monkeypatch.delitem(sys.modules, name)
    code, run = fake_qualify(1.0, pytest_code=130)
    out = capfd.readouterr()
    assert code == 130, out.err
    assert "INTERRUPTED (exit code 130)" in (run / "report.html").read_text()
    assert (run / "annotation.md").read_text().startswith("## DCP qualification INTERRUPTED")
    assert "Traceback" not in out.err and "### Gates" in out.out


def test_qualify_noting_a_ctrl_c_after_the_suites_still_renders_and_exits_130(fake_qualify, monkeypatch, capsys):
    """A Ctrl-C (or SIGTERM) after the suites, while the run is finished and rendered: noted, the report finished,
    exit 130 (143)."""
    import os
    import signal

    from harness.qualify import finish

    real = finish.finish_run_info

    def interrupted_finish(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # the terminal's Ctrl-C, as the run is being finished
        return real(*args, **kwargs)

    monkeypatch.setattr(finish, "finish_run_info", interrupted_finish)
    code, run = fake_qualify(1.0)
    assert code == 130 and (run / "report.html").is_file() and (run / "annotation.md").is_file()
    assert "interrupted (SIGINT) while the report was written; it was finished" in capsys.readouterr().err
    assert json.loads((run / "run.json").read_text())["exit_code"] == 0  # the run itself had passed


REAL_RENDER = pipeline.render_in_fresh_process


@pytest.mark.parametrize("strict", [False, True])
def test_run_json_records_the_gates_resolved_for_a_strict_run(tmp_path, arms_dir, strict):
    """`--strict` (or CI=true) makes a GSM8K gate without signal FAIL: run.json records the resolved thresholds, so the
    suites and every later `harness report` judge the same; the CPU pair's own section keeps it off."""
    d, write = arms_dir
    write("cpu-ref", "extends: base\n")
    for cand in ("dcp-like", "cpu-smoke"):
        write(cand, "extends: base\nreference: cpu-ref\n")
        run_dir = tmp_path / f"{cand}-{strict}"
        run_dir.mkdir()
        arms = [load_arm(cand, (), d), load_arm("cpu-ref", (), d)]
        record_run_start(run_dir, arms, ["qualify"], ["gsm8k"], ArmSet((Pair(cand, "cpu-ref"),)), strict)
        info = json.loads((run_dir / "run.json").read_text())
        expected = strict and cand != "cpu-smoke"  # gates.yaml: cpu-smoke gsm8k.require_signal: false
        assert info["strict"] is strict and info["pairs"][0]["gates"]["gsm8k"]["require_signal"] is expected


def test_run_json_end_is_written_once_with_the_verdict_before_anything_is_rendered(fake_qualify, monkeypatch, capsys):
    """Judge, then record, then render: a baseline regression turns pytest's 0 into 1, and run.json's end is written
    once, already with that verdict, while no report exists yet. (Before, the end was written with pytest's code, the
    report rendered, and run.json written again with the verdict.)"""
    from enforced import enforce_every_arm

    from harness.records import runinfo

    _, base = fake_qualify(1.0)
    enforce_every_arm(monkeypatch)
    writes = []
    real = runinfo.write_manifest

    def noting(run_dir, manifest):
        writes.append((manifest.exit_code, manifest.pytest_exit_code, (run_dir / "report.html").exists()))
        real(run_dir, manifest)

    monkeypatch.setattr(runinfo, "write_manifest", noting)
    code, slow = fake_qualify(2.5, baseline=str(base))
    assert code == 1 and writes == [(1, 0, False)]
    assert json.loads((slow / "run.json").read_text())["exit_code"] == 1
    capsys.readouterr()


def test_a_judge_step_that_fails_still_records_the_end_with_pytests_code(fake_qualify, monkeypatch, capsys):
    from harness.qualify import finish

    def broken(*args):
        raise RuntimeError("planted: the judge step broke")

    monkeypatch.setattr(finish, "judge", broken)
    with pytest.raises(RuntimeError, match="planted"):
        fake_qualify(1.0, pytest_code=1)
    (run,) = fake_qualify.calls
    info = json.loads((run / "run.json").read_text())
    assert (info["exit_code"], info["pytest_exit_code"]) == (1, 1) and info["finished"] and info["suites"]
    assert not (run / "report.html").exists()
    capsys.readouterr()


def test_harness_report_without_an_exit_code_leaves_run_json_alone(fake_qualify, capsys):
    from harness import cli

    _, run = fake_qualify(1.0)
    before = (run / "run.json").read_text()
    assert cli.main(["report", "--run", str(run)]) == 0
    assert (run / "run.json").read_text() == before
    capsys.readouterr()


def test_a_baseline_gone_by_the_end_still_leaves_the_runs_end_recorded(fake_qualify, monkeypatch, capsys):
    """Admission found the baseline; it is unreadable when the run is judged: exit 2 naming it, and run.json has the
    end with pytest's code (no verdict could be made)."""
    from harness.admission import admitting

    _, base = fake_qualify(1.0)
    admitted = admitting.check_baseline

    def emptied_after_admission(arg):
        path = admitted(arg)
        path.write_text("")  # planted: emptied during the run
        return path

    monkeypatch.setattr(admitting, "check_baseline", emptied_after_admission)
    code, run = fake_qualify(1.0, baseline=str(base))
    assert code == 2 and f"--baseline {base}: no readable record in {base / 'results.jsonl'}" in capsys.readouterr().err
    info = json.loads((run / "run.json").read_text())
    assert (info["exit_code"], info["pytest_exit_code"], info["baseline"]) == (0, 0, str(base)) and info["finished"]



def count_reads(monkeypatch, reads: dict[str, int]) -> None:
    """Each call of read_manifest and read_results, wherever a harness module bound it, counted in `reads` by file."""
    import sys

    from harness.records import manifest, results

    for module, name, file in ((manifest, "read_manifest", "run.json"), (results, "read_results", "")):
        real = getattr(module, name)

        def counted(path, real=real, file=file):
            key = str(path / file if file else path)
            reads[key] = reads.get(key, 0) + 1
            return real(path)

        for mod in [m for n, m in list(sys.modules.items()) if n.startswith("harness") and m is not None]:
            if getattr(mod, name, None) is real:
                monkeypatch.setattr(mod, name, counted)


def test_the_finishing_process_reads_run_json_and_results_once(fake_qualify, monkeypatch, capsys):
    """qualify's end (judge, record the end, confirm calibrations, append history, render, annotate) loads the run
    once and hands it step to step: its run.json and results.jsonl are each read once (and the baseline's results)."""
    import harness.report.render  # noqa: F401 - loaded before its bindings are counted

    _, base = fake_qualify(1.0)
    reads: dict[str, int] = {}

    def counted_render(run_dir, baseline, code):
        count_reads(monkeypatch, reads)
        return render_here(run_dir, baseline, code)

    monkeypatch.setattr(pipeline, "render_in_fresh_process", counted_render)
    code, run = fake_qualify(1.0, baseline=str(base))
    assert code == 0
    capsys.readouterr()
    assert reads == {str(run / "run.json"): 1, str(run / "results.jsonl"): 1, str(base / "results.jsonl"): 1}
    reads.clear()  # `harness report --run` reads the run once too
    assert cli.main(["report", "--run", str(run), "--baseline", str(base)]) == 0
    assert reads == {str(run / "run.json"): 1, str(run / "results.jsonl"): 1, str(base / "results.jsonl"): 1}
    capsys.readouterr()
