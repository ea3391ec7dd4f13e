"""harness/plan/server_env.py: answers about the server environment's vLLM, kept on disk per vLLM fingerprint. A fake
`vllm` package on PYTHONPATH stands in for the code that is fingerprinted and answers the real probes (harness/probes:
its parser is argparse's); its version is the time it was imported, so equal answers mean the second came from the
cache (the real vLLM's cached parse: e2e)."""

import json
import shutil
import sys

import pytest

from harness.plan import server_env
from harness.plan.server_env import cache_key, run_cached_json_probe

FAKE_VLLM = {
    "__init__.py": "import time\n__version__ = str(time.time_ns())  # a fresh answer each time it is really asked\n",
    "utils/__init__.py": "",
    "utils/argparse_utils.py": "from argparse import ArgumentParser as FlexibleArgumentParser\n",
    "entrypoints/__init__.py": "",
    "entrypoints/openai/__init__.py": "",
    "entrypoints/openai/cli_args.py": "def make_arg_parser(parser):\n    parser.add_argument('--model')\n    return parser\n",
}


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "vllm"
    for name, text in FAKE_VLLM.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HARNESS_VLLM_CACHE", raising=False)
    return pkg


def ask(argvs=(["--model", "m"],)):
    return run_cached_json_probe(sys.executable, "parse-argv", 30, json.dumps(list(argvs)))


def test_the_same_question_to_the_same_vllm_is_answered_from_the_cache(fake_vllm, tmp_path):
    first = ask()
    assert ask() == first and first["errors"] == [None]
    assert len(list((tmp_path / "cache" / "vllm-answers").glob("*.json"))) == 1
    other = ask([["--model", "m", "--modle", "n"]])  # another question is asked
    assert other["version"] != first["version"] and other["errors"] == ["-c: error: unrecognized arguments: --modle n"]


def test_an_edited_probe_is_asked_again(fake_vllm, monkeypatch):
    first = ask()
    monkeypatch.setattr(server_env, "answers_digest", lambda: "the probes' source, edited")
    assert ask() != first


def test_a_changed_vllm_file_is_asked_again(fake_vllm):
    first = ask()
    (fake_vllm / "engine.py").write_text("# a patched copy\n")
    assert ask() != first


def test_a_vllm_elsewhere_on_the_path_or_another_vllm_variable_is_asked_again(fake_vllm, tmp_path, monkeypatch):
    first = ask()
    monkeypatch.setenv("VLLM_SOMETHING", "1")
    assert ask() != first
    monkeypatch.delenv("VLLM_SOMETHING")
    shutil.copytree(fake_vllm, tmp_path / "other" / "vllm")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "other"))
    assert ask() != first


def test_an_answer_of_an_unimportable_vllm_is_never_kept(fake_vllm, tmp_path):
    # The fake has no vllm.envs: the probe answers "not importable", and the question is asked again each time.
    answer = run_cached_json_probe(sys.executable, "env-variables", 30)
    assert answer["importable"] is False and "vllm.envs" in answer["error"]
    assert not list((tmp_path / "cache").glob("vllm-answers/*.json"))


def test_no_vllm_no_cache_and_the_switch_turns_it_off(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_VLLM_CACHE", "0")
    assert ask() != ask()
    monkeypatch.delenv("HARNESS_VLLM_CACHE")
    assert not list((tmp_path / "cache").glob("vllm-answers/*.json"))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "nothing-here"))  # the harness's own venv has no vLLM
    assert cache_key(sys.executable, "parse-argv", "[]") is None
    assert ask()["importable"] is False
    assert not list((tmp_path / "cache").glob("vllm-answers/*.json"))


def test_a_damaged_entry_is_asked_again_and_rewritten(fake_vllm, tmp_path):
    ask()
    [entry] = (tmp_path / "cache" / "vllm-answers").glob("*.json")
    entry.write_text("{half")
    fresh = ask()
    assert json.loads(entry.read_text()) == fresh
