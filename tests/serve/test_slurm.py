"""SLURM commands as the launcher builds and reads them (no cluster needed: tests/e2e/test_e2e_slurm.py runs them)."""

import pytest

from harness.config.arms import load_arm
from harness.config.errors import LaunchError
from harness.serve.slurm import granted, salloc_argv
from harness.serve.slurm_allocation import allocation_verdict


def test_salloc_asks_for_the_arms_nodes_and_its_slurm_args():
    arm = load_arm("tp16-dcp16", ["launcher.nodes=[gpu-a, gpu-b]", "launcher.slurm_args=[--partition=gpu, -t, '1:00:00']"])
    assert salloc_argv(arm) == ["salloc", "--no-shell", "--nodes=2", "--job-name=harness-tp16-dcp16",
                                "--immediate=300", "--nodelist=gpu-a,gpu-b", "--partition=gpu", "-t", "1:00:00"]
    waits = load_arm("tp16-dcp16", ["launcher.nodes=[gpu-a, gpu-b]", "launcher.allocation_timeout_s=20"])
    assert "--immediate=20" in salloc_argv(waits)  # salloc withdraws the request after that long


def test_granted_reads_the_job_id_and_refuses_anything_else():
    assert granted("salloc: Pending job allocation 12\nsalloc: Granted job allocation 12\n") == "12"
    with pytest.raises(LaunchError, match="did not grant"):
        granted("salloc: error: Job submit/allocate failed: Invalid partition name specified")


def test_allocation_verdict(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    assert allocation_verdict(load_arm("tp16-dcp16")).ok
    monkeypatch.delenv("SLURM_JOB_ID")
    refused = allocation_verdict(load_arm("tp16-dcp16"))
    assert not refused.ok and "`salloc --nodes=2 '<partition/account/time options>' python -m harness qualify " \
                              "--arm tp16-dcp16`" in refused.detail
    obtains = allocation_verdict(load_arm("tp16-dcp16", ["launcher.slurm_args=[--partition=gpu]"]))
    assert obtains.ok and "'--comment=harness-owner host=<this host> pid=<harness pid>" in obtains.detail  # as launched
    assert "waiting at most 300 s (launcher.allocation_timeout_s)" in obtains.detail and "--immediate=300" in \
        obtains.detail


def test_admission_asks_slurm_for_the_nodes_once_per_process_failure_included(monkeypatch):
    # plan of a two-node arm asked twice (verdicts, placement preview): with slurmctld down that was 2 x ~10 s
    from harness.config.errors import LaunchError
    from harness.serve import slurm, slurm_allocation

    asked = []

    def down():
        asked.append(1)
        raise LaunchError("`scontrol -o show node` failed (exit 1): Unable to contact slurm controller")

    monkeypatch.setattr(slurm_allocation, "_ADMISSION_NODES", [])
    monkeypatch.setattr(slurm, "cluster_nodes", down)
    for _ in range(2):
        try:
            slurm_allocation.admission_nodes()
        except LaunchError as exc:
            assert "Unable to contact" in str(exc)
        else:
            raise AssertionError("a failed question must fail every time it is read")
    assert len(asked) == 1


def fake_scontrol(bin_dir, calls, ping_rc: int) -> None:
    """An `scontrol` on PATH that logs its argv: `ping` answers at once (UP, or DOWN with SLURM's banner and exit 1);
    any other question sleeps 30 s, as a question to a controller that is down waits SLURM's message timeout."""
    bin_dir.mkdir()
    verdict = "UP" if ping_rc == 0 else "DOWN\n*****\n** RESTORE SLURMCTLD DAEMON TO SERVICE **\n*****"
    script = bin_dir / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nif [ "$1" = ping ]; then\n'
                      f'  printf "Slurmctld(primary) at h is {verdict}\\n"; exit {ping_rc}\nfi\n'
                      f'[ {ping_rc} = 0 ] || sleep 30\necho "NodeName=node1 NodeAddr=127.0.0.1 NodeHostName=h"\n')
    script.chmod(0o755)


@pytest.mark.parametrize("ping_rc", [0, 1])
def test_a_controller_that_is_down_is_named_at_once_not_after_slurms_message_timeout(tmp_path, monkeypatch, ping_rc):
    import time

    from harness.serve import slurm

    calls = tmp_path / "calls.log"
    fake_scontrol(tmp_path / "bin", calls, ping_rc)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    t0 = time.monotonic()
    if ping_rc == 0:
        assert slurm.cluster_nodes()["node1"]["NodeAddr"] == "127.0.0.1"
        assert calls.read_text().splitlines() == ["ping", "-o show node"]
    else:
        with pytest.raises(LaunchError) as exc:
            slurm.cluster_nodes()
        assert str(exc.value) == ("`scontrol -o show node` not asked: slurmctld does not answer (`scontrol ping` "
                                  "failed (exit 1): Slurmctld(primary) at h is DOWN)")
        assert calls.read_text().splitlines() == ["ping"]  # the slow question never asked
    assert time.monotonic() - t0 < 10
