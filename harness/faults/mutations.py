"""Mutation benchmark: plant faults in the installed vLLM 0.25.0's DCP path, reversibly.

    python -m harness.faults.mutations list [--names]
    python -m harness.faults.mutations verify [--source /tmp/vllm025]     # each old text found exactly once
    python -m harness.faults.mutations apply NAME --site-dir /tmp/site      # one fault at a time
    python -m harness.faults.mutations restore --site-dir /tmp/site         # byte-identical original (sha256 checked)

Each fault is a list of exact text substitutions on vLLM 0.25.0's source (the old snippets are shipped here, so
the table is checked without the source too). `apply` refuses when a snippet is not found exactly once or another
fault is applied; it keeps the original files under <site-dir>/.dcp_mutation/ with their sha256, and `restore`
puts them back and checks the sha256.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

COMMON = "vllm/v1/attention/ops/common.py"
UTILS = "vllm/v1/attention/backends/utils.py"
CP_UTILS = "vllm/v1/worker/gpu/cp_utils.py"
BLOCK_TABLE = "vllm/v1/worker/block_table.py"
BLOCK_TABLE_V2 = "vllm/v1/worker/gpu/block_table.py"
MLA = "vllm/model_executor/layers/attention/mla_attention.py"
STATE = ".dcp_mutation"


@dataclass(frozen=True)
class Edit:
    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Fault:
    name: str
    site: str  # file:function
    what: str
    edits: tuple[Edit, ...]


_LSE_OLD = "    cp_attn_lse = cp_attn_lse.contiguous()\n    lses = cp_group.all_gather(cp_attn_lse, dim=0).reshape(\n"


# Each LSE fault also appends the number of rows it shifted to PROBE.<rank>: the reach of the fault (how many
# query positions x layers went through the cross-rank merge) is measured, not inferred from the backend's rules.
PROBE = "/tmp/dcp_combine_rows"


def _lse_offset(off: str) -> Fault:
    return Fault(
        f"lse_offset_{off}", f"{COMMON}:_cp_lse_common",
        f"DCP rank 1's attention LSE + {off} before the all-gather (its partial output over-weighted by ~{off}); "
        f"rows merged counted to {PROBE}.<rank>",
        (Edit(COMMON, _LSE_OLD, _LSE_OLD.replace(
            "cp_attn_lse = cp_attn_lse.contiguous()",
            f"cp_attn_lse = (cp_attn_lse + ({off} if cp_group.rank_in_group == 1 else 0.0)).contiguous()\n"
            f"    with open(f\"{PROBE}.{{cp_group.rank_in_group}}\", \"a\") as _probe:\n"
            f"        _probe.write(f\"{{cp_attn_lse.shape[0]}}\\n\")")),))


FAULTS: tuple[Fault, ...] = (
    _lse_offset("1e-3"),
    _lse_offset("1e-2"),
    _lse_offset("3e-2"),
    _lse_offset("1e-1"),
    Fault("kv_len_short_last_rank", f"{UTILS}:get_dcp_local_seq_lens + {CP_UTILS}:_dcp_local_seq_lens_kernel",
          "the last DCP rank's local KV length one token short (V1 runner helper and V2 runner kernel)",
          (Edit(UTILS, "    dcp_local_seq_lens = base + remainder\n    return dcp_local_seq_lens\n",
                "    dcp_local_seq_lens = torch.clamp(base + remainder - (rank_offsets + 1) // dcp_size, min=0)\n"
                "    return dcp_local_seq_lens\n"),
           Edit(CP_UTILS, "    local_seq_lens = rounds * cp_interleave + remainder\n",
                "    local_seq_lens = tl.maximum(\n"
                "        rounds * cp_interleave + remainder - (dcp_rank + 1) // dcp_size, 0\n    )\n"))),
    Fault("interleave_off_by_one", f"{BLOCK_TABLE}:_compute_slot_mapping_kernel + {BLOCK_TABLE_V2}",
          "KV slot mapping assigns token p to the rank that owns p+1 (interleave mapping shifted by one token)",
          (Edit(BLOCK_TABLE, "        is_local = (\n            virtual_block_offsets // CP_KV_CACHE_INTERLEAVE_SIZE\n",
                "        is_local = (\n            (virtual_block_offsets + 1) // CP_KV_CACHE_INTERLEAVE_SIZE\n"),
           Edit(BLOCK_TABLE_V2, "            is_local = block_offsets // CP_INTERLEAVE % CP_SIZE == cp_rank\n",
                "            is_local = (block_offsets + 1) // CP_INTERLEAVE % CP_SIZE == cp_rank\n"))),
    Fault("empty_lse_unmasked", f"{COMMON}:_correct_attn_cp_out_kernel",
          "NaN/+inf LSE of an empty shard or CUDA-graph padding row no longer mapped to -inf before the merge",
          (Edit(COMMON, '    lse = tl.where((lse != lse) | (lse == float("inf")), -float("inf"), lse)\n',
                "    lse = lse + 0.0\n"),)),
    Fault("empty_output_unmasked", f"{COMMON}:_correct_attn_cp_out_kernel",
          "an empty shard's undefined (NaN) partial output no longer zeroed where its weight is 0",
          (Edit(COMMON, "    output = tl.where(factor == 0.0, 0.0, output)\n", "    output = output + 0.0\n"),)),
    Fault("swapped_rank_order", f"{COMMON}:_cp_lse_common",
          "all-gathered LSEs in reversed rank order: each rank corrects its output with another rank's LSE",
          (Edit(COMMON, "        (cp_group.world_size,) + cp_attn_lse.shape\n    )\n    out, lse = correct_attn_out(\n",
                "        (cp_group.world_size,) + cp_attn_lse.shape\n    ).flip(0)\n"
                "    out, lse = correct_attn_out(\n"),)),
    Fault("correction_not_applied", f"{COMMON}:_correct_attn_cp_out_kernel",
          "partial outputs summed without the exp(lse_r - LSE) correction factor",
          (Edit(COMMON, "    output = output * factor\n", "    output = output * 1.0\n"),)),
    Fault("rank1_dropped", f"{COMMON}:cp_lse_ag_out_rs",
          "DCP rank 1's corrected contribution dropped from the reduce-scatter",
          (Edit(COMMON, "    out = cp_group.reduce_scatter(out, dim=1)\n",
                "    out = cp_group.reduce_scatter(out * (cp_group.rank_in_group != 1), dim=1)\n"),)),
    Fault("query_gather_swapped", f"{MLA}:MLAAttention.forward (decode query all-gather)",
          "the MLA decode query all-gathered over DCP in reversed rank order (heads meet the wrong ranks' rows)",
          (Edit(MLA, "                mqa_q = get_dcp_group().all_gather(mqa_q, dim=1)\n",
                "                mqa_q = torch.cat(get_dcp_group().all_gather(mqa_q, dim=1)"
                ".chunk(get_dcp_group().world_size, dim=1)[::-1], dim=1)\n"),)),
)
BY_NAME = {f.name: f for f in FAULTS}


class MutationError(Exception):
    pass


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def patched_text(text: str, edits: list[Edit], path: str) -> str:
    for e in edits:
        n = text.count(e.old)
        if n != 1:
            raise MutationError(f"{path}: expected the 0.25.0 snippet exactly once, found {n}x:\n{e.old}")
        text = text.replace(e.old, e.new)
    return text


def _by_file(fault: Fault) -> dict[str, list[Edit]]:
    files: dict[str, list[Edit]] = {}
    for e in fault.edits:
        files.setdefault(e.path, []).append(e)
    return files


def _drop_pyc(path: Path) -> None:
    for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        pyc.unlink(missing_ok=True)


def apply(name: str, site: Path, table: dict[str, Fault] | None = None) -> dict:
    """`table`: another fault table (harness/faults/length_faults) than this file's DCP faults."""
    table = BY_NAME if table is None else table
    fault = table.get(name)
    if fault is None:
        raise MutationError(f"unknown fault {name!r}; known: {', '.join(table)}")
    state = site / STATE
    if (state / "state.json").exists():
        raise MutationError(f"{json.loads((state / 'state.json').read_text())['fault']} is applied; restore first")
    new_texts = {}
    for rel, edits in _by_file(fault).items():  # check every file before touching any
        if (site / rel).is_symlink():  # a scratch copy made of links: writing would patch the installed file
            raise MutationError(f"{site / rel} is a symlink; copy the file into the scratch tree first")
        new_texts[rel] = patched_text((site / rel).read_text(), edits, rel)
        compile(new_texts[rel], rel, "exec")
    state.mkdir(parents=True, exist_ok=True)
    record = {"fault": name, "files": {}}
    for rel in new_texts:
        src = site / rel
        backup = state / rel.replace("/", "__")
        shutil.copy2(src, backup)
        record["files"][rel] = {"sha256": sha256(src), "backup": backup.name}
    (state / "state.json").write_text(json.dumps(record, indent=1))
    for rel, text in new_texts.items():
        (site / rel).write_text(text)
        _drop_pyc(site / rel)
    return record


