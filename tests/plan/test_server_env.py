"""harness/plan/server_env.py: answers about the server environment's vLLM, kept on disk per vLLM fingerprint. A fake
`vllm` package on PYTHONPATH stands in for the code that is fingerprinted (the real vLLM's cached parse: e2e)."""

import json
import sys

import pytest

from harness.plan.server_env import run_cached_json_script

# A fresh answer each time it really runs: equal answers mean the second came from the cache.
ANSWER = "import json, sys, time; print(json.dumps({'importable': True, 'asked': time.time_ns(), 'stdin': sys.stdin.read()}))"
NOT_IMPORTABLE = "import json, time; print(json.dumps({'importable': False, 'asked': time.time_ns()}))"


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = '0.0.1'\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HARNESS_VLLM_CACHE", raising=False)
    return pkg


def ask(script=ANSWER, stdin="argv"):
    return run_cached_json_script(sys.executable, script, 30, stdin)


def test_the_same_question_to_the_same_vllm_is_answered_from_the_cache(fake_vllm, tmp_path):
    first = ask()
    assert ask() == first and first["stdin"] == "argv"
    assert len(list((tmp_path / "cache" / "vllm-answers").glob("*.json"))) == 1
    assert ask(stdin="other argv") != first  # another question is asked


def test_a_changed_vllm_file_is_asked_again(fake_vllm):
    first = ask()
    (fake_vllm / "engine.py").write_text("# a patched copy\n")
    assert ask() != first


def test_a_vllm_elsewhere_on_the_path_or_another_vllm_variable_is_asked_again(fake_vllm, tmp_path, monkeypatch):
    first = ask()
    monkeypatch.setenv("VLLM_SOMETHING", "1")
    assert ask() != first
    monkeypatch.delenv("VLLM_SOMETHING")
    other = tmp_path / "other" / "vllm"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("__version__ = '0.0.1'\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "other"))
    assert ask() != first


def test_an_answer_of_an_unimportable_vllm_is_never_kept(fake_vllm):
    assert ask(NOT_IMPORTABLE) != ask(NOT_IMPORTABLE)


def test_no_vllm_no_cache_and_the_switch_turns_it_off(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_VLLM_CACHE", "0")
    assert ask() != ask()
    monkeypatch.delenv("HARNESS_VLLM_CACHE")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "nothing-here"))  # the harness's own venv has no vLLM
    assert ask() != ask()
    assert not list((tmp_path / "cache").glob("vllm-answers/*.json"))


def test_a_damaged_entry_is_asked_again_and_rewritten(fake_vllm, tmp_path):
    ask()
    [entry] = (tmp_path / "cache" / "vllm-answers").glob("*.json")
    entry.write_text("{half")
    fresh = ask()
    assert json.loads(entry.read_text()) == fresh
