"""Where a hub model's files sit in the local Hugging Face cache (huggingface_hub's layout, the cache directory of the
server's environment): a path lookup, no network, so admission reads a cached model as it reads a local one."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

COMMIT = re.compile(r"^[0-9a-f]{40}$")


def hub_cache_dir(env: Mapping[str, str]) -> Path:
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def cached_snapshot(repo_id: str, env: Mapping[str, str], revision: str = "main") -> Path | None:
    """The snapshot directory of `repo_id` at `revision` (a branch named under refs/, or a commit), or None when the
    cache does not hold it."""
    repo = hub_cache_dir(env) / f"models--{repo_id.replace('/', '--')}"
    ref = repo / "refs" / revision
    try:
        commit = ref.read_text().strip() if ref.is_file() else revision
    except OSError:
        return None
    if not COMMIT.match(commit):
        return None
    snapshot = repo / "snapshots" / commit
    return snapshot if snapshot.is_dir() else None
