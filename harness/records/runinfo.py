"""run.json: what a qualification records at its start (harness version, commit, host, argv, suites, workloads,
arms, gate thresholds) and its end (time, exit code, device). I/O: git, NVML, /proc/cpuinfo, the file itself."""

from __future__ import annotations

import json
import platform
import socket
import subprocess
import time
from pathlib import Path

from harness import __version__
from harness.config.errors import HarnessError
from harness.config.paths import REPO_ROOT
from harness.config.thresholds import Gates, for_run, load_gates
from harness.config.workloads import FAMILIES, load_workload, workload_for, workload_kind


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


def start_info(arms: dict[str, dict], argv: list[str], suites: list[str], workloads: dict[str, dict]) -> dict:
    """run.json's opening fields; `arms` and `argv` arrive redacted."""
    return {"harness_version": __version__, "git_commit": git_commit(), "host": socket.gethostname(),
            "started": now(), "argv": argv, "suites": suites, "workloads": workloads, "arms": arms}


def concurrency_levels(workloads: dict | None) -> list[int]:
    """The long-prefix concurrency levels recorded workloads (run.json's) ask for; none when not recorded."""
    levels = ((workloads or {}).get("long_prefix") or {}).get("concurrency") or []
    return [c for c in levels if isinstance(c, int)]


def pairs_of(info: dict) -> list[dict]:
    """run.json's candidate/reference pairs, in the order named (pure): `pairs` where recorded, else (runs of one
    candidate written before it) the first arm against the second. Each: {"candidate", "reference", "gates",
    "workloads"}; gates None where the run did not record them, workloads the run's top-level ones where the pair has
    none of its own (runs written before pairs recorded theirs)."""
    if isinstance(info.get("pairs"), list):
        return [{"candidate": p.get("candidate"), "reference": p.get("reference"), "gates": p.get("gates"),
                 "workloads": p.get("workloads") or info.get("workloads")}
                for p in info["pairs"] if isinstance(p, dict) and p.get("candidate")]
    arms = list(info.get("arms") or {})
    if not arms:
        return []
    return [{"candidate": arms[0], "reference": arms[1] if len(arms) > 1 else None, "gates": info.get("gates"),
             "workloads": info.get("workloads")}]


def read_run_info(run_dir: Path) -> tuple[dict, list[str]]:
    path = run_dir / "run.json"
    if not path.is_file():
        return {}, [f"{path}: missing: no provenance (harness version, host, arms) for this run"]
    try:
        return json.loads(path.read_text()), []
    except json.JSONDecodeError as exc:
        return {}, [f"{path}: not JSON ({exc.msg} at line {exc.lineno}); provenance unknown"]


def write_run_info(run_dir: Path, info: dict) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(info, indent=2) + "\n")


def finish_run_info(run_dir: Path, exit_code: int, baseline: str | None = None,
                    pytest_exit_code: int | None = None) -> dict:
    """Add the end time, exit code (and pytest's, where a baseline regression changed it) and device to run.json."""
    info, _ = read_run_info(run_dir)
    info.update(finished=now(), exit_code=exit_code, device=device_info(),
                pytest_exit_code=exit_code if pytest_exit_code is None else pytest_exit_code)
    if baseline:
        info["baseline"] = baseline
    write_run_info(run_dir, info)
    return info


def run_thresholds(run_dir: Path, cand: str, strict: bool) -> Gates:
    """The thresholds a suite judges its candidate with at the end of a run: the ones run.json recorded at the start
    (resolved for a strict run then), so the suite's gate and the report's agree; without a run.json (pytest run by
    hand) the arm's gates.yaml sections, resolved for `strict`."""
    info, _ = read_run_info(run_dir)
    recorded = next((p["gates"] for p in pairs_of(info) if p["candidate"] == cand and p.get("gates")), None)
    return Gates.model_validate(recorded) if recorded else for_run(load_gates(cand), strict)
