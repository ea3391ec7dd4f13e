"""Where a file a run's records name is now: a run directory copied to another machine keeps the absolute paths
of the machine that wrote it (samples files, comparisons files)."""

from __future__ import annotations

from pathlib import Path


def resolve_path(run_dir: Path, recorded: str | None) -> Path | None:
    """The recorded path if it exists; else the same path relative to this run directory (a copied run)."""
    if not recorded:
        return None
    path = Path(recorded)
    if path.exists():
        return path
    parts = path.parts
    if run_dir.name in parts:  # /old/host/reports/<run-id>/<arm>/x.jsonl -> <run_dir>/<arm>/x.jsonl
        i = len(parts) - 1 - parts[::-1].index(run_dir.name)
        moved = run_dir.joinpath(*parts[i + 1:])
        if moved.exists():
            return moved
    for depth in (2, 1):  # a run renamed when copied: <arm>/x.jsonl or x.jsonl under the new run directory
        moved = run_dir.joinpath(*parts[-depth:])
        if path.is_absolute() and len(parts) > depth and moved.exists():
            return moved
    relative = run_dir / path if not path.is_absolute() else None
    return relative if relative is not None and relative.exists() else None
