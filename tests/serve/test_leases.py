"""GPU leases: disjoint sets, a wait that names the holders, release on any exit (kill -9 included)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from harness.config.errors import LaunchError
from harness.config.paths import REPO_ROOT
from harness.serve.leases import lease_gpus, try_lease

GPUS = [0, 1, 2, 3]


def holder_process(directory, count: int, hold: str = "sleep") -> subprocess.Popen:
    """Another process that leases `count` GPUs, prints them, then sleeps (or exits without releasing)."""
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from harness.serve.leases import lease_gpus
        lease = lease_gpus({count}, {GPUS}, "holder", 5, Path({str(directory)!r}), poll_s=0.05)
        print(",".join(map(str, lease.gpus)), flush=True)
        if {hold!r} == "sleep":
            time.sleep(600)
        """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    return proc


def test_two_leases_get_disjoint_gpus_and_release_frees_them(tmp_path):
    a = lease_gpus(2, GPUS, "a", 1, tmp_path)
    b = lease_gpus(2, GPUS, "b", 1, tmp_path)
    assert a.gpus == [0, 1] and b.gpus == [2, 3]
    assert try_lease(1, GPUS, tmp_path, "c") is None  # all four held
    a.release()
    c = lease_gpus(2, GPUS, "c", 1, tmp_path)
    assert c.gpus == [0, 1]
    b.release()
    c.release()


def test_a_lease_that_cannot_be_had_times_out_naming_the_holders(tmp_path):
    proc = holder_process(tmp_path, 3)
    try:
        assert proc.stdout.readline().strip() == "0,1,2"
        with pytest.raises(LaunchError) as exc:
            lease_gpus(2, GPUS, "cand", 0.3, tmp_path, poll_s=0.05)
        assert f"gpu 0: held by pid {proc.pid} (holder, since" in str(exc.value)
        assert "arm 'cand': no 2 free GPU(s) of [0, 1, 2, 3] after 0 s" in str(exc.value)
        partial = lease_gpus(1, GPUS, "one", 0.3, tmp_path)  # the fourth is free: a failed try held nothing
        assert partial.gpus == [3]
        partial.release()
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("how", ["kill -9", "exit without release"])
def test_a_dead_holders_lease_is_reclaimed_at_once(tmp_path, how):
    proc = holder_process(tmp_path, 4, hold="sleep" if how == "kill -9" else "exit")
    assert proc.stdout.readline().strip() == "0,1,2,3"
    if how == "kill -9":
        assert try_lease(1, GPUS, tmp_path, "x") is None  # held while it lives
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    t0 = time.monotonic()
    lease = lease_gpus(4, GPUS, "after", 2, tmp_path, poll_s=0.05)
    assert lease.gpus == GPUS and time.monotonic() - t0 < 1
    lease.release()


def test_more_gpus_than_the_host_has_is_refused_at_once(tmp_path):
    with pytest.raises(LaunchError, match="needs 5 GPU\\(s\\); this host has 4"):
        lease_gpus(5, GPUS, "big", 10, tmp_path)
