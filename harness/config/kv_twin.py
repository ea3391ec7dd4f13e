"""The KV pool output_coverage's kv_pressure and recycled_blocks families need, and the KV-capped twin that gives it
(pure): a GPU arm's pool is too large to overflow or turn over, so an arm not capped to serve them runs them on a
twin with `--num-gpu-blocks-override N` computed here and its block size pinned (docs/suites.md)."""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from harness.config.arms import Arm
from harness.config.cache_unit import cache_unit
from harness.config.errors import ConfigError
from harness.config.workloads import OutputCoverageWorkload

TWIN_SUFFIX = ".kv-twin"  # a '.' no configs/arms file name uses: a twin never shadows a YAML arm
KV_FAMILIES = "kv_pressure/recycled_blocks"


def twin_name(arm: str) -> str:
    return f"{arm}{TWIN_SUFFIX}"


def pinned_block_size(arm: Arm) -> int | None:
    """The block size the arm's server.args pin (--block-size N, --block-size=N, --block_size N); None: not pinned."""
    args = arm.server.args
    for i, a in enumerate(args):
        name, _, value = a.partition("=")
        if name.replace("_", "-") == "--block-size":
            text = value if value else (args[i + 1] if i + 1 < len(args) else "")
            return int(text) if text.isdigit() else None
    return None


@dataclass(frozen=True)
class KvSizing:
    """A pool of `blocks` blocks, each `block_size` tokens per rank (x the DCP size: the tokens one scheduler block
    holds, as harness/refcheck/send/coverage_send.py Pool counts them); vLLM keeps one block back (its null block)."""

    blocks: int
    block_size: int
    dcp: int
    source: str  # where block_size comes from

    @property
    def block_tokens(self) -> int:
        return cache_unit(self.block_size, self.dcp)

    @property
    def usable(self) -> int:
        return self.blocks - 1


def block_size(arm: Arm, w: OutputCoverageWorkload) -> tuple[int, str] | None:
    """The block size the pool is counted in: the arm's pinned --block-size, else the workload's stated block_size
    (the backend's default it assumes); None where neither says."""
    if (pinned := pinned_block_size(arm)) is not None:
        return pinned, f"arm {arm.name} server.args --block-size"
    if w.block_size is not None:
        return w.block_size, f"workload {w.name} block_size"
    return None


def blocks_at(tokens: int, block_tokens: int) -> int:
    return ceil(tokens / block_tokens)


def needed_blocks(w: OutputCoverageWorkload, max_model_len: int, block_tokens: int) -> int:
    """N for the twin: with kv_pressure, the whole burst's prompts plus one token each, the null block and a spare
    (the first block boundary then preempts); else one request of max_model_len plus those two."""
    if p := w.pressure:
        return p.requests * blocks_at(p.prompt_tokens + 1, block_tokens) + 2
    return blocks_at(max_model_len, block_tokens) + 2


def pool_problems(s: KvSizing, w: OutputCoverageWorkload, max_model_len: int) -> list[str]:
    """Why a pool of this sizing cannot do what the families need (pure): hold one request of max_model_len (vLLM
    refuses a smaller KV cache), admit the whole burst, be overflowed by it, be turned over by the fill within
    recycled.max_fill_tokens. Empty: it can."""
    out, bt = [], s.block_tokens
    if s.usable * bt < max_model_len:
        out.append(f"{s.usable:,} usable blocks of {bt} tokens hold {s.usable * bt:,} tokens, less than max_model_len "
                   f"{max_model_len:,} (vLLM refuses a KV cache that cannot hold one request): raise "
                   "pressure.requests or pressure.prompt_tokens")
    if p := w.pressure:
        start, end = blocks_at(p.prompt_tokens + 1, bt), blocks_at(p.prompt_tokens + p.output_tokens, bt)
        if p.requests * end <= s.usable:
            out.append(f"the burst ({p.requests} requests x {end} blocks = {p.requests * end:,}) fits {s.usable:,} "
                       "usable blocks: nothing can be preempted; raise pressure.requests or pressure.output_tokens")
        if p.requests * start > s.usable:
            out.append(f"the burst's prompts ({p.requests} x {start} blocks = {p.requests * start:,}) do not all fit "
                       f"{s.usable:,} usable blocks: the request preempted may have generated nothing to restore")
    if r := w.recycled:
        fill = int(s.blocks * bt * r.fill_factor) + 1
        if fill > r.max_fill_tokens:
            out.append(f"filling the pool of {s.blocks * bt:,} tokens {r.fill_factor}x takes {fill:,} tokens, more "
                       f"than recycled.max_fill_tokens {r.max_fill_tokens:,}")
    return out


