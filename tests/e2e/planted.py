"""benchmarks/length_faults.py for the e2e tests that plant a fault in a scratch copy of vLLM (length faults, the
capacity slowdown, the floor's logit jitter): benchmarks/ is no package, so it is loaded from its file, once."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from harness.config.paths import REPO_ROOT


def length_faults() -> ModuleType:
    if "length_faults" not in sys.modules:
        spec = importlib.util.spec_from_file_location("length_faults", REPO_ROOT / "benchmarks" / "length_faults.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["length_faults"] = module
        spec.loader.exec_module(module)
    return sys.modules["length_faults"]
