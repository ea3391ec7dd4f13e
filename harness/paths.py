"""Where things live. One place, so tests can point the harness elsewhere."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO_ROOT / "configs"
ARMS_DIR = CONFIG_DIR / "arms"
REPORTS_DIR = REPO_ROOT / "reports"


def server_python() -> str:
    """Interpreter of the environment vLLM runs in (its own venv on CPU machines)."""
    explicit = os.environ.get("HARNESS_SERVER_PYTHON")
    if explicit:
        return explicit
    local = REPO_ROOT / ".venv-server" / "bin" / "python"
    return str(local) if local.exists() else "python3"


def gsm8k_dir() -> Path:
    """Offline GSM8K files (never copied into the repo)."""
    return Path(os.environ.get("HARNESS_GSM8K_DIR", REPO_ROOT.parent / "shared" / "data" / "gsm8k"))
