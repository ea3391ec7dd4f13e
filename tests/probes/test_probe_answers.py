"""harness/probes/answer.py, called directly in the harness's own interpreter (it has no vLLM): the pure parts with plain
values, the vllm-finding probes with a fake vllm package on sys.path, and `main`'s dispatch and output. Then the same
module as the server interpreter sees it: run with `-m` under `-S` (no site-packages), it imports only the standard
library and answers every probe (tests/probes/test_probes_in_server_env.py asks the real vLLM)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import typing
from typing import Literal, Union

import pytest

from harness.probes import answer
from harness.probes.ask import ROOT, probe_argv, run_probe

# These tests read "no vLLM" in this interpreter (the harness's venv); a device's PYTHONPATH may carry one.
needs_no_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="this interpreter has a vLLM")
WITHOUT_PYTHONPATH = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('never imported by these probes')\n")
    (pkg / "ops.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return pkg


def test_flat_lists_the_strings_of_a_nested_literal_in_order():
    inner = Literal["ngram", "medusa"]
    assert answer.flat(Literal["mtp", inner]) == ["mtp", "ngram", "medusa"]
    assert answer.flat(Union[Literal["eagle"], None]) == ["eagle"]  # noqa: UP007 - older vLLMs' own spelling
    assert answer.flat(typing.Optional[int]) == [] and answer.flat("draft_model") == ["draft_model"]  # noqa: UP045


def test_parse_errors_names_each_rejected_argv_by_its_last_stderr_line():
    def new_parser():
        parser = argparse.ArgumentParser(prog="-c")
        parser.add_argument("--model")
        parser.add_argument("--tensor-parallel-size", type=int)
        return parser

    got = answer.parse_errors([["--model", "m"], ["--modle", "m"], ["--tensor-parallel-size", "two"], ["--help"]],
                              new_parser)
    assert got == [None, "-c: error: unrecognized arguments: --modle m",
                   "-c: error: argument --tensor-parallel-size: invalid int value: 'two'",
                   "rejected"]  # --help exits with nothing on stderr


def test_fingerprint_names_the_vllm_found_and_changes_with_its_files(fake_vllm):
    first = answer.fingerprint()
    assert first["vllm"] == str(fake_vllm) and first["python"] and str(fake_vllm.parent) in first["path"]
    assert answer.fingerprint() == first
    (fake_vllm / "ops.py").write_text("x = 2  # patched\n")
    assert answer.fingerprint()["files"] != first["files"]
    (fake_vllm / "__pycache__").mkdir()
    (fake_vllm / "__pycache__" / "ops.pyc").write_bytes(b"bytecode")  # written on import: no other vLLM
    assert answer.fingerprint()["files"] == answer.fingerprint()["files"]


@needs_no_vllm
def test_without_vllm_the_metadata_probes_find_nothing():
    assert answer.fingerprint() == {"vllm": None}
    assert answer.vllm_distributions() == {} and answer.installed_version() is None
    with pytest.raises(AttributeError):
        answer.vllm_site()


@needs_no_vllm
def test_locate_reads_the_stack_versions_and_finds_vllm_without_importing_it(fake_vllm):
    import importlib.metadata as m

    got = answer.locate(["pytest", "no-such-distribution"])
    assert got == {"root": str(fake_vllm), "version": None, "stack": {"pytest": m.version("pytest")}}
    assert answer.vllm_site() == str(fake_vllm)
    assert "vllm" not in sys.modules


@needs_no_vllm
def test_the_vllm_importing_probes_say_not_importable():
    for probe in (answer.speculative_methods, answer.env_variables, lambda: answer.parse_argv([["--model", "m"]])):
        got = probe()
        assert got["importable"] is False and "vllm" in got["error"]


@needs_no_vllm
def test_main_prints_json_a_line_or_nothing_and_refuses_bad_usage(capsys):
    assert answer.main(["locate", "pytest"]) == 0
    assert json.loads(capsys.readouterr().out)["stack"]["pytest"]
    assert answer.main(["version"]) == 0 and capsys.readouterr().out == ""  # no vllm: nothing, as before
    assert answer.main(["verison"]) == 2
    err = capsys.readouterr().err
    assert "usage: python -m harness.probes {fingerprint," in err and "verison: not a probe" in err
    assert answer.main(["version", "extra"]) == 2
    assert "version: takes no arguments, got extra" in capsys.readouterr().err
    assert answer.main([]) == 2


def test_a_relative_interpreter_path_still_names_the_same_interpreter(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert probe_argv("bin/python", "version")[:4] == [str(tmp_path / "bin" / "python"), "-m", "harness.probes",
                                                        "version"]
    assert probe_argv("python3", "locate", "torch") == ["python3", "-m", "harness.probes", "locate", "torch"]


def bare(probe: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """The probe in this interpreter without its site-packages (`-S`): the standard library and this harness only,
    found as the server interpreter finds it (cwd = ROOT)."""
    return subprocess.run([sys.executable, "-S", "-m", "harness.probes", probe, *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=60, env=WITHOUT_PYTHONPATH)


def imports_outside_the_standard_library(root) -> subprocess.CompletedProcess:
    """harness.probes imported by an interpreter without site-packages (as the server's has none of the harness's
    dependencies); prints the modules it loaded that are not the standard library's."""
    code = ("import sys, harness.probes.answer, harness.probes.ask\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] not in {*sys.stdlib_module_names, '__main__'}))")
    return subprocess.run([sys.executable, "-S", "-c", code], cwd=root, capture_output=True, text=True,
                          env=WITHOUT_PYTHONPATH)


