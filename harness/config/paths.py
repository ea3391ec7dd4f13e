"""Where things live. One place, so tests can point the harness elsewhere."""

from __future__ import annotations

import os
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO_ROOT / "configs"
# Tests point these elsewhere through the environment; users rarely need to.
ARMS_DIR = Path(os.environ.get("HARNESS_ARMS_DIR", CONFIG_DIR / "arms"))
REPORTS_DIR = Path(os.environ.get("HARNESS_REPORTS_DIR", REPO_ROOT / "reports"))
WORKLOADS_DIR = Path(os.environ.get("HARNESS_WORKLOADS_DIR", CONFIG_DIR / "workloads"))
GATES_FILE = Path(os.environ.get("HARNESS_GATES_FILE", CONFIG_DIR / "gates.yaml"))


def run_id_now() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def server_python() -> str:
    """Interpreter of the environment vLLM runs in (its own venv on CPU machines)."""
    explicit = os.environ.get("HARNESS_SERVER_PYTHON")
    if explicit:
        return explicit
    local = REPO_ROOT / ".venv-server" / "bin" / "python"
    return str(local) if local.exists() else "python3"


def cache_dir() -> Path:
    """Answers worth keeping between runs (harness/plan/server_env.py); $HARNESS_CACHE_DIR, else ~/.cache."""
    explicit = os.environ.get("HARNESS_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dcp-harness"


def gsm8k_dir() -> Path:
    """Offline GSM8K files (never copied into the repo)."""
    return Path(os.environ.get("HARNESS_GSM8K_DIR", REPO_ROOT.parent / "shared" / "data" / "gsm8k"))
