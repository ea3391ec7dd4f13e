"""I/O edge: ask the server environment (the vLLM interpreter) a harness/probes question and read its JSON answer.

Questions whose answer depends only on the vLLM code (does its parser accept this argv, which VLLM_* variables does it
read, which speculative methods does it list) go through `run_cached_json_probe`: importing vLLM to ask costs 6-12 s
on an idle machine (20-40 s on a loaded one), and every plan and qualify asks the same vLLM again (a cpu-smoke plan:
17.6 s, 1.7 s answered from the cache).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile

from harness.config.paths import cache_dir
from harness.probes.ask import answers_digest, run_probe


class ProbeFailed(Exception):
    """The probe could not run or printed no JSON; the message is the exception class that said so."""


def run_json_probe(python: str, probe: str, timeout_s: float, stdin: str | None = None) -> dict:
    """The JSON object on the probe's last stdout line (usage stats off: vLLM phones home on import otherwise)."""
    try:
        out = run_probe(python, probe, stdin=stdin, timeout=timeout_s, env={**os.environ, "VLLM_NO_USAGE_STATS": "1"})
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError, IndexError) as exc:
        raise ProbeFailed(exc.__class__.__name__) from None


def cache_key(python: str, probe: str, stdin: str | None) -> str | None:
    """The question (the probe, its source and its input) and the fingerprint of the vLLM that answers it (probe
    `fingerprint`); None when there is no vLLM to fingerprint."""
    try:
        fingerprint = run_json_probe(python, "fingerprint", 60)
    except ProbeFailed:
        return None
    if not fingerprint.get("vllm"):
        return None
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("VLLM_") or k == "PYTHONPATH")
    blob = json.dumps([fingerprint, env, probe, answers_digest(), stdin], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def run_cached_json_probe(python: str, probe: str, timeout_s: float, stdin: str | None = None) -> dict:
    """run_json_probe, answered from the disk cache when the same vLLM was asked the same question before. Only
    answers of an importable vLLM are kept (a failure is asked again); HARNESS_VLLM_CACHE=0 asks every time."""
    key = cache_key(python, probe, stdin) if os.environ.get("HARNESS_VLLM_CACHE", "1") != "0" else None
    path = cache_dir() / "vllm-answers" / f"{key}.json" if key else None
    if path is not None and path.is_file():
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass  # a damaged entry is asked again and rewritten
    result = run_json_probe(python, probe, timeout_s, stdin)
    if path is not None and result.get("importable"):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as tmp:
                tmp.write(json.dumps(result))
            os.replace(tmp.name, path)  # atomic: parallel workers never read half an entry
        except OSError:
            pass  # an unwritable cache only costs the next run the question again
    return result
