"""The op-level cases (pure: specs and seeded float64 inputs, no torch, no vLLM)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from harness.opcheck import reference as ref

MARKERS = (-np.inf, np.inf, np.nan)  # empty-shard LSE markers, cycled (math, FlashAttention, undefined)


@dataclass(frozen=True)
class Case:
    id: str
    kind: str  # combine | graph | query_gather | lengths | prepare_lengths | slots | torch_combine
    op: str  # the vLLM function driven
    params: dict = field(default_factory=dict)

    def geometry(self) -> dict:
        return {k: v for k, v in self.params.items() if k not in ("seed",)}


@dataclass(frozen=True)
class Partials:
    """The per-rank partial outputs a combine case feeds the op: their shape and the pattern planted in them."""
    tokens: int
    heads: int
    head_dim: int
    pattern: str = "random"  # see combine_inputs


@dataclass
class CombineInputs:
    outs: np.ndarray  # [N, B, H, D] float64
    lses: np.ndarray  # [N, B, H] float64
    seq_lens: np.ndarray | None = None  # [N, R] per-rank local lengths (masked-args pattern)
    query_start_loc: np.ndarray | None = None  # [R + 1]


def combine_inputs(world: int, batch: int, heads: int, dim: int, pattern: str = "random", seed: int = 0,
                   real_rows: int | None = None, empty_out: float = np.nan) -> CombineInputs:
    """Random partials; `pattern` plants empty shards (a rank holding no KV of a short sequence), CUDA-graph padding
    rows (every rank empty), seed-PR masked rows (finite garbage LSE + seq_lens/query_start_loc) or large LSEs."""
    rng = np.random.default_rng(seed)
    outs = rng.standard_normal((world, batch, heads, dim))
    scale, shift = (20.0, 50.0) if pattern == "large_lse" else (2.0, 3.0)
    lses = rng.standard_normal((world, batch, heads)) * scale + shift
    if pattern in ("empty_shard", "masked_args"):
        seq = rng.integers(1, 2 * world + 1, size=batch)  # some sequences shorter than the DCP world
        seq[0] = 1
        local = ref.local_seq_lens(seq, world, 1).T  # [N, B]
        for r in range(world):
            for b in np.flatnonzero(local[r] == 0):
                lses[r, b] = 30.0 if pattern == "masked_args" else MARKERS[b % 3]  # finite garbage when masked
                outs[r, b] = empty_out
        if pattern == "masked_args":
            return CombineInputs(outs, lses, local.astype(np.int64), np.arange(batch + 1, dtype=np.int64))
    if pattern == "padding":
        real = batch // 2 if real_rows is None else real_rows
        for b in range(real, batch):
            lses[:, b] = MARKERS[b % 3]
            outs[:, b] = np.nan
    return CombineInputs(outs, lses)


def masked_lses(inp: CombineInputs) -> np.ndarray:
    """The seed PR's masking: a rank's row is empty when its local length is 0 or the row is past the real tokens."""
    lses = inp.lses.copy()
    if inp.seq_lens is None:
        return lses
    n_real = int(inp.query_start_loc[-1])
    for r in range(lses.shape[0]):
        for b in range(lses.shape[1]):
            req = int(np.searchsorted(inp.query_start_loc[1:], b, side="right"))
            if b >= n_real or inp.seq_lens[r, min(req, inp.seq_lens.shape[1] - 1)] == 0:
                lses[r, b] = -np.inf
    return lses


def build_cases(world: int, device: str) -> list[Case]:
    cases: list[Case] = []

    def combine(op, name, dtype, partials, return_lse=True, base_e=True, seed=0, **extra):
        cases.append(Case(f"{op}/{name}/{dtype}", "combine", op, dict(
            dtype=dtype, **asdict(partials), return_lse=return_lse, base_e=base_e, seed=seed, **extra)))

    rs = "cp_lse_ag_out_rs"
    for i, dtype in enumerate(("bfloat16", "float16", "float32")):
        combine(rs, "h16d512", dtype, Partials(7, 16, 512), seed=10 + i)
    combine(rs, "transport96", "bfloat16", Partials(33, 96, 512), return_lse=False, seed=20)
    combine(rs, "transport96", "float32", Partials(33, 96, 512), seed=21)
    combine(rs, "h32d128b64", "bfloat16", Partials(64, 32, 128), seed=22)
    combine(rs, "base2", "float32", Partials(5, 16, 512), base_e=False, seed=23)
    combine(rs, "large_lse", "float32", Partials(9, 16, 512, "large_lse"), seed=24)
    combine(rs, "empty_shard", "float32", Partials(12, 16, 512, "empty_shard"), seed=25)
    combine(rs, "empty_shard", "bfloat16", Partials(12, 16, 512, "empty_shard"), seed=26)
    combine(rs, "padding_rows", "float32", Partials(16, 16, 512, "padding"), seed=27)
    combine(rs, "masked_args", "float32", Partials(12, 16, 512, "masked_args"), seed=28)
    ar = "cp_lse_ag_out_ar"
    combine(ar, "h16d512", "float32", Partials(7, 16, 512), seed=30)
    combine(ar, "h16d512", "bfloat16", Partials(7, 16, 512), seed=31)
    a2a = "dcp_a2a_lse_reduce"
    combine(a2a, "h16d512", "float32", Partials(7, 16, 512), seed=40)
    combine(a2a, "h16d512", "bfloat16", Partials(7, 16, 512), seed=41)
    # The all-to-all reduce weights outputs by multiplication, so an empty shard's NaN output poisons the sum
    # (NaN x 0; measured on H200 with 0.25.0, where ag_rs zeroes it). It is not 0.25.0's default backend (ag_rs is):
    # its empty-shard case feeds zero outputs, the contract it needs; docs/evidence records the NaN finding.
    combine(a2a, "empty_shard", "bfloat16", Partials(12, 16, 512, "empty_shard"), seed=42, empty_out=0.0)
    cases.append(Case("_lse_weighted_combine/empty_shard/float32", "torch_combine", "_lse_weighted_combine",
                      dict(dtype="float32", tokens=12, heads=16, head_dim=64, pattern="empty_shard",
                           return_lse=True, base_e=True, seed=50, empty_out=0.0)))
    for dtype, heads, seed in (("float32", 16, 60), ("bfloat16", 16, 61), ("bfloat16", 96, 62)):
        cases.append(Case(f"{rs}/cuda_graph_replay/h{heads}/{dtype}", "graph", rs, dict(
            dtype=dtype, tokens=8, heads=heads, head_dim=512, return_lse=True, base_e=True, replays=3,
            with_query_gather=heads == 96, seed=seed)))
    for local_heads in (8, 48):
        cases.append(Case(f"mla_query_gather/h{local_heads * world}x576", "query_gather", "mla_query_gather",
                          dict(dtype="bfloat16", tokens=5, local_heads=local_heads, nope=512, rope=64, seed=70)))
    cases.append(Case("GroupCoordinator.all_gather/dim1/h48x576", "query_gather", "GroupCoordinator.all_gather",
                      dict(dtype="bfloat16", tokens=5, local_heads=48, nope=512, rope=64, seed=71)))
    for inter in (1, 2, 16, 64):
        cases.append(Case(f"get_dcp_local_seq_lens/I{inter}", "lengths", "get_dcp_local_seq_lens",
                          dict(interleave=inter, worlds=sorted({world, 2, 4, 8, 16}))))
        cases.append(Case(f"prepare_dcp_local_seq_lens/I{inter}", "prepare_lengths", "prepare_dcp_local_seq_lens",
                          dict(interleave=inter, num_reqs=11, max_num_reqs=16)))
    for inter in (1, 4):
        cases.append(Case(f"BlockTable.compute_slot_mapping/I{inter}", "slots", "BlockTable",
                          dict(interleave=inter, block_size=16)))
    return cases


def length_sweep(world: int, interleave: int) -> np.ndarray:
    """Every length through three full rounds (incl. 0 and those shorter than the world) plus long ones."""
    span = world * interleave
    return np.concatenate([np.arange(0, 3 * span + 2), [131_072 + 7, 2 * 1_048_576 - 1, 114_000 + 6_000]])
