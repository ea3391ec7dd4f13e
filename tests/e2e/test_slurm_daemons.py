"""How the SLURM module's fixture finds, stops and checks the daemons it started: `slurm_up.sh down <names>` and the
pid-file reading, on stand-in daemons (a copy of sleep named slurmd/slurmctld) in a scratch pid directory; and
slurm_up.sh's library check on a real program whose library is missing. No cluster, no root: these run in
`make test-unit` too."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from slurm_daemons import SCRIPT, running_daemons, still_running, stop

CGROUP_V2 = Path("/usr/lib/x86_64-linux-gnu/slurm-wlm/cgroup_v2.so")


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


def without_library(src: Path, soname: str, dst: Path) -> str:
    """A copy of the ELF file `src` whose NEEDED entry `soname` names a library no system has (same length, so the
    file stays valid); the name it needs now."""
    data = src.read_bytes()
    missing = soname.replace("lib", "lix", 1)
    assert data.count(soname.encode() + b"\0") == 1
    dst.write_bytes(data.replace(soname.encode() + b"\0", missing.encode() + b"\0"))
    dst.chmod(0o755)
    return missing


def check_libs(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), "check-libs", *map(str, files)], capture_output=True, text=True,
                          timeout=60)


def test_check_libs_names_each_missing_library_and_who_needs_it(tmp_path):
    """The device's failure, planted: cgroup_v2.so without its libdbus-1.so.3 (where SLURM is installed; a copy of
    sleep without its libc elsewhere). slurm_up.sh runs this check before any daemon starts."""
    src, soname = (CGROUP_V2, "libdbus-1.so.3") if CGROUP_V2.is_file() else (Path(shutil.which("sleep")), "libc.so.6")
    planted = tmp_path / src.name
    missing = without_library(src, soname, planted)
    out = check_libs(planted, Path(shutil.which("sleep")))
    assert out.returncode == 5, out.stdout + out.stderr
    assert f"  {missing}, needed by {planted}\n" in out.stderr
    assert "SLURM_DEB_PACKAGES in the Makefile" in out.stderr and out.stderr.count("needed by") == 1  # not sleep


def test_check_libs_passes_programs_whose_libraries_resolve():
    out = check_libs(Path(shutil.which("sleep")), *([CGROUP_V2] if CGROUP_V2.is_file() else []))
    assert out.returncode == 0 and out.stderr == "", out.stderr
