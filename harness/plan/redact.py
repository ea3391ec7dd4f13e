"""Redaction of secrets in argv and environment before anything is printed or stored."""

from __future__ import annotations

import re

# A name ending in one of these (HF_TOKEN, VLLM_API_KEY, ...); "max_num_batched_tokens" is not one.
SECRET_NAME = re.compile(r"(TOKEN|KEY|SECRET|PASSWORD|CREDENTIALS?)$", re.IGNORECASE)
SECRET_FLAGS = ("--api-key", "--hf-token")
MASK = "<redacted>"


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: (MASK if SECRET_NAME.search(k) else v) for k, v in env.items()}


def redact_argv(argv: list[str] | tuple[str, ...]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
        elif arg in SECRET_FLAGS:
            out.append(arg)
            hide_next = True
        elif "=" in arg and (arg.split("=", 1)[0] in SECRET_FLAGS or SECRET_NAME.search(arg.split("=", 1)[0])):
            out.append(arg.split("=", 1)[0] + "=" + MASK)  # --api-key=x, and --set server.env.HF_TOKEN=x
        else:
            out.append(arg)
    return out


def redact_arm_dump(dump: dict) -> dict:
    """An arm's model_dump() with its server env and argv secrets masked, for run.json and reports."""
    server = dump.get("server", {})
    return {**dump, "server": {**server, "env": redact_env(server.get("env", {})),
                               "args": redact_argv(server.get("args", []))}}
