"""Find the installed vLLM's DCP building blocks (they move between versions); a miss is a message, not a crash.

Runs in the server environment (imports vLLM)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# name -> modules that have held it (0.25.0 first, newer layouts after)
CANDIDATES: dict[str, tuple[str, ...]] = {
    "cp_lse_ag_out_rs": ("vllm.v1.attention.ops.common", "vllm.v1.attention.ops.dcp"),
    "cp_lse_ag_out_ar": ("vllm.v1.attention.ops.common", "vllm.v1.attention.ops.dcp"),
    "dcp_a2a_lse_reduce": ("vllm.v1.attention.ops.dcp_alltoall", "vllm.v1.attention.ops.dcp"),
    "_lse_weighted_combine": ("vllm.v1.attention.ops.dcp_alltoall", "vllm.v1.attention.ops.dcp"),
    "get_dcp_local_seq_lens": ("vllm.v1.attention.backends.utils",),
    "prepare_dcp_local_seq_lens": ("vllm.v1.worker.gpu.cp_utils",),
    "BlockTable": ("vllm.v1.worker.block_table",),
}
MLA_MODULE = "vllm.model_executor.layers.attention.mla_attention"
MLA_GATHER_GUARD = "self.impl.dcp_world_size > 1"


class NotFound(Exception):
    """An op the suite looks for is not in the installed vLLM; the message names what was looked for where."""


def vllm_version() -> str:
    try:
        import vllm

        return str(getattr(vllm, "__version__", "unknown"))
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return f"unimportable ({type(exc).__name__}: {exc})"


@dataclass(frozen=True)
class Op:
    name: str
    where: str  # "module:qualname" or "file:lines"
    fn: Callable[..., Any]


def locate(name: str) -> Op:
    tried = []
    for module_name in CANDIDATES[name]:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001
            tried.append(f"{module_name} (import failed: {type(exc).__name__}: {exc})")
            continue
        if hasattr(module, name):
            return Op(name, f"{module_name}:{name}", getattr(module, name))
        tried.append(f"{module_name} (no attribute {name})")
    raise NotFound(f"{name} not found in the installed vLLM {vllm_version()}; looked in: {'; '.join(tried)}")


def _mla_gather_block(source: str) -> tuple[list[ast.stmt], int, int] | None:
    """The body of `if self.impl.dcp_world_size > 1:` that all-gathers the decode query over the DCP group."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.If) or ast.unparse(node.test) != MLA_GATHER_GUARD:
            continue
        body_src = "\n".join(ast.unparse(s) for s in node.body)
        if "get_dcp_group().all_gather(" in body_src and "mqa_q" in body_src:
            return node.body, node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno
    return None


def locate_query_gather() -> Op:
    """0.25.0 gathers the MLA decode query inline in MLAAttention's forward: run those installed statements.

    Newer layouts: MLADCPManager._gather_query (vllm.v1.attention.ops.dcp), driven without its constructor."""
    tried = []
    spec = importlib.util.find_spec(MLA_MODULE)
    if spec is not None and spec.origin:
        path = Path(spec.origin)
        found = _mla_gather_block(path.read_text())
        if found is not None:
            body, first, last = found
            code = compile(ast.Module(body=body, type_ignores=[]), str(path), "exec")

            def gather(mqa_q):
                import torch
                from vllm.distributed import get_dcp_group

                ns = {"torch": torch, "get_dcp_group": get_dcp_group, "mqa_q": mqa_q}
                exec(code, ns)  # noqa: S102 - the installed vLLM's own statements
                return ns["mqa_q"]

            return Op("mla_query_gather", f"{path}:{first}-{last}", gather)
        tried.append(f"{path} (no `if {MLA_GATHER_GUARD}:` block with get_dcp_group().all_gather(mqa_q ...))")
    else:
        tried.append(f"{MLA_MODULE} (module not found)")
    try:
        from vllm.distributed import get_dcp_group
        from vllm.v1.attention.ops.dcp import MLADCPManager  # type: ignore[attr-defined]

        def gather_new(mqa_q):
            import torch

            if isinstance(mqa_q, tuple):
                mqa_q = torch.cat(mqa_q, dim=-1)
            mgr = MLADCPManager.__new__(MLADCPManager)
            mgr.group, mgr.padded_num_heads = get_dcp_group(), None
            return mgr._gather_query(mqa_q)

        return Op("mla_query_gather", "vllm.v1.attention.ops.dcp:MLADCPManager._gather_query", gather_new)
    except Exception as exc:  # noqa: BLE001
        tried.append(f"vllm.v1.attention.ops.dcp:MLADCPManager._gather_query ({type(exc).__name__}: {exc})")
    raise NotFound(f"the MLA decode query gather was not found in vLLM {vllm_version()}; looked in: {'; '.join(tried)}")