def restore(site: Path, table: dict[str, Fault] | None = None) -> dict:
    state = site / STATE
    if not (state / "state.json").exists():
        return {"fault": None, "restored": []}
    record = json.loads((state / "state.json").read_text())
    fault = (BY_NAME if table is None else table).get(record["fault"])
    restored = []
    for rel, info in record["files"].items():
        src = site / rel
        text = src.read_text()
        for e in _by_file(fault)[rel] if fault else []:  # unknown to this table: the backup alone
            text = text.replace(e.new, e.old) if text.count(e.new) == 1 else text
        src.write_text(text)
        if sha256(src) != info["sha256"]:  # reverse substitution did not give the original: take the backup
            shutil.copy2(state / info["backup"], src)
        if sha256(src) != info["sha256"]:
            raise MutationError(f"{rel}: sha256 after restore {sha256(src)} != original {info['sha256']}")
        _drop_pyc(src)
        restored.append(rel)
    shutil.rmtree(state)
    return {"fault": record["fault"], "restored": restored}


def verify(source: Path, faults: tuple[Fault, ...] = FAULTS) -> list[str]:
    """Problems (empty when every snippet is found exactly once in `source` and the patched file compiles)."""
    problems = []
    for fault in faults:
        for rel, edits in _by_file(fault).items():
            path = source / rel
            if not path.exists():
                problems.append(f"{fault.name}: {path} missing")
                continue
            try:
                compile(patched_text(path.read_text(), edits, rel), rel, "exec")
            except (MutationError, SyntaxError) as exc:
                problems.append(f"{fault.name}: {exc}")
    return problems


