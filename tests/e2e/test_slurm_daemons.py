"""How the SLURM module's fixture finds, stops and checks the daemons it started: `slurm_up.sh down <names>` and the
pid-file reading, on stand-in daemons (a copy of sleep named slurmd/slurmctld) in a scratch pid directory. No cluster,
no root: these run in `make test-unit` too."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from slurm_daemons import running_daemons, still_running, stop


@pytest.fixture
def daemons(tmp_path):
    """start(name) runs a stand-in for that daemon with a pid file as slurm_up.sh writes it; all killed at the end."""
    procs: list[subprocess.Popen] = []
    piddir = tmp_path / "pids"
    piddir.mkdir()

    def start(name: str) -> subprocess.Popen:
        program = tmp_path / name.split("-")[0]
        if not program.exists():
            shutil.copy(shutil.which("sleep"), program)
        proc = subprocess.Popen([str(program), "120"])
        procs.append(proc)
        (piddir / f"{name}.pid").write_text(f"{proc.pid}\n")
        return proc

    yield piddir, start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_a_stale_or_reused_pid_file_is_no_running_daemon(daemons):
    piddir, start = daemons
    start("slurmctld")
    dead = subprocess.Popen(["true"])
    dead.wait()
    (piddir / "slurmd-node1.pid").write_text(str(dead.pid))
    other = subprocess.Popen([shutil.which("sleep"), "120"])  # a pid now held by another program
    try:
        (piddir / "slurmd-node2.pid").write_text(str(other.pid))
        (piddir / "munged.pid").write_text("not a pid")
        assert sorted(running_daemons(piddir)) == ["slurmctld"]
    finally:
        other.kill()
        other.wait()


def test_down_stops_only_the_named_daemons(daemons):
    piddir, start = daemons
    start("slurmd-node1")
    start("slurmctld")
    ours = {n: p for n, p in running_daemons(piddir).items() if n == "slurmd-node1"}
    assert "stopped slurmd-node1" in stop(["slurmd-node1"], piddir)
    assert still_running(ours, timeout=5) == []
    assert sorted(running_daemons(piddir)) == ["slurmctld"]  # not named: left running
    assert not (piddir / "slurmd-node1.pid").exists()


def test_a_daemon_left_running_is_reported(daemons):
    """The fixture's check with a planted fault: a daemon it started that `down` did not stop (not named)."""
    piddir, start = daemons
    proc = start("slurmd-node2")
    started = running_daemons(piddir)
    stop(["slurmd-node1"], piddir)  # the wrong one
    assert still_running(started, timeout=0.5) == [f"slurmd-node2 (pid {proc.pid})"]
