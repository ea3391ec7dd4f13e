"""Several candidates in one run: the named arms -> candidate/reference pairs, and what is refused (pure)."""

from __future__ import annotations

import pytest

from harness.config.armset import ArmSet, Pair, expand_arm_set, parse_arm_names, workload_conflicts
from harness.config.errors import ConfigError

# reference: field of each arm (tp8 names none)
REFS = {"dcp8": "tp8", "dspark-dcp8": "tp8", "tp8": None, "a": "b", "b": "r", "r": None, "solo": None}


@pytest.mark.parametrize(("text", "names"), [("dcp8,dspark-dcp8", ["dcp8", "dspark-dcp8"]),
                                             ("dcp8 dspark-dcp8", ["dcp8", "dspark-dcp8"]),
                                             (" dcp8, dspark-dcp8 ", ["dcp8", "dspark-dcp8"]), ("tp8", ["tp8"])])
def test_arm_names_by_commas_or_spaces(text, names):
    assert parse_arm_names(text) == names


@pytest.mark.parametrize(("text", "needle"), [("", "empty arm name"), ("a,,b", "empty arm name"),
                                              ("a,", "empty arm name"), ("a,b,a", "arm(s) a named more than once")])
def test_bad_arm_lists_are_refused_with_the_reason(text, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        parse_arm_names(text)


def test_two_candidates_share_one_reference():
    s = expand_arm_set(["dcp8", "dspark-dcp8"], REFS)
    assert s.pairs == (Pair("dcp8", "tp8"), Pair("dspark-dcp8", "tp8"))
    assert s.arms == ["dcp8", "dspark-dcp8", "tp8"]  # the shared reference once
    assert s.run_order() == ["tp8", "dcp8", "dspark-dcp8"]  # measured before its candidates
    assert s.owner("tp8") == "dcp8" and s.owner("dspark-dcp8") == "dspark-dcp8"


def test_a_named_reference_is_not_a_candidate_of_its_own():
    assert expand_arm_set(["tp8", "dcp8", "dspark-dcp8"], REFS) == expand_arm_set(["dcp8", "dspark-dcp8"], REFS)
    assert expand_arm_set(["dcp8", "tp8"], REFS).pairs == (Pair("dcp8", "tp8"),)


def test_a_candidate_may_be_another_candidates_reference():
    s = expand_arm_set(["a", "b"], REFS)
    assert s.pairs == (Pair("a", "b"), Pair("b", "r"))
    assert s.arms == ["a", "b", "r"] and s.run_order() == ["r", "b", "a"]
    assert s.owner("b") == "b" and s.owner("r") == "b"


def test_an_arm_without_reference_named_alone_is_a_candidate_without_one():
    assert expand_arm_set(["solo"], REFS).pairs == (Pair("solo", None),)
    assert expand_arm_set(["solo", "dcp8"], REFS).arms == ["solo", "dcp8", "tp8"]


def test_a_command_line_reference_replaces_the_one_candidates_own():
    assert expand_arm_set(["dcp8"], REFS, "r").pairs == (Pair("dcp8", "r"),)
    with pytest.raises(ConfigError, match="--reference r: a command-line reference applies to one candidate"):
        expand_arm_set(["dcp8", "dspark-dcp8"], REFS, "r")


def test_a_reference_cycle_is_refused():
    with pytest.raises(ConfigError, match="each other's references .x -> y -> x."):
        expand_arm_set(["x", "y"], {"x": "y", "y": "x"})


CPU = {"long_prefix": "long_prefix_cpu", "gsm8k": "gsm8k_cpu"}


def test_candidates_of_one_reference_must_choose_its_workloads():
    s = expand_arm_set(["dcp8", "dspark-dcp8"], REFS)
    where = {"dcp8": "configs/arms/dcp8.yaml", "dspark-dcp8": "configs/arms/dspark-dcp8.yaml"}
    assert workload_conflicts(s, {"dcp8": CPU, "dspark-dcp8": CPU}, where) == []
    (msg,) = workload_conflicts(s, {"dcp8": CPU, "dspark-dcp8": {**CPU, "gsm8k": "gsm8k_full"}}, where)
    assert msg.startswith("arm 'dspark-dcp8': reference 'tp8' is measured once, with one workload per suite")
    assert ("field workloads.gsm8k: gsm8k_full (configs/arms/dspark-dcp8.yaml) vs gsm8k_cpu (arm 'dcp8', "
            "configs/arms/dcp8.yaml)") in msg
    # keys a candidate does not use (spec_decode without a drafter) are not compared
    assert workload_conflicts(s, {"dcp8": CPU, "dspark-dcp8": {**CPU, "spec_decode": "x"}}, where) == []


def test_a_reference_that_is_a_candidate_too_is_measured_with_its_own_workloads():
    s = expand_arm_set(["a", "b"], REFS)
    (msg,) = workload_conflicts(s, {"a": {**CPU, "long_prefix": "long_prefix_gpu_smoke"}, "b": CPU},
                                {"a": "a.yaml", "b": "b.yaml"})
    assert msg.startswith("arm 'a': reference 'b'") and "(arm 'b', b.yaml)" in msg


def test_independent_pairs_may_choose_different_workloads():
    s = ArmSet((Pair("dcp8", "tp8"), Pair("a", "r")))
    assert workload_conflicts(s, {"dcp8": CPU, "a": {"gsm8k": "gsm8k_full"}}, {"dcp8": "x", "a": "y"}) == []
