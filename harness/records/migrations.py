"""One migration rule for every stored file (asv's `api_version`): a document names its version; a reader steps an
older one up one version at a time and refuses a newer one, naming the file and what to do."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


class FormatError(ValueError):
    """A stored document this harness cannot bring to its current version."""


@dataclass(frozen=True)
class StoredFormat:
    name: str  # as a user knows the file: "run.json", "reference file"
    version_field: str  # where the document says its version; absent: version 0 (written before versions)
    current: int
    # version N -> the document at version N + 1 (pure), called with the reader's context as keywords (run.json's
    # step takes the run id)
    steps: Mapping[int, Callable[..., dict]] = field(default_factory=dict)
    remedy: str = "read it with the harness version that wrote it"

    def version_of(self, doc: dict) -> object:
        version = doc.get(self.version_field)
        return 0 if version is None else version


def upgrade(doc: dict, fmt: StoredFormat, **context) -> dict:
    """`doc` at `fmt.current`: unchanged when it is current, else through each step from its version up."""
    if not isinstance(doc, dict):
        raise FormatError(f"not a {fmt.name}: a JSON {type(doc).__name__}, not an object")
    version = fmt.version_of(doc)
    if version == fmt.current:
        return doc
    if not isinstance(version, int) or isinstance(version, bool) or version > fmt.current or version < 0:
        raise FormatError(f"{fmt.version_field} {version!r}: this harness reads {fmt.name} version {fmt.current} and "
                          f"older; {fmt.remedy}")
    while version < fmt.current:
        step = fmt.steps.get(version)
        if step is None:
            raise FormatError(f"{fmt.version_field} {version!r}: this harness reads {fmt.name} version {fmt.current} "
                              f"and has no step from version {version}; {fmt.remedy}")
        doc = {**step(doc, **context), fmt.version_field: version + 1}
        version += 1
    return doc
