"""The float64 reference against independent computations, and the limits against planted faults."""

from __future__ import annotations

import numpy as np
import pytest

from harness.opcheck import reference as ref
from harness.opcheck import tolerance as tol

TOL = tol.load_tolerances()


def _attention(q, k, v):
    """Softmax attention of q [B,H,Dk] over k [L,H,Dk], v [L,H,Dv] in float64; returns out [B,H,Dv], lse [B,H]."""
    if k.shape[0] == 0:
        b, h = q.shape[:2]
        return np.full((b, h, v.shape[-1]), np.nan), np.full((b, h), -np.inf)
    s = np.einsum("bhd,lhd->bhl", q, k) / np.sqrt(q.shape[-1])
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    lse = np.log(p.sum(axis=-1)) + m[..., 0]
    return np.einsum("bhl,lhd->bhd", p / p.sum(axis=-1, keepdims=True), v), lse


def _shards(length, world, interleave, rng, heads=4, dk=16, dv=8, batch=3):
    q = rng.standard_normal((batch, heads, dk))
    k = rng.standard_normal((length, heads, dk)) * 2
    v = rng.standard_normal((length, heads, dv))
    owner = ref.owner_rank(np.arange(length), world, interleave)
    parts = [_attention(q, k[owner == r], v[owner == r]) for r in range(world)]
    outs = np.stack([p[0] for p in parts])
    lses = np.stack([p[1] for p in parts])
    return (q, k, v), outs, lses


