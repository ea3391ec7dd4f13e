"""I/O edge: run a small script in the server environment (the vLLM interpreter) and read its JSON answer.

Questions whose answer depends only on the vLLM code (does its parser accept this argv, which VLLM_* variables does it
read, which speculative methods does it list) go through `run_cached_json_script`: importing vLLM to ask costs 6-12 s
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


class ScriptFailed(Exception):
    """The script could not run or printed no JSON; the message is the exception class that said so."""


def run_json_script(python: str, script: str, timeout_s: float, stdin: str | None = None) -> dict:
    """The JSON object on the script's last stdout line (usage stats off: vLLM phones home on import otherwise)."""
    try:
        out = subprocess.run([python, "-c", script], input=stdin, capture_output=True, text=True, timeout=timeout_s,
                             env={**os.environ, "VLLM_NO_USAGE_STATS": "1"})
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError, IndexError) as exc:
        raise ScriptFailed(exc.__class__.__name__) from None


# What could change an answer about the vLLM that `python` would import, read without importing it (~0.1 s): the
# interpreter and its sys.path, every file under that vllm package (name, size, mtime: a patched or reinstalled copy
# differs), and every installed distribution's name and version.
FINGERPRINT_SCRIPT = r"""
import importlib.util, json, os, sys, hashlib
spec = importlib.util.find_spec("vllm")
if spec is None or not spec.submodule_search_locations:
    print(json.dumps({"vllm": None})); sys.exit(0)
root = list(spec.submodule_search_locations)[0]
h = hashlib.sha256()
for d, dirs, files in os.walk(root):
    dirs[:] = sorted(x for x in dirs if x != "__pycache__")
    for f in sorted(files):
        st = os.stat(os.path.join(d, f))
        h.update(f"{os.path.relpath(os.path.join(d, f), root)}|{st.st_size}|{st.st_mtime_ns}\n".encode())
dists = sorted(e for p in sys.path if os.path.isdir(p) for e in os.listdir(p) if e.endswith(".dist-info"))
print(json.dumps({"vllm": root, "files": h.hexdigest(), "python": os.path.realpath(sys.executable),
                  "version": sys.version, "path": sys.path, "dists": dists}))
"""


def cache_key(python: str, script: str, stdin: str | None) -> str | None:
    """The question and the fingerprint of the vLLM that answers it; None when there is no vLLM to fingerprint."""
    try:
        fingerprint = run_json_script(python, FINGERPRINT_SCRIPT, 60)
    except ScriptFailed:
        return None
    if not fingerprint.get("vllm"):
        return None
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("VLLM_") or k == "PYTHONPATH")
    blob = json.dumps([fingerprint, env, script, stdin], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def run_cached_json_script(python: str, script: str, timeout_s: float, stdin: str | None = None) -> dict:
    """run_json_script, answered from the disk cache when the same vLLM was asked the same question before. Only
    answers of an importable vLLM are kept (a failure is asked again); HARNESS_VLLM_CACHE=0 asks every time."""
    key = cache_key(python, script, stdin) if os.environ.get("HARNESS_VLLM_CACHE", "1") != "0" else None
    path = cache_dir() / "vllm-answers" / f"{key}.json" if key else None
    if path is not None and path.is_file():
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass  # a damaged entry is asked again and rewritten
    result = run_json_script(python, script, timeout_s, stdin)
    if path is not None and result.get("importable"):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as tmp:
                tmp.write(json.dumps(result))
            os.replace(tmp.name, path)  # atomic: parallel workers never read half an entry
        except OSError:
            pass  # an unwritable cache only costs the next run the question again
    return result
