"""Secrets: found and masked in argv, environments, arm dumps and free text, before anything is printed or stored.

One notion of a secret serves every place one can appear (plan print-out, run.json, results, report, logs):
  * a name ending in a secret word (HF_TOKEN, VLLM_API_KEY, --api-key, hf_token, ...) -- "max_num_batched_tokens"
    and "tokenizer" are not -- whose value follows as `NAME=value`, `NAME: value`, `"name": "value"` (env
    assignments, `--set server.env.HF_TOKEN=x`, `--set 'server.env={HF_TOKEN: x}'`, JSON-valued args), or as the
    next argv element (`--api-key x`);
  * a value shaped like a known token (hf_..., sk-..., ghp_...), wherever it is.
"""

from __future__ import annotations

import re

SECRET_NAME = re.compile(r"(?:^|[^a-z0-9])(?:api_?key|apikey|token|key|secret|password|passwd|credentials?)$",
                         re.IGNORECASE)
SECRET_FLAGS = ("--api-key", "--hf-token")
TOKEN_VALUE = re.compile(r"\b(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
                         r"|xox[abpr]-[A-Za-z0-9-]{10,})\b")
SEPARATOR = re.compile(r"""["']?\s*[:=]\s*["']?""")
NAME_BEFORE = re.compile(r"[A-Za-z0-9_.-]+$")
VALUE_AFTER = re.compile(r"""[^\s"',{}\[\]]+""")
MASK = "<redacted>"


def is_secret_name(name: str) -> bool:
    last = name.strip("\"' ").lstrip("-").rsplit(".", 1)[-1].replace("-", "_")
    return bool(last) and bool(SECRET_NAME.search(last))


def redact_text(text: str) -> str:
    """Mask every secret value inside one string (an argv element, an env value, a log line)."""
    spans = [m.span() for m in TOKEN_VALUE.finditer(text)]
    for sep in SEPARATOR.finditer(text):
        name = NAME_BEFORE.search(text[: sep.start()])
        if sep.group().strip("\"' ") == "" or name is None or not is_secret_name(name.group()):
            continue
        value = VALUE_AFTER.match(text, sep.end())
        if value and value.group() != MASK:
            spans.append(value.span())
    out, last = [], 0
    for start, end in sorted(spans):
        if start < last:
            continue
        out += [text[last:start], MASK]
        last = end
    return "".join(out) + text[last:]


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret_name(k) else redact_text(str(v))) for k, v in env.items()}


def redact_argv(argv: list[str] | tuple[str, ...]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
        elif arg.startswith("-") and "=" not in arg and (arg in SECRET_FLAGS or is_secret_name(arg)):
            out.append(arg)
            hide_next = True
        else:
            out.append(redact_text(arg))
    return out


def redact_value(value: object) -> object:
    """A JSON-like value (an arm's model_dump, run.json) with every secret masked: secret-named keys, secrets
    inside strings, argv-shaped lists."""
    if isinstance(value, dict):
        return {k: (MASK if isinstance(k, str) and is_secret_name(k) and value[k] not in (None, "", {}, [])
                    else redact_value(v)) for k, v in value.items()}
    if isinstance(value, list):
        return redact_argv(value) if all(isinstance(v, str) for v in value) else [redact_value(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_arm_dump(dump: dict) -> dict:
    """An arm's model_dump() with every secret masked (env, args, slurm_args, speculative.extra), for run.json and
    reports."""
    return redact_value(dump)


def secrets_in_argv(argv: list[str] | tuple[str, ...]) -> list[str]:
    """The argv elements (redacted) that carry a secret: visible to every user of the host in `ps`. A value that
    follows its flag (`--api-key VALUE`) is shown with the flag, so the user sees which argument to move."""
    masked = redact_argv(argv)
    out = []
    for i, (a, m) in enumerate(zip(argv, masked, strict=True)):
        if a == m:
            continue
        flag = argv[i - 1] if i and m == MASK and masked[i - 1] == argv[i - 1] and argv[i - 1].startswith("-") else ""
        out.append(f"{flag} {m}" if flag else m)
    return out
