"""Allocations left by a dead harness: the owner in the job's comment and the decision which to cancel (pure); the
real SLURM path is in tests/e2e/test_e2e_slurm.py."""

import os
import socket
import subprocess

import psutil

from harness.config.arms import load_arm
from harness.serve.orphans import Job, Owner, orphaned, parse_owner, process_alive, this_process
from harness.serve.slurm import salloc_argv

HOST = "login1"


def job(job_id: str, comment: str, name: str = "harness-cpu-slurm") -> Job:
    return Job(job_id, name, comment)


def test_the_owner_round_trips_through_the_comment_and_salloc_carries_it():
    owner = Owner(HOST, 4242, 1796000000, "20261130-012152")
    assert parse_owner(owner.comment()) == owner
    argv = salloc_argv(load_arm("cpu-slurm"), owner.comment())
    assert f"--comment={owner.comment()}" in argv and argv[:2] == ["salloc", "--no-shell"]
    me = this_process("r1")
    assert me.pid == os.getpid() and process_alive(me.pid, me.start)


def test_a_comment_the_harness_did_not_write_names_no_owner():
    for comment in ("(null)", "", "nightly dcp run", "harness-owner host=h pid=x start=1", "harness-owner pid=3"):
        assert parse_owner(comment) is None, comment


def test_only_jobs_of_a_dead_owner_on_this_host_are_orphaned():
    dead, living, reused = Owner(HOST, 11, 100, "a"), Owner(HOST, 12, 100, "b"), Owner(HOST, 13, 100, "c")
    elsewhere = Owner("login2", 11, 100, "d")
    jobs = [job("1", dead.comment()), job("2", living.comment()), job("3", elsewhere.comment()),
            job("4", "(null)", name="interactive"), job("5", reused.comment())]
    processes = {12: 100, 13: 250}  # pid -> start: pid 13 now names a process that started later

    def alive(pid: int, start: int) -> bool:
        return processes.get(pid) == start

    assert [(j.job_id, o.run) for j, o in orphaned(jobs, HOST, alive)] == [("1", "a"), ("5", "c")]
    assert orphaned(jobs, HOST, lambda pid, start: True) == []


def test_process_alive_tells_a_dead_pid_and_a_reused_one():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        start = int(psutil.Process(proc.pid).create_time())
        assert process_alive(proc.pid, start)
        assert not process_alive(proc.pid, start - 3600)  # the pid given to a younger process
    finally:
        proc.kill()
        proc.wait()
    assert not process_alive(proc.pid, start)


def test_make_slurm_down_entry_reports_no_cluster_and_cancels_only_the_dead(monkeypatch, capsys):
    from harness.config.errors import LaunchError
    from harness.serve import orphans, slurm

    def no_cluster():
        raise LaunchError("`squeue` failed (exit 1): Unable to contact slurm controller")
    monkeypatch.setattr(slurm, "my_jobs", no_cluster)
    assert orphans.main() == 0 and "no stale allocations reclaimed" in capsys.readouterr().out

    dead = Owner(socket.gethostname(), 999_999_999, 1, "night-1").comment()
    monkeypatch.setattr(slurm, "my_jobs", lambda: [("41", "harness-a", dead), ("42", "other", "(null)")])
    cancelled = []
    monkeypatch.setattr(slurm, "cancel", cancelled.append)
    assert orphans.main() == 0 and cancelled == ["41"]
    assert "stale allocations cancelled: 41" in capsys.readouterr().out
