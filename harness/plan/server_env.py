"""I/O edge: run a small script in the server environment (the vLLM interpreter) and read its JSON answer."""

from __future__ import annotations

import json
import os
import subprocess


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
