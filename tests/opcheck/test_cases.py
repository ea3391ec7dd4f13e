"""Case inputs (pure) and the source locator of the MLA query gather."""

from __future__ import annotations

import numpy as np
import pytest

from harness.opcheck import cases as C
from harness.opcheck import reference as ref
from harness.opcheck.vllm_ops import _mla_gather_block

from . import NO_VLLM025, VLLM025

MLA_025 = VLLM025 / "vllm" / "model_executor" / "layers" / "attention" / "mla_attention.py"


def test_case_ids_unique_and_cover_the_issue():
    cases = C.build_cases(2, "cuda")
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))
    joined = " ".join(ids)
    for needle in ("transport96", "empty_shard", "padding_rows", "cuda_graph_replay/h96", "mla_query_gather/h96x576",
                   "get_dcp_local_seq_lens/I1", "get_dcp_local_seq_lens/I16", "compute_slot_mapping",
                   "cp_lse_ag_out_ar", "dcp_a2a_lse_reduce"):
        assert needle in joined, needle


def test_empty_shard_pattern_marks_exactly_the_ranks_without_kv():
    inp = C.combine_inputs(2, 12, 4, 8, "empty_shard", seed=3)
    empty = ~np.isfinite(inp.lses) | (inp.lses == -np.inf)
    assert empty.any() and not empty.all(axis=0).any()  # some shards empty, never every shard of a real token
    assert np.isnan(inp.outs[empty]).all()
    assert {str(x) for x in inp.lses[empty].ravel()} <= {"-inf", "inf", "nan"}


def test_padding_rows_are_empty_on_every_rank():
    inp = C.combine_inputs(2, 10, 2, 4, "padding", seed=1)
    assert not np.isfinite(inp.lses[:, 5:]).any() and np.isfinite(inp.lses[:, :5]).all()
    out, lse = ref.merge_partials(inp.outs, inp.lses)
    assert (out[5:] == 0).all() and np.isneginf(lse[5:]).all()


def test_masked_args_pattern_is_garbage_until_masked():
    inp = C.combine_inputs(2, 12, 4, 8, "masked_args", seed=5)
    assert np.isfinite(inp.lses).all() and inp.seq_lens.shape == (2, 12)
    masked = C.masked_lses(inp)
    assert np.array_equal(np.isneginf(masked), (inp.seq_lens == 0)[:, :, None].repeat(4, axis=2))


def test_length_sweep_has_empty_short_and_long_lengths():
    s = C.length_sweep(2, 16)
    assert s[0] == 0 and 1 in s and max(s) == 2 * 1_048_576 - 1


def test_mla_gather_block_found_in_a_synthetic_source():
    src = (
        "class A:\n"
        "    def f(self, mqa_q):\n"
        "        if self.impl.dcp_world_size > 1:\n"
        "            mqa_q = get_dcp_group().all_gather(mqa_q, dim=1)\n"
        "        if self.impl.dcp_world_size > 1:\n"
        "            out = combine(mqa_q)\n"
    )
    body, first, last = _mla_gather_block(src)
    assert (first, last) == (4, 4) and len(body) == 1
    assert _mla_gather_block(src.replace("all_gather", "gather")) is None


@pytest.mark.skipif(not MLA_025.exists(), reason=NO_VLLM025)
def test_mla_gather_block_found_in_vllm_025():
    body, first, last = _mla_gather_block(MLA_025.read_text())
    assert (first, last) == (803, 807) and len(body) == 2