def test_the_module_imports_only_the_standard_library(tmp_path):
    out = imports_outside_the_standard_library(ROOT)
    assert out.stdout.strip() == str(["harness", "harness.probes", "harness.probes.answer", "harness.probes.ask"])
    # Planted: a copy whose probes import one of the harness's own dependencies at import time.
    (tmp_path / "harness" / "probes").mkdir(parents=True)
    (tmp_path / "harness" / "__init__.py").write_text((ROOT / "harness" / "__init__.py").read_text())
    for f in (ROOT / "harness" / "probes").glob("*.py"):
        (tmp_path / "harness" / "probes" / f.name).write_text(f.read_text())
    planted = tmp_path / "harness" / "probes" / "answer.py"
    planted.write_text(planted.read_text().replace("import typing\n", "import typing\n\nimport yaml\n", 1))
    out = imports_outside_the_standard_library(tmp_path)
    assert out.returncode == 1 and "No module named 'yaml'" in out.stderr


def test_every_probe_answers_with_python_m_where_there_is_no_vllm():
    json_answers = {"fingerprint": {"vllm": None}, "distributions": {}}
    for probe, expected in json_answers.items():
        out = bare(probe)
        assert out.returncode == 0 and json.loads(out.stdout.splitlines()[-1]) == expected, out.stderr
    for probe in ("speculative-methods", "env-variables", "parse-argv"):
        out = bare(probe, stdin="[]")
        assert json.loads(out.stdout.splitlines()[-1])["importable"] is False, out.stderr
    assert json.loads(bare("locate", "torch").stdout) == {"root": None, "version": None, "stack": {}}
    assert bare("version").stdout == ""
    site = bare("site")
    assert site.returncode == 1 and site.stderr.strip().endswith(
        "AttributeError: 'NoneType' object has no attribute 'submodule_search_locations'")
    wrong = bare("no-such-probe")
    assert wrong.returncode == 2 and "no-such-probe: not a probe" in wrong.stderr


def test_run_probe_runs_this_harness_from_any_working_directory(tmp_path, monkeypatch):
    """A `harness` package in the caller's directory (another checkout) is not the one run."""
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "__init__.py").write_text("raise SystemExit('the wrong harness')\n")
    monkeypatch.chdir(tmp_path)
    out = run_probe(sys.executable, "locate", "pytest")
    assert out.returncode == 0 and json.loads(out.stdout)["stack"]["pytest"], out.stderr
