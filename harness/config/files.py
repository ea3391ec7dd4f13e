"""Reading the YAML configuration: one strict loader, the deep merge `extends:` and per-arm sections use, the strict
base model and number types every config schema uses, and the one formatter of pydantic's field errors.

Strict means: UTF-8 only, at most MAX_CONFIG_BYTES, no duplicate keys (YAML would silently keep the last one),
aliases may not expand past MAX_EXPANDED_NODES values (an alias bomb), numbers are numbers (`tp: true` is not 1),
and a list of errors is capped at MAX_ERRORS lines.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic import Strict as StrictType

from harness.config.errors import ConfigError

UNKNOWN_FIELD = "unknown field (check the spelling)"
MAX_CONFIG_BYTES = 2 * 1024 * 1024
MAX_EXPANDED_NODES = 100_000
MAX_ERRORS = 10
MAX_SHOWN_VALUE = 80
BOOL_HINT = ("YAML reads unquoted true/false/yes/no/on/off as a boolean: quote the value (e.g. \"off\") "
             "or write the number")

# Numbers and booleans without lax coercion: a YAML `true` is not the integer 1, the string "8" is not 8.
Int = Annotated[int, StrictType()]
Float = Annotated[float, StrictType()]  # an int is still a valid float
Bool = Annotated[bool, StrictType()]


class StrictModel(BaseModel):
    """Base of every config schema: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_BaseLoader):
    """yaml.safe_load's constructor, refusing duplicate keys."""

    source = "<yaml>"

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark.line + 1)
                except TypeError:
                    continue  # an unhashable key: the base constructor says so
                if first != key_node.start_mark.line + 1:
                    raise ConfigError(
                        f"{self.source}: line {key_node.start_mark.line + 1}: duplicate key {key!r} (first at line "
                        f"{first}); YAML would silently keep only the last one: remove one of them")
        return super().construct_mapping(node, deep=deep)


def expanded_size(node: yaml.Node, memo: dict[int, int] | None = None) -> int:
    """How many values the node becomes once every alias is expanded (computed without expanding)."""
    memo = {} if memo is None else memo
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = 1  # a recursive alias counts once
    if isinstance(node, yaml.MappingNode):
        size = 1 + sum(expanded_size(k, memo) + expanded_size(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(expanded_size(v, memo) for v in node.value)
    else:
        size = 1
    memo[id(node)] = size
    return size


def is_tab_at(text: str, line: int, column: int) -> bool:
    lines = text.splitlines()
    return line < len(lines) and lines[line][column:column + 1] == "\t"


def parse_yaml(text: str, source: str) -> object:
    """yaml.safe_load with the limits above; ConfigError (with line and column where known) otherwise."""
    loader = _StrictLoader(text)
    loader.source = source
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        memo: dict[int, int] = {}
        size = expanded_size(node, memo)
        if size > MAX_EXPANDED_NODES and size > len(memo):  # aliases, not the file itself, make it that large
            raise ConfigError(f"{source}: expands to {size:,} values through YAML aliases (limit "
                              f"{MAX_EXPANDED_NODES:,}): an alias bomb? Write the values out or use `extends:`")
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        if mark and is_tab_at(text, mark.line, mark.column):  # PyYAML's own words ("cannot start any token") hide it
            raise ConfigError(f"{source}:{where} a tab character: YAML indents with spaces only; replace the tab "
                              f"with spaces (YAML syntax error: {problem})") from None
        raise ConfigError(f"{source}:{where} YAML syntax error: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply to read") from None
    finally:
        loader.dispose()


def decode_utf8(data: bytes, source: str) -> str:
    """Text of a UTF-8 file; a ConfigError naming the line and byte otherwise."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{source}: line {line}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                          "save the file as UTF-8") from None


def read_yaml(path: Path) -> dict:
    """One YAML mapping (arms, workloads, gates); a ConfigError with file, line and column otherwise."""
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: {size:,} bytes; a config file may have at most {MAX_CONFIG_BYTES:,}")
        data = parse_yaml(decode_utf8(path.read_bytes(), str(path)), str(path))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
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


def shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= MAX_SHOWN_VALUE else text[: MAX_SHOWN_VALUE - 3] + "..."


def field_errors(exc: ValidationError, unknown: str = UNKNOWN_FIELD) -> list[str]:
    """One line per invalid field: 'field a.b: what is wrong (got value)', at most MAX_ERRORS lines."""
    errors = exc.errors()
    lines = []
    for err in errors[:MAX_ERRORS]:
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        is_unknown = err["type"] == "extra_forbidden"
        value = err.get("input")
        got = "" if is_unknown or isinstance(value, dict) else f" (got {shown(value)})"
        if isinstance(value, bool) and err["type"] != "bool_type":
            got = f" (got {value!r}: {BOOL_HINT})"
        lines.append(f"field {field}: {unknown if is_unknown else err['msg']}{got}")
    if len(errors) > MAX_ERRORS:
        lines.append(f"... and {len(errors) - MAX_ERRORS:,} more error(s) ({len(errors):,} in all; "
                     f"the first {MAX_ERRORS} are shown)")
    return lines
