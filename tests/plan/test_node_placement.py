"""The placement rule: node 0's server binds exactly the address the harness connects to (and the workers' master
address); a loopback or wildcard address that the harness cannot use is refused. A local cluster whose nodes are all
127.0.0.1 cannot reveal a wrong address, so the rule is tested here with real-looking ones."""

import shlex

import pytest

from harness.config.arms import load_arm
from harness.plan.node_placement import Placement, default_placement, reach_problem, slurm_placement
from harness.plan.nodes import build_plan


def flag(argv, name):
    argv = list(argv)
    return argv[argv.index(name) + 1]


def two_node_plan(addresses):
    arm = load_arm("tp16-dcp16")
    placement = slurm_placement(arm, ["gpu-a01", "gpu-a02", "gpu-a03"], addresses, "4242", "login1")
    return arm, build_plan(arm, 8123, "python3", placement)


def test_node0_binds_the_address_the_harness_connects_to_and_workers_join():
    _, plan = two_node_plan({"gpu-a01": "10.1.0.7", "gpu-a02": "10.1.0.8"})
    head, worker = plan.nodes
    assert flag(head.argv, "--host") == "10.1.0.7"
    assert plan.base_url == "http://10.1.0.7:8123"
    assert flag(head.argv, "--master-addr") == flag(worker.argv, "--master-addr") == "10.1.0.7"
    assert (head.host, worker.host) == ("gpu-a01", "gpu-a02")  # the allocation's first nnodes nodes
    assert "--jobid=4242" in head.argv and "--nodelist=gpu-a02" in worker.argv and "--host" not in worker.argv
    assert "inside SLURM allocation 4242" in plan.where and "never 0.0.0.0" in plan.where


def test_the_arms_own_node_names_win_over_the_allocation_order():
    arm = load_arm("tp16-dcp16", ["launcher.nodes=[gpu-a03, gpu-a01]"])
    placement = slurm_placement(arm, ["gpu-a01", "gpu-a03"], {"gpu-a03": "10.1.0.9"}, "1", "login1")
    plan = build_plan(arm, 8000, "python3", placement)
    assert plan.nodes[0].host == "gpu-a03" and flag(plan.nodes[0].argv, "--host") == "10.1.0.9"


@pytest.mark.parametrize("arm_name,overrides", [("cpu-smoke", []), ("cpu-smoke", ["server.host=0.0.0.0"]),
                                                ("cpu-slurm", []), ("tp16-dcp16", [])])
def test_every_plan_connects_where_node0_binds(arm_name, overrides):
    arm = load_arm(arm_name, overrides)
    plan = build_plan(arm, 9000, "python3", default_placement(arm) if arm.launcher.kind != "slurm" else
                      Placement(("n1", "n2")[: arm.parallelism.nnodes], "192.168.5.5", "9", "h"))
    bind = flag(plan.nodes[0].argv, "--host")
    connect = plan.base_url.split("//")[1].rsplit(":", 1)[0]
    assert connect == ("127.0.0.1" if bind == "0.0.0.0" else bind), shlex.join(plan.nodes[0].argv)


def test_plan_without_slurm_shows_placeholders_not_loopback():
    plan = build_plan(load_arm("tp16-dcp16"), 8000, "python3")
    assert flag(plan.nodes[0].argv, "--host") == "<address of node 0>"
    assert "--jobid=<allocation>" in plan.nodes[0].argv and "obtains one with salloc" in plan.where


def test_reach_rule_accepts_a_routable_address_and_loopback_on_node0s_own_host():
    assert reach_problem("10.1.0.7", False, "gpu-a01", "gpu-a01", "login1") is None
    assert reach_problem("127.0.0.1", True, "node1", "vm", "vm") is None  # the local cluster: node 0 is this host


def test_reach_rule_refuses_loopback_of_another_host_and_wildcards():
    far = reach_problem("127.0.0.1", True, "gpu-a01", "gpu-a01", "login1")
    assert far and "only its own host (gpu-a01) reaches" in far and "the harness runs on login1" in far
    wide = reach_problem("0.0.0.0", False, "gpu-a01", "gpu-a01", "gpu-a01")
    assert wide and "binds node 0's own address only" in wide
