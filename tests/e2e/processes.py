"""A test's own processes: waiting for them to be gone (a zombie, exited but not yet reaped, counts as gone), and
for vLLM's engine core to run under a harness before a test signals it."""

from __future__ import annotations

import time

import psutil

ENGINE_CORE = "EngineCore"  # vLLM titles its engine core process VLLM::EngineCore (EngineCore_DP<n> with data parallel)


def wait_gone(pids: list[int], timeout: float = 30) -> list[int]:
    """The pids still alive after `timeout` seconds; [] as soon as none is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return []
        time.sleep(0.5)
    return alive


def described(p: psutil.Process) -> str:
    """'pid name: cmdline' (its first words), or 'pid (gone)'."""
    try:
        return f"{p.pid} {p.name()}: {' '.join(p.cmdline()[:4])}"
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return f"{p.pid} (gone)"


def is_engine_core(p: psutil.Process) -> bool:
    """vLLM's engine core: its process title (cmdline, and the name where the title sets it) reads EngineCore. It
    takes that title as it starts, before the model loads; until then it is an unnamed spawn of the API server."""
    try:
        return ENGINE_CORE in p.name() or any(ENGINE_CORE in part for part in p.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def tree_with_engine_core(root: psutil.Process, timeout: float = 300, poll_s: float = 0.5) -> list[psutil.Process]:
    """Every descendant of `root` (a harness: its server, the server's engine core below it, ...) once an engine core
    is among them, so that a signal sent next reaches a server whose engine core exists: an orphaned EngineCore is
    what the orphan tests look for, and a signal sent as the API server starts would find none to orphan. Fails
    (AssertionError naming the processes seen) when `root` ends first or no engine core appears in `timeout` s."""
    deadline = time.monotonic() + timeout
    tree: list[psutil.Process] = []
    while True:
        try:
            tree = root.children(recursive=True)
            ended = root.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            ended = True
        if any(is_engine_core(p) for p in tree):
            return tree
        if ended or time.monotonic() >= deadline:
            why = f"process {root.pid} ended" if ended else f"{timeout:g} s passed"
            seen = "; ".join(described(p) for p in tree) or "none"
            raise AssertionError(f"no vLLM {ENGINE_CORE} process under {root.pid} ({why}); its processes: {seen}")
        time.sleep(poll_s)
