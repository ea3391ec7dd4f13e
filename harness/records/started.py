"""What a run started with, as run.json recorded it, read back while the run goes on (pure): a candidate's
workloads, and whether an arm loaded now is still the arm recorded. A YAML file edited mid-run must not change the
run: one edited workload once had the reference captured with 16 output tokens and the candidate run with 24."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ValidationError

from harness.config.arms import Arm, defining_file
from harness.config.errors import ConfigError
from harness.config.files import field_errors, read_yaml
from harness.config.workloads import workload_kind
from harness.records.manifest import RunManifest

SHOWN_CHARS = 80  # a differing value is shown up to this long
ABSENT = object()  # a key one side of a comparison lacks


def recorded_workload(manifest: RunManifest, candidate: str, family: str, where: Path) -> BaseModel:
    """The `family` workload (harness.config.workloads.FAMILIES) recorded for `candidate` at the run's start: its
    pair's, or the run's for manifests written before pairs recorded theirs. `where` is run.json, for the messages."""
    pair = next((p for p in manifest.pairs if p.candidate == candidate), None)
    if pair is None:
        recorded = ", ".join(p.candidate for p in manifest.pairs) or "none"
        raise ConfigError(f"{where}: candidate {candidate!r} is not one this run started with (its candidates: "
                          f"{recorded}); run it in a new run directory")
    dump = (manifest.workloads_of(pair) or {}).get(family)
    if dump is None:
        raise ConfigError(f"{where}: no {family} workload recorded for candidate {candidate!r} (written by an older "
                          "harness); start a new run")
    if isinstance(dump, dict) and set(dump) == {"error"}:
        raise ConfigError(f"the {family} workload of candidate {candidate!r} could not be read when the run started: "
                          f"{dump['error']}; fix it and start a new run")
    kind = workload_kind(family)
    try:
        return kind.model_validate(dump)
    except ValidationError as exc:
        why = "; ".join(field_errors(exc))
        raise ConfigError(f"{where}: the {family} workload recorded for candidate {candidate!r} is no valid "
                          f"{kind.__name__} for this harness: {why}; start a new run") from None


def first_difference(recorded: object, current: object, path: str = "") -> tuple[str, object, object] | None:
    """The first field (dotted path, list items as [i]) where two JSON values differ, with both values; None if
    equal. Keys in the current value's order, then those only recorded."""
    if isinstance(recorded, dict) and isinstance(current, dict):
        for key in [*current, *(k for k in recorded if k not in current)]:
            found = first_difference(recorded.get(key, ABSENT), current.get(key, ABSENT),
                                     f"{path}.{key}" if path else str(key))
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(current, list) and len(recorded) == len(current):
        for i, (r, c) in enumerate(zip(recorded, current, strict=True)):
            found = first_difference(r, c, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if recorded == current else (path or "(the whole arm)", recorded, current)


def shown(value: object) -> str:
    if value is ABSENT:
        return "(absent)"
    text = json.dumps(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def setting_file(arm: Arm, field: str) -> str:
    """The file of the arm's `extends:` chain (child first) that sets the dotted field; else the one that sets its
    top-level key (harness.config.arms.defining_file)."""
    keys = field.split("[", 1)[0].split(".")
    for path in arm.source_files:
        try:
            node = read_yaml(Path(path))
        except ConfigError:
            continue
        for key in keys:
            node = node.get(key, ABSENT) if isinstance(node, dict) else ABSENT
        if node is not ABSENT:
            return path
    return defining_file(arm, keys[0])


def arm_change(arm: Arm, recorded: dict, current: dict) -> str | None:
    """Why arm `arm` (its redacted dump `current`) is not the one run.json recorded (`recorded`), naming its YAML file
    and the first differing field; None when it is."""
    found = first_difference(recorded, current)
    if found is None:
        return None
    field, before, now = found
    source = "the model's config.json" if field.startswith("model.geometry") else setting_file(arm, field)
    return (f"arm {arm.name!r}: {source} changed since the run started: field {field} is now {shown(now)}, the run "
            f"started with {shown(before)} (run.json). Restart the run, or restore the file")

