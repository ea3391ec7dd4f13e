"""Reading the YAML configuration: one loader (yaml.safe_load, a mapping or a ConfigError with file, line and
column), the deep merge `extends:` and per-arm sections use, and the one formatter of pydantic's field errors."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from pydantic import ValidationError

from harness.config.errors import ConfigError

UNKNOWN_FIELD = "unknown field (check the spelling)"


def read_yaml(path: Path) -> dict:
    """One YAML mapping (arms, workloads, gates); a ConfigError with file, line and column otherwise."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}:{where}: YAML syntax error: {problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
    return data


def deep_merge(base: dict, child: dict) -> dict:
    """Child wins; nested mappings merge; lists and scalars are replaced."""
    out = copy.deepcopy(base)
    for key, value in child.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def field_errors(exc: ValidationError, unknown: str = UNKNOWN_FIELD) -> list[str]:
    """One line per invalid field: 'field a.b: what is wrong (got value)'."""
    lines = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        is_unknown = err["type"] == "extra_forbidden"
        got = "" if is_unknown or isinstance(err.get("input"), dict) else f" (got {err['input']!r})"
        lines.append(f"field {field}: {unknown if is_unknown else err['msg']}{got}")
    return lines
