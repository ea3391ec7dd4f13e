"""run.json's contents at a qualification's start (harness version, commit, host, argv, suites, workloads, arms,
gate thresholds) and its end (time, exit code, device); the model is manifest.py's. I/O: git, NVML, /proc/cpuinfo,
the file itself."""

from __future__ import annotations

import ast
import hashlib
import json
import platform
import socket
import subprocess
import time
from pathlib import Path

import yaml

from harness import __version__
from harness.config.errors import HarnessError
from harness.config.paths import REPO_ROOT
from harness.config.workloads import FAMILIES, load_workload, workload_for, workload_kind
from harness.records.manifest import (
    SCHEMA_VERSION,
    ManifestProblem,
    NotAManifest,
    RunManifest,
    read_manifest,
    write_manifest,
)


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def git_commit() -> str | None:
    """HEAD, with '+modified' when tracked files differ from it: a copied tree (a GPU machine's copy carries a
    stale .git) or uncommitted edits must not pass for the commit."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (head + ("+modified" if dirty else "")) or None


# What measures and judges a run: a calibration combines only repeats of one hash of these; docs, tests, the report
# and the like stay out, so a docs commit voids no repeat.
MEASURING = ("harness/admission", "harness/calibrate", "harness/config", "harness/faults", "harness/judge",
             "harness/measure", "harness/opcheck", "harness/plan", "harness/probes", "harness/pytest_plugin",
             "harness/qualify", "harness/records", "harness/refcheck", "harness/serve", "suites", "configs")


def measuring_files(root: Path = REPO_ROOT) -> list[Path]:
    """The MEASURING files under root, in a fixed order: Python sources and YAML configs (caches left out)."""
    out: list[Path] = []
    for part in MEASURING:
        base = root / part
        out += [p for p in base.rglob("*") if p.is_file() and p.suffix in (".py", ".yaml", ".yml")
                and "__pycache__" not in p.parts]
    return sorted(out)


def meaning(path: Path) -> bytes:
    """What a measuring file does, without its comments and docstrings (Python: the syntax tree; YAML: the parsed
    document): rewording one must not void a calibration's repeats. Bytes where it does not parse."""
    text = path.read_bytes()
    try:
        if path.suffix == ".py":
            tree = ast.parse(text)
            for node in ast.walk(tree):
                body = getattr(node, "body", None)
                if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                        and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
                    node.body = body[1:] or [ast.Pass()]
            return ast.dump(tree).encode()
        return json.dumps(yaml.safe_load(text), sort_keys=True, default=str).encode()
    except (SyntaxError, ValueError, yaml.YAMLError):
        return text


def harness_hash(root: Path = REPO_ROOT) -> str:
    """sha256 (16 hex) over the MEASURING files' relative paths and meaning: the same code measuring and judging gives
    the same hash on any machine and in any commit (a GPU machine's copy has no usable commit)."""
    h = hashlib.sha256()
    for p in measuring_files(root):
        h.update(f"{p.relative_to(root).as_posix()}|".encode())
        h.update(hashlib.sha256(meaning(p)).digest())
    return h.hexdigest()[:16]


def model_quality(summary: dict) -> dict:
    """What run.json records of a generated tiny model (pure, from its tiny_model.json): the weights hash, the needle
    retrieval (greedy copy) accuracy per length with its smallest value, and the median top-1/top-2 gap."""
    if isinstance(summary.get("quality"), dict):
        return summary["quality"]
    retrieval = summary.get("retrieval_accuracy") or {}
    return {"weights_sha256": summary.get("weights_sha256"), "retrieval_accuracy": retrieval,
            "retrieval_min": min(retrieval.values()) if retrieval else None,
            "median_top_gap": summary.get("median_top_gap_bf16"), "trained_on": summary.get("trained_on")}


def model_qualities(model_dirs: dict[str, Path]) -> dict[str, dict]:
    """arm -> model_quality of the tiny_model.json in its model dir; arms whose model has none are left out."""
    out = {}
    for arm, d in model_dirs.items():
        try:
            out[arm] = model_quality(json.loads((d / "tiny_model.json").read_text()))
        except (OSError, ValueError, AttributeError):
            continue
    return out


def cpu_model(cpuinfo: str) -> str | None:
    """'model name' of /proc/cpuinfo (pure), with the number of logical CPUs."""
    names = [line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")]
    return f"{names[0]} x {len(names)}" if names else None


def device_info() -> dict:
    """GPU model(s) and driver through NVML; without a GPU, the CPU model from /proc/cpuinfo."""
    try:
        import pynvml

        pynvml.nvmlInit()
        gpus = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
                for i in range(pynvml.nvmlDeviceGetCount())]
        driver = pynvml.nvmlSystemGetDriverVersion()
        return {"kind": "gpu", "gpus": [g.decode() if isinstance(g, bytes) else g for g in gpus],
                "driver": driver.decode() if isinstance(driver, bytes) else driver}
    except Exception as exc:  # noqa: BLE001 - no NVML library or no GPU: describe the CPU instead
        cpuinfo = Path("/proc/cpuinfo")
        model = cpu_model(cpuinfo.read_text()) if cpuinfo.is_file() else None
        return {"kind": "cpu", "cpu": model or platform.processor() or platform.machine(),
                "no_gpu_reason": f"{type(exc).__name__}: {exc}"}


def workload_dumps(arm) -> dict[str, dict]:
    """Each workload the arm's suites use (sizes, seeds), as resolved now; an unreadable one says why."""
    out = {}
    for key in FAMILIES:
        try:
            out[key] = load_workload(workload_for(arm, key), kind=workload_kind(key)).model_dump(mode="json")
        except HarnessError as exc:
            out[key] = {"error": str(exc)}
    return out


def start_manifest(run_id: str, arms: dict[str, dict], argv: list[str], suites: list[str],
                   workloads: dict[str, dict]) -> RunManifest:
    """run.json's opening fields; `arms` and `argv` arrive redacted."""
    return RunManifest(schema_version=SCHEMA_VERSION, run_id=run_id, harness_version=__version__,
                       git_commit=git_commit(), harness_hash=harness_hash(), host=socket.gethostname(), started=now(),
                       argv=argv, suites=suites, workloads=workloads, arms=arms)


def concurrency_levels(workloads: dict | None) -> list[int]:
    """The long-prefix concurrency levels recorded workloads (run.json's) ask for; none when not recorded."""
    levels = ((workloads or {}).get("long_prefix") or {}).get("concurrency") or []
    return [c for c in levels if isinstance(c, int)]


def finish_run_info(run_dir: Path, exit_code: int, baseline: str | None = None,
                    pytest_exit_code: int | None = None,
                    read: RunManifest | ManifestProblem | None = None) -> RunManifest:
    """Add the end time, exit code(s) and device to run.json; `read`: the manifest (or its problem) if already read."""
    end = dict(finished=now(), exit_code=exit_code, device=device_info(),
               pytest_exit_code=exit_code if pytest_exit_code is None else pytest_exit_code)
    if baseline:
        end["baseline"] = baseline
    if read is None:
        try:
            read = read_manifest(run_dir)
        except ManifestProblem as exc:
            read = exc
    if isinstance(read, NotAManifest):
        return RunManifest(run_id=run_dir.name, **end)  # never overwrite a run.json this harness cannot read
    if not isinstance(read, RunManifest):  # a missing (or not JSON) run.json still gets the end: the report names it
        read = RunManifest(schema_version=SCHEMA_VERSION, run_id=run_dir.name)
    manifest = read.model_copy(update=end)
    write_manifest(run_dir, manifest)
    return manifest