@pytest.mark.parametrize("length,world,interleave", [(37, 4, 1), (37, 4, 2), (64, 2, 16), (3, 4, 1), (1, 8, 4)])
def test_merge_of_shards_equals_attention_over_all_kv(length, world, interleave):
    rng = np.random.default_rng(length * 100 + world * 10 + interleave)
    (q, k, v), outs, lses = _shards(length, world, interleave, rng)
    full_out, full_lse = _attention(q, k, v)
    out, lse = ref.merge_partials(outs, lses)
    np.testing.assert_allclose(out, full_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lse, full_lse, rtol=1e-12, atol=1e-12)
    # base 2: the same LSEs expressed in log2 units give the same output and log2 of the same sum
    out2, lse2 = ref.merge_partials(outs, lses / np.log(2.0), base_e=False)
    np.testing.assert_allclose(out2, full_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lse2, full_lse / np.log(2.0), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("marker", [-np.inf, np.inf, np.nan])
def test_empty_shard_markers_do_not_contribute_even_with_nan_output(marker):
    outs = np.array([[[[np.nan, np.nan]]], [[[3.0, -1.0]]]])
    lses = np.array([[[marker]], [[0.5]]])
    out, lse = ref.merge_partials(outs, lses)
    np.testing.assert_array_equal(out, [[[3.0, -1.0]]])
    assert lse[0, 0] == 0.5


def test_all_empty_row_merges_to_zero_and_minus_inf():
    outs = np.full((2, 1, 1, 3), np.nan)
    out, lse = ref.merge_partials(outs, np.array([[[np.inf]], [[-np.inf]]]))
    np.testing.assert_array_equal(out, 0.0)
    assert np.isneginf(lse).all()


def test_local_seq_lens_known_values_and_conservation():
    # interleave 2, world 2: tokens 0,1 -> r0; 2,3 -> r1; 4 -> r0
    np.testing.assert_array_equal(ref.local_seq_lens([5], 2, 2), [[3, 2]])
    np.testing.assert_array_equal(ref.local_seq_lens([0, 1], 4, 1), [[0, 0, 0, 0], [1, 0, 0, 0]])
    lens = np.arange(0, 200)
    for world, inter in [(2, 1), (4, 3), (8, 16)]:
        got = ref.local_seq_lens(lens, world, inter)
        np.testing.assert_array_equal(got.sum(axis=1), lens)
        # closed form of the largest shard (the preflight's bound): ceil(L / (N*I)) * I
        assert (got.max(axis=1) <= -(-lens // (world * inter)) * inter).all()


def test_slot_mapping_is_dense_per_rank_and_agrees_with_local_lengths():
    world, inter, bs = 2, 4, 8
    length = 45
    table = np.array([[7, 3, 9, 1, 5, 2]])
    pos = np.arange(length)
    for rank in range(world):
        slots = ref.local_slot_mapping(pos, np.zeros(length, int), table, bs, world, rank, inter)
        mine = slots[slots >= 0]
        assert mine.size == ref.local_seq_lens([length], world, inter)[0, rank]
        dense = np.array([table[0, k // bs] * bs + k % bs for k in range(mine.size)])
        np.testing.assert_array_equal(mine, dense)
        assert (slots[ref.owner_rank(pos, world, inter) != rank] == -1).all()


def test_head_slice_and_gather():
    assert ref.head_slice(96, 2, 1) == slice(48, 96)
    with pytest.raises(ValueError):
        ref.head_slice(12, 8, 0)
    a, b = np.zeros((2, 3, 5)), np.ones((2, 3, 5))
    g = ref.gather_heads([a, b])
    assert g.shape == (2, 6, 5) and (g[:, 3:] == 1).all()


# ---- planted faults in a numpy copy of vLLM's AG+RS combine, in the op's own precision ----

def _combine_copy(outs, lses, dtype, lse_offset=0.0, swap=False, drop_rank=None):
    """Each rank: gather all LSEs, correct its own partial by exp(lse_r - LSE) (float32), round to `dtype`;
    then sum across ranks in `dtype` (the reduce-scatter) -- the structure of cp_lse_ag_out_rs."""
    lses = lses.astype(np.float32).copy()
    lses[1] += np.float32(lse_offset)  # fault: rank 1's LSE shifted before the gather
    lses = np.where(np.isfinite(lses), lses, np.float32(-np.inf))
    gathered = lses[::-1] if swap else lses  # fault: rank order swapped in the gather
    peak = np.max(gathered, axis=0)
    peak = np.where(np.isfinite(peak), peak, np.float32(0))
    glob = np.log(np.exp(gathered - peak).sum(axis=0)) + peak
    total = np.zeros(outs.shape[1:], dtype=dtype)
    for r in range(outs.shape[0]):
        with np.errstate(invalid="ignore"):
            factor = np.exp(gathered[r] - glob).astype(np.float32)  # rank r reads its LSE at index r
        part = np.where(factor[..., None] == 0, 0, outs[r].astype(np.float32) * factor[..., None]).astype(dtype)
        if r != drop_rank:
            total = (total + part).astype(dtype)
    return total, glob


def _judge(got, outs_q, lses_q, dtype):
    want, _ = ref.merge_partials(outs_q, lses_q)
    scale = ref.abs_weighted_scale(outs_q, lses_q)
    limit = tol.combine_out_limit(TOL, dtype, "float32", scale, tol.max_finite_abs(lses_q))
    dev = tol.deviation(got, want)
    return tol.verdict(dev, limit), dev, limit


def _random_partials(rng, dtype, world=2, batch=16, heads=8, dim=64):
    outs = rng.standard_normal((world, batch, heads, dim)).astype(dtype)
    lses = (rng.standard_normal((world, batch, heads)) * 2 + 3).astype(np.float32)
    return outs, lses


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_clean_copy_passes(dtype):
    outs, lses = _random_partials(np.random.default_rng(1), dtype)
    lses[1, :3] = np.inf  # empty shard on rank 1 (FlashAttention marker), NaN output
    outs[1, :3] = np.nan
    got, _ = _combine_copy(outs, lses, dtype)
    v, dev, limit = _judge(got, outs, lses, dtype)
    assert v == "PASS", (dev, limit)


@pytest.mark.parametrize("offset", [1e-3, 1e-2, 1e-1])
def test_lse_offset_is_caught_in_float32(offset):
    outs, lses = _random_partials(np.random.default_rng(2), "float32")
    got, _ = _combine_copy(outs, lses, "float32", lse_offset=offset)
    v, dev, limit = _judge(got, outs, lses, "float32")
    assert v == "FAIL" and dev.max_abs > 10 * limit, (offset, dev, limit)


def test_swapped_rank_order_and_dropped_rank_are_caught():
    outs, lses = _random_partials(np.random.default_rng(3), "float16")
    for kwargs in ({"swap": True}, {"drop_rank": 1}):
        got, _ = _combine_copy(outs, lses, "float16", **kwargs)
        assert _judge(got, outs, lses, "float16")[0] == "FAIL", kwargs


def test_unmasked_empty_shard_is_caught():
    outs, lses = _random_partials(np.random.default_rng(4), "float32")
    lses[1, 0] = np.inf
    outs[1, 0] = np.nan
    got, _ = _combine_copy(outs, lses, "float32")
    got_unmasked = got.copy()
    got_unmasked[0] = np.nan  # what an unmasked +inf marker yields (inf - inf)
    assert _judge(got, outs, lses, "float32")[0] == "PASS"
    v, dev, _ = _judge(got_unmasked, outs, lses, "float32")
    assert v == "FAIL" and dev.max_abs == np.inf


def test_local_length_one_short_is_caught_end_to_end_of_the_merge():
    """Last rank's shard one token short (its last local token dropped): merge no longer equals full attention."""
    rng = np.random.default_rng(5)
    world, inter, length = 2, 1, 33
    (q, k, v), outs, lses = _shards(length, world, inter, rng)
    owner = ref.owner_rank(np.arange(length), world, inter)
    last = np.flatnonzero(owner == world - 1)[:-1]
    short_out, short_lse = _attention(q, k[last], v[last])
    outs_bad, lses_bad = outs.copy(), lses.copy()
    outs_bad[-1], lses_bad[-1] = short_out, short_lse
    full, _ = _attention(q, k, v)
    for o, l_, want in ((outs, lses, "PASS"), (outs_bad, lses_bad, "FAIL")):
        oq = o.astype(np.float32)
        got, _ = _combine_copy(oq, l_, "float32")
        scale = ref.abs_weighted_scale(oq, l_)
        limit = tol.combine_out_limit(TOL, "float32", "float32", scale, tol.max_finite_abs(l_))
        assert tol.verdict(tol.deviation(got, full), limit) == want


def test_deviation_counts_nan_and_minus_inf_mismatch_as_infinite():
    assert tol.deviation(np.array([np.nan]), np.array([1.0])).max_abs == np.inf
    assert tol.deviation(np.array([0.0]), np.array([-np.inf])).max_abs == np.inf
    assert tol.deviation(np.array([-np.inf, 1.0]), np.array([-np.inf, 1.0])).max_abs == 0.0
    assert tol.deviation(np.zeros(2), np.zeros(3)).max_abs == np.inf


def test_limits_follow_the_dtype():
    bf = tol.combine_out_limit(TOL, "bfloat16", "float32", 1.0, 0.0)
    f32 = tol.combine_out_limit(TOL, "float32", "float32", 1.0, 0.0)
    assert bf == pytest.approx(4 * 2**-7 + 16 * 2**-23)
    assert f32 < bf / 1000
    with pytest.raises(ValueError):
        tol.eps("int8")
