"""Node states as sinfo reports them, and the decision whether an arm's allocation can be granted now (pure; the real
cluster's side is tests/e2e/test_e2e_slurm.py: a drained node fails the arm in seconds)."""

import pytest

from harness.config.arms import load_arm
from harness.plan.slurm_nodes import allocation_blocker, parse_sinfo, requested_partitions

# `sinfo -N -h -o '%N|%P|%T|%E'` of the local cluster with node2 drained, and of the device run whose slurmd never
# came up (both nodes unknown and not responding).
DRAINED = "node1|debug*|idle|none\nnode2|debug*|drained|test\n"
DEVICE = "node1|debug*|unknown*|Not responding\nnode2|debug*|unknown*|none\n"
IDLE = "node1|debug*|idle|none\nnode2|debug*|mixed|none\n"


def test_parse_reads_state_reason_and_partitions_of_each_node_once():
    states = parse_sinfo("gpu-a|gpu|idle|none\ngpu-a|all*|idle|none\ngpu-b|gpu|down*|Not responding\n\n")
    assert list(states) == ["gpu-a", "gpu-b"]
    assert states["gpu-a"].partitions == ("gpu", "all") and states["gpu-a"].default_partition
    assert states["gpu-b"].describe() == "gpu-b down* (Not responding)"


@pytest.mark.parametrize("state, usable", [
    ("idle", True), ("mixed", True), ("allocated", True), ("completing", True), ("idle~", True), ("idle#", True),
    ("idle*", False), ("down*", False), ("down", False), ("drained", False), ("draining", False), ("drain", False),
    ("unknown*", False), ("unknown", False), ("fail", False), ("failing", False), ("inval", False),
])
def test_which_states_can_be_allocated(state, usable):
    assert parse_sinfo(f"n|p*|{state}|none")["n"].usable is usable


def test_not_responding_is_said_when_slurm_gives_no_reason():
    assert parse_sinfo(DEVICE)["node2"].describe() == "node2 unknown* (not responding)"
    assert parse_sinfo(IDLE)["node1"].describe() == "node1 idle"


def test_named_nodes_that_cannot_be_allocated_block_the_arm_with_what_to_do():
    why = allocation_blocker(load_arm("cpu-slurm-2node"), parse_sinfo(DEVICE))
    assert why.startswith("arm 'cpu-slurm-2node' needs SLURM node(s) that cannot be allocated now: node1 unknown* "
                          "(Not responding), node2 unknown* (not responding). salloc would wait")
    assert "`scontrol update nodename=node1,node2 state=resume`" in why and "make slurm-up" in why
    only_node2 = allocation_blocker(load_arm("cpu-slurm"), parse_sinfo(DRAINED))  # cpu-slurm runs on node2
    assert "now: node2 drained (test)." in only_node2 and "node1" not in only_node2.split("salloc")[0]
    assert allocation_blocker(load_arm("cpu-slurm"), parse_sinfo(IDLE)) is None
    assert allocation_blocker(load_arm("cpu-slurm", ["launcher.nodes=[node1]"]), parse_sinfo(DRAINED)) is None


def test_unnamed_nodes_need_enough_usable_ones_in_the_requested_partition():
    arm = load_arm("tp16-dcp16", ["launcher.slurm_args=[-p, gpu, --time=1:00:00]"])
    gpu = "a|gpu|idle|none\nb|gpu|drained|kernel update\nc|cpu*|idle|none\n"
    why = allocation_blocker(arm, parse_sinfo(gpu))
    assert "needs 2 SLURM node(s) of partition gpu, which has 1 usable now: a idle, b drained (kernel update)" in why
    assert allocation_blocker(arm, parse_sinfo(gpu.replace("drained|kernel update", "mixed|none"))) is None
    # no partition asked for: the default one (c alone here)
    default = allocation_blocker(load_arm("tp16-dcp16", ["launcher.slurm_args=[--time=1:00:00]"]), parse_sinfo(gpu))
    assert "of the default partition, which has 1 usable now: c idle" in default


def test_a_named_node_missing_from_the_cluster_blocks_too():
    why = allocation_blocker(load_arm("cpu-slurm", ["launcher.nodes=[node9]"]), parse_sinfo(IDLE))
    assert "node9 absent (not in this cluster)" in why


@pytest.mark.parametrize("args, partitions", [
    ([], []), (["--partition=gpu"], ["gpu"]), (["--partition", "a,b"], ["a", "b"]), (["-p", "gpu"], ["gpu"]),
    (["-pgpu"], ["gpu"]), (["-p", "a", "--partition=b"], ["b"]), (["--time=1:00:00", "--account=x"], []),
])
def test_requested_partitions(args, partitions):
    assert requested_partitions(args) == partitions