def own_sizing(arm: Arm, w: OutputCoverageWorkload) -> KvSizing | None:
    """The arm's own cap as a sizing (None: uncapped, or its block size unknown)."""
    size = block_size(arm, w)
    if arm.server.kv_cache_blocks is None or size is None:
        return None
    return KvSizing(arm.server.kv_cache_blocks, size[0], arm.parallelism.dcp, size[1])


def needs_twin(arm: Arm, w: OutputCoverageWorkload) -> bool:
    """The workload plans kv_pressure or recycled_blocks cells and the arm's own KV cap cannot serve them (a cap of
    unknown block size is taken as it is: the run's counters prove it)."""
    if w.pressure is None and w.recycled is None:
        return False
    if arm.server.kv_cache_blocks is None:
        return True
    own = own_sizing(arm, w)
    return own is not None and bool(pool_problems(own, w, arm.model.max_model_len))


def twin_sizing(arm: Arm, w: OutputCoverageWorkload) -> KvSizing:
    """The twin's pool; ConfigError naming the arm and the fields to set where its block size is unknown."""
    size = block_size(arm, w)
    if size is None:
        raise ConfigError(f"arm {arm.name!r}: workload {w.name!r} plans {KV_FAMILIES} cells and the arm's KV cache is "
                          "not capped for them, so they run on a KV-capped twin whose cap counts blocks: pin the "
                          "block size in the arm's server.args (--block-size N) or set block_size in "
                          f"configs/workloads/{w.name}.yaml")
    bt = size[0] * arm.parallelism.dcp
    return KvSizing(needed_blocks(w, arm.model.max_model_len, bt), size[0], arm.parallelism.dcp, size[1])


def derivation(s: KvSizing, w: OutputCoverageWorkload, max_model_len: int) -> str:
    """The cap's arithmetic in one sentence (admission's verdict, the twin's description)."""
    bt = s.block_tokens
    where = f"blocks of {s.block_size} tokens" + (f" x DCP {s.dcp}" if s.dcp > 1 else "") + f" ({s.source})"
    if p := w.pressure:
        start, end = blocks_at(p.prompt_tokens + 1, bt), blocks_at(p.prompt_tokens + p.output_tokens, bt)
        return (f"{s.blocks:,} {where}: {p.requests} requests x {start} blocks at their first generated token "
                f"+ the null block + 1 spare; the burst needs {p.requests} x {end} = {p.requests * end:,} > "
                f"{s.usable:,} usable: preemption is certain; holds max_model_len {max_model_len:,}")
    return f"{s.blocks:,} {where}: one request of max_model_len {max_model_len:,} + the null block + 1 spare"


def kv_twin(arm: Arm, w: OutputCoverageWorkload) -> Arm | None:
    """The arm's KV-capped twin where it needs one (needs_twin), else None: the arm itself, its server's KV capped at
    the computed blocks and its block size pinned, no eager variant of its own. ConfigError where it cannot be sized."""
    if not needs_twin(arm, w):
        return None
    s = twin_sizing(arm, w)
    args = list(arm.server.args) if pinned_block_size(arm) else [*arm.server.args, "--block-size", str(s.block_size)]
    server = arm.server.model_copy(update={"kv_cache_blocks": s.blocks, "args": args})
    return arm.model_copy(update={
        "name": twin_name(arm.name), "server": server, "eager_variant": None,
        "description": f"{arm.name} with its KV cache capped for {KV_FAMILIES}: "
                       f"{derivation(s, w, arm.model.max_model_len)}"})
