"""Tests of the DCP op checks and the mutation benchmark; VLLM025: where real vLLM 0.25.0 source lies."""

import os
from pathlib import Path

from harness.config.paths import REPO_ROOT

# vLLM 0.25.0's Python sources (`make vllm-src`, which `make test` runs): the tests tying the planted-fault snippets
# and the MLA gather locator to real vLLM read them; under CI their skip fails the run (tests/ci_skips.py).
VLLM025 = Path(os.environ.get("HARNESS_VLLM025_SRC") or REPO_ROOT / ".vllm-src" / "0.25.0")
NO_VLLM025 = f"vLLM 0.25.0 source not at {VLLM025}: `make vllm-src` fetches it (or set HARNESS_VLLM025_SRC)"