def add_apply_restore(sub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    """The `apply NAME --site-dir DIR` and `restore --site-dir DIR` subcommands, shared with length_faults."""
    a = sub.add_parser("apply")
    a.add_argument("name")
    r = sub.add_parser("restore")
    for p in (a, r):
        p.add_argument("--site-dir", type=Path, required=True)
    return [a, r]


def apply_or_restore(args: argparse.Namespace, table: dict[str, Fault] | None = None) -> int:
    """Runs `apply` or `restore` from `add_apply_restore`'s arguments; the state record as JSON on stdout."""
    done = apply(args.name, args.site_dir, table) if args.cmd == "apply" else restore(args.site_dir, table)
    print(json.dumps(done))
    return 0


def exit_code(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Runs one CLI subcommand; a refused edit is exit code 2 with the reason on stderr, not a traceback."""
    try:
        return command(args)
    except MutationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _command(args: argparse.Namespace) -> int:
    if args.cmd == "list" and args.names:
        print("\n".join(BY_NAME))
    elif args.cmd == "list":
        for f in FAULTS:
            print(f"{f.name:24} {f.site}\n{'':24} {f.what}")
    elif args.cmd == "verify":
        problems = verify(args.source)
        print("\n".join(problems) or f"all {len(FAULTS)} faults apply exactly once to {args.source}")
        return 1 if problems else 0
    else:
        return apply_or_restore(args)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list")
    ls.add_argument("--names", action="store_true", help="only the fault names, one a line")
    v = sub.add_parser("verify")
    v.add_argument("--source", type=Path, default=Path("/tmp/vllm025"), help="directory holding vllm/ (0.25.0)")
    add_apply_restore(sub)
    return exit_code(_command, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
